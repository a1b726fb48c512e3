/**
 * Client voice activity detection for instant barge-in: plain objects, no DOM, no audio APIs, so
 * the same code runs in the capture AudioWorklet and can be tested anywhere.
 *
 * Energy detector on short frames (RMS in dBFS: 20·log10(rms), full-scale square wave = 0 dBFS):
 * - an adaptive noise floor that follows the quiet level: it falls fast (time constant
 *   `noiseFallMs`) and rises slowly (at most `noiseRiseDbPerS`), the classic minimum-tracking
 *   floor of energy VADs (cf. R. Martin, "Noise power spectral density estimation based on
 *   optimal smoothing and minimum statistics", IEEE TSAP 2001, simplified to one band);
 * - hysteresis: a frame at or above the onset threshold starts a candidate; it goes on while
 *   frames stay at or above the release threshold (`hysteresisDb` lower); a gap of
 *   `hangoverMs` below it ends it;
 * - the candidate fires once it holds `minSpeechMs` of frames at or above the release threshold;
 * - echo guard: while the assistant plays (and for `echoHoldMs` after), the onset threshold is
 *   `playingOnsetMarginDb` above the floor instead of `onsetMarginDb`, and at least
 *   `echoCouplingDb + echoMarginDb` above the assistant's own output level (peak-held for
 *   `echoHoldMs`, then decaying at `echoDecayDbPerS` like a room's reverberation tail), so the
 *   assistant's voice leaking into the microphone does not fire.
 */

/**
 * Default VAD parameters (dB values are dBFS or dB differences; times in ms).
 * `minSpeechMs` 200 is the default; the margins are the usual energy-VAD range
 * (onset 10-15 dB over the floor, release 6 dB lower); `echoCouplingDb` -20 assumes the browser's
 * echo canceller is on (it is requested); `echoHoldMs` covers output + input latency.
 */
export const DEFAULT_VAD_CONFIG = Object.freeze({
  frameMs: 10, // analysis frame
  minSpeechMs: 200, // speech held this long (frames at/above release) before the VAD fires
  hangoverMs: 200, // this long below the release threshold ends speech (or drops a candidate)
  onsetMarginDb: 12, // onset threshold above the noise floor, assistant silent
  playingOnsetMarginDb: 18, // onset threshold above the noise floor while the assistant plays
  hysteresisDb: 6, // release threshold = onset threshold - this
  minOnsetDb: -55, // the onset threshold is never below this (digital silence has no floor)
  noiseRiseDbPerS: 3, // how fast the floor may rise towards louder input
  noiseFallMs: 150, // time constant of the floor falling towards quieter input
  minNoiseFloorDb: -90,
  maxNoiseFloorDb: -30,
  echoCouplingDb: -20, // assumed level of the assistant's voice at the mic vs its output level
  echoMarginDb: 6, // speech must be this much above that expected echo
  echoHoldMs: 200, // playback level is held this long (output + input latency)
  echoDecayDbPerS: 40, // then decays at this rate (reverberation tail)
});

/** Floor of every level in dBFS (digital silence). */
export const SILENCE_DB = -100;

/** RMS level of `samples` in dBFS, at least SILENCE_DB. */
export function rmsDb(samples) {
  let sum = 0;
  for (let i = 0; i < samples.length; i += 1) sum += samples[i] * samples[i];
  const rms = Math.sqrt(sum / Math.max(samples.length, 1));
  return Math.max(SILENCE_DB, 20 * Math.log10(rms || 1e-10));
}

/**
 * The assistant's output level as the microphone may hear it: the latest playback level reports
 * (dBFS of ~20 ms output blocks), peak-held for `echoHoldMs`, then decaying at
 * `echoDecayDbPerS`. Times are seconds on one clock (the capture context's).
 */
export class EchoReference {
  #config;
  #peakDb = SILENCE_DB;
  #peakAt = -Infinity;
  #activeAt = -Infinity;

  constructor(config) {
    this.#config = config;
  }

  /** A playback report: its level (dBFS), whether assistant audio was rendered, at `timeS`. */
  update(db, active, timeS) {
    if (db >= this.levelAt(timeS)) {
      this.#peakDb = db;
      this.#peakAt = timeS;
    }
    if (active) this.#activeAt = timeS;
  }

  /** Expected output level (dBFS) still reaching the microphone at `timeS`. */
  levelAt(timeS) {
    const late = timeS - this.#peakAt - this.#config.echoHoldMs / 1000;
    if (late <= 0) return this.#peakDb;
    return Math.max(SILENCE_DB, this.#peakDb - late * this.#config.echoDecayDbPerS);
  }

  /** Whether assistant audio played within the last `echoHoldMs` before `timeS`. */
  playingAt(timeS) {
    return timeS - this.#activeAt <= this.#config.echoHoldMs / 1000;
  }
}

/**
 * The detector. Feed it consecutive frames of `config.frameMs`; it returns the transitions each
 * frame caused, in order (usually none; 'onset' and 'fired' together when minSpeechMs <= frameMs):
 *   'onset'    a candidate started on this frame (state 'speech');
 *   'fired'    the candidate held `minSpeechMs` (state 'fired'): a barge-in, if the assistant
 *              is speaking;
 *   'released' speech (a candidate or fired speech) ended after `hangoverMs` below release
 *              (state 'idle').
 */
export class EnergyVad {
  #config;
  /** 'idle' | 'speech' | 'fired' */
  state = 'idle';
  noiseFloorDb = null;
  levelDb = SILENCE_DB;
  onsetDb = null;
  playing = false;
  /** start time (s) of the frame that began the current candidate, or null */
  onsetTime = null;
  #voicedMs = 0;
  #gapMs = 0;

  /** @param {typeof DEFAULT_VAD_CONFIG} config */
  constructor(config) {
    this.#config = config;
    this.echo = new EchoReference(config);
  }

  /**
   * Analyse one frame that started at `timeS` (seconds).
   * @param {Float32Array} samples
   * @returns {Array<'onset'|'fired'|'released'>}
   */
  process(samples, timeS) {
    const c = this.#config;
    const level = rmsDb(samples);
    this.levelDb = level;
    this.noiseFloorDb ??= clamp(level, c.minNoiseFloorDb, c.maxNoiseFloorDb);
    this.playing = this.echo.playingAt(timeS);
    const margin = this.playing ? c.playingOnsetMarginDb : c.onsetMarginDb;
    const echoDb = this.echo.levelAt(timeS) + c.echoCouplingDb + c.echoMarginDb;
    const onset = Math.max(this.noiseFloorDb + margin, c.minOnsetDb, echoDb);
    this.onsetDb = onset;
    this.#trackFloor(level);
    return this.#step(level, onset, onset - c.hysteresisDb, timeS);
  }

  #trackFloor(level) {
    const c = this.#config;
    const floor = this.noiseFloorDb;
    const next = level < floor
      ? floor + (level - floor) * (1 - Math.exp(-c.frameMs / c.noiseFallMs))
      : floor + Math.min(level - floor, (c.noiseRiseDbPerS * c.frameMs) / 1000);
    this.noiseFloorDb = clamp(next, c.minNoiseFloorDb, c.maxNoiseFloorDb);
  }

  #step(level, onset, release, timeS) {
    const c = this.#config;
    if (this.state === 'idle') {
      if (level < onset) return [];
      this.state = 'speech';
      this.onsetTime = timeS;
      this.#voicedMs = 0;
      this.#gapMs = 0;
      return ['onset', ...this.#hold(c)];
    }
    if (level >= release) {
      this.#gapMs = 0;
      return this.state === 'speech' ? this.#hold(c) : [];
    }
    this.#gapMs += c.frameMs;
    if (this.#gapMs < c.hangoverMs) return [];
    this.state = 'idle';
    this.onsetTime = null;
    return ['released'];
  }

  /** Count one voiced frame of a candidate: ['fired'] once it held minSpeechMs. */
  #hold(c) {
    this.#voicedMs += c.frameMs;
    if (this.#voicedMs < c.minSpeechMs) return [];
    this.state = 'fired';
    return ['fired'];
  }
}

function clamp(value, low, high) {
  return Math.min(Math.max(value, low), high);
}
