/**
 * Client voice activity detection for instant barge-in: plain objects, no DOM, no audio APIs, so
 * the same code runs in the capture AudioWorklet and can be tested anywhere.
 *
 * Energy detector on short frames (RMS in dBFS: 20·log10(rms), full-scale square wave = 0 dBFS,
 * of the signal high-passed at `levelHighPassHz`, below the voice: after a pink-noise burst the
 * browser's processing left a rumble under 100 Hz decaying 2 dB per 10 ms frame from 15 dB below
 * the burst, which held the candidate up to 47 ms past the burst's end; measured above 100 Hz, the
 * frames after a burst fall 20 dB and more below it at once, and no utterance of the benchmark
 * fired at another time):
 * - an adaptive noise floor that follows the quiet level: it falls fast (time constant
 *   `noiseFallMs`) and rises slowly (at most `noiseRiseDbPerS`), the classic minimum-tracking
 *   floor of energy VADs (cf. R. Martin, "Noise power spectral density estimation based on
 *   optimal smoothing and minimum statistics", IEEE TSAP 2001, simplified to one band);
 * - hysteresis: a frame at or above the onset threshold starts a candidate; it goes on while
 *   frames stay at or above the release threshold (`hysteresisDb` lower); a gap of
 *   `hangoverMs` below it ends it;
 * - a tail does not hold a candidate: a frame `tailBelowPeakDb` or more below the candidate's
 *   loudest counts as below the release threshold. The browser's noise suppressor and auto
 *   gain leave such a tail after a short noise burst (measured in Chromium: a 177 ms
 *   white-noise burst at -10 dBFS fell to -38, -40, -40, -42, -44 ... dBFS, above a release
 *   threshold near -60 dBFS set by the assistant's quiet output, and fired at 200 ms; a 148 ms
 *   one fell -18, -30, -36, -36, -39, -40). An earlier rule let a tail frame louder than the
 *   one before hold the candidate (so that a quiet syllable rising again would count): a tail
 *   that rose at all held it on (measured: with the high-pass alone, a 177 ms white-noise
 *   burst's tail went -50, -48 dBFS and it fired at 210 ms; a white-noise burst fired in a
 *   quiet benchmark run, issue 13).
 *   Replayed from five Chromium runs of the benchmark (the capture worklet's input recorded;
 *   90 noise bursts and coughs, 24 utterances), the high-pass and this rule together brought
 *   the longest a burst held a candidate beyond its length from 47 ms to 24 ms (white noise:
 *   8 ms) and changed no utterance's firing time; at 15 dB two utterances fired 10 ms later;
 * - the candidate fires once `minSpeechMs` passed since its first frame, on a frame at or above
 *   the release threshold (short dips between syllables do not restart the count), or inside a
 *   dip of at most `closureMs` once `minVoicedMs` of its frames were voiced (voicing.js: voicing
 *   strength `voicingThreshold` or more): the silence of a stop closure ("Ex|cuse", "Ac|tually",
 *   "Ju|st a") inside a voiced word, 30-100 ms in running speech (T. H. Crystal, A. S. House,
 *   "Segmental durations in connected-speech signals", JASA 83(4), 1988), no longer delays the
 *   barge-in until the next syllable; a noise burst or a cough is not voiced, so it still has to
 *   hold `minSpeechMs` above the release threshold. Measured on the benchmark's recordings as
 *   Chromium delivered them (noise suppression and auto gain on; node, 36 noise bursts and
 *   coughs, 24 utterances): at `voicingThreshold` 0.5 the processed noise counted as voiced
 *   and 5 more bursts fired, at 0.7 none more; in the browser benchmark the slowest utterances
 *   went from 258-281 ms to 210-221 ms ("Excuse me" stays at 280: its first 200 ms are hardly
 *   voiced);
 * - echo guard, level: while the assistant plays (and for `echoTailMs` after), the onset
 *   threshold is `playingOnsetMarginDb` above the floor instead of `onsetMarginDb`, and at least
 *   `echoCouplingDb + echoMarginDb` above the assistant's own output level (peak-held for
 *   `echoHoldMs`, then decaying at `echoDecayDbPerS` like a room's reverberation tail);
 * - echo guard, what the echo explains (issue 24; echo-path.js): the browser's automatic gain
 *   control lifts a quiet echo by 10 dB and more (measured in Chromium: Piper echo at -30 dBFS
 *   peak reached -28 to -35 dBFS frames), so a level alone cannot tell the assistant's voice
 *   leaking into the microphone from the person. While the assistant plays, a candidate that
 *   is due to fire is held back only while the echo path (the lag and the gain per band of
 *   the output in the microphone, learned from stretches that were clearly echo and held)
 *   explains its energy: fewer than `echoUnexplainedShare` of its frames rise `echoExcessDb`
 *   above the output at that lag and gain plus the room's floor. Speech energy the echo does
 *   not explain is the person, whatever the envelopes' correlation; with no echo path
 *   established, nothing is echo. Before issue 24 a band-envelope correlation of 0.8 and more
 *   (`echoLikeness`, the cross-correlation double-talk detector of J. Benesty, D. R. Morgan,
 *   J. H. Cho, IEEE TSAP 8(2), 2000, on band envelopes) held a candidate back whatever it
 *   added; a correlation (`echoLikeness` below, reported as `likeness`) now only picks the lag
 *   of a stretch that may set the path. Both envelopes are compared from `echoSettleMs` after
 *   the capture started (Chromium's auto gain, noise and echo suppressors converge over the
 *   first half second), over at most `echoWindowMs`, at delays up to `echoMaxLagMs`; the guard
 *   stays on for `echoTailMs` after the output fell silent (`EchoReference.playingAt`): the
 *   echo of the last audio rendered before a reply stalls reaches the microphone that late.
 *   A candidate held back as echo is judged again on every frame over its last
 *   `echoShareSpanMs`; when the echo stops explaining it (the person talks over the echo) it
 *   starts over from its first unexplained frame and fires once that holds `minSpeechMs`.
 * - the room (issue 24; room-background.js, the server's rules): a candidate fires only when
 *   one of its frames holds `roomAboveDb` more energy than the room's background (babble, a
 *   TV, a fan; it follows a rising gain and falls when the room falls) explains, and its
 *   loudest frame is near the person's own level; otherwise it is held back as the room
 *   ('room') and judged again on every frame. Its parameters are ROOM_CONFIG's.
 * - transients (issue 24; transients.js, the server's rule): a candidate due to fire on a frame
 *   of a run that may still be a cough, a clap, a knock or a dropped cup (loud over the room,
 *   no speech in it, not yet longer than `transientMaxMs`) is held back ('transient') and
 *   judged again on every frame: it fires on a later frame of speech, or once the run outlasts
 *   `transientMaxMs` (the server's VAD never starts a turn on such a sound: Silero does not
 *   score it as speech). Three knocks and a dropped cup at -10 dBFS peak fired the page's VAD
 *   at 190 ms (tests/test_client_vad_rooms.py); a transient's frames are never the room's.
 */
import { BandEnvelope } from './band-envelope.js';
import { RoomEchoRules, echoLikeness } from './echo-correlation.js';
import { EchoPath } from './echo-path.js';
import { ROOM_CONFIG, RoomBackground } from './room-background.js';
import { TRANSIENT_CONFIG, TransientDetector, speechFrame } from './transients.js';
import { Voicing } from './voicing.js';


/**
 * Default VAD parameters (dB values are dBFS or dB differences; times in ms).
 * `minSpeechMs` 200 is the default; the margins are the usual energy-VAD range
 * (onset 10-15 dB over the floor, release 6 dB lower); `echoCouplingDb` -20 assumes the browser's
 * echo canceller is on (it is requested); `echoHoldMs` covers output + input latency.
 */
export const DEFAULT_VAD_CONFIG = Object.freeze({
  frameMs: 10, // analysis frame
  levelHighPassHz: 100, // the level is measured above this (rumble, a burst's low-frequency tail)
  minSpeechMs: 200, // speech held this long (frames at/above release) before the VAD fires
  minWordMs: 120, // a voiced candidate that ended after this much speech is judged whole
  hangoverMs: 200, // this long below the release threshold ends speech (or drops a candidate)
  closureMs: 100, // a candidate may fire inside a dip this short (a stop closure) ...
  minVoicedMs: 40, // ... once this much of it was voiced (a vowel's nucleus)
  voicingThreshold: 0.7, // voicing strength (voicing.js) of a voiced frame
  tailBelowPeakDb: 20, // a frame this far below the candidate's loudest, not rising: a tail
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
  echoTailMs: 500, // the echo guard stays on this long after the output fell silent ...
  echoReverbMs: 300, // ... or, with an echo path held, its lag and this much more
  echoDecayDbPerS: 40, // then decays at this rate (reverberation tail)
  echoWindowMs: 1000, // longest span of microphone envelope compared with the output's
  echoSettleMs: 500, // the capture's first ms are not compared (its processing converging)
  echoMaxLagMs: 1200, // longest output -> microphone delay searched (latencies + room)
  echoLagDriftMs: 150, // a candidate is searched within this of the held path's lag
  echoDynamicRangeDb: 50, // band levels are floored this far below the loudest compared
  // issue 24: echo is what the echo path explains (echo-path.js)
  echoPathLikeness: 0.85, // a stretch correlating this well may set the echo path ...
  echoPathMinMs: 150, // ... when this much of it is audible ...
  echoPathConsistent: 0.7, // ... this share of it within echoConsistentDb of the prediction
  echoConsistentDb: 8, // a frame within this (mean absolute band difference) fits the path
  echoAudibleDb: 6, // a band this far above the room's floor is audible
  echoGainRangeDb: 20, // output frames within this of the band's loudest set the gain
  echoGainMinFrames: 5, // a band with fewer such frames heard no echo
  echoSlackMs: 30, // the output's loudest within this of the lag predicts a frame
  echoExcessDb: 6, // a frame this far above echo + floor is unexplained (the person)
  echoUnexplainedShare: 0.1, // a candidate with this share unexplained is not echo
  echoShareSpanMs: 250, // a held echo candidate is judged on at least its last this much
  echoLearnMs: 500, // the echo path is learned this often while the assistant plays ...
  echoRelearnMs: 100, // ... and at most this often while a candidate is judged
  ...ROOM_CONFIG, // the room's background and the person's level (room-background.js)
  ...TRANSIENT_CONFIG, // coughs, claps, knocks, a dropped cup (transients.js)
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
 * Streaming second-order Butterworth high-pass filter (the biquad of R. Bristow-Johnson's
 * "Audio EQ cookbook", Q = 1/sqrt(2)): -3 dB at `cutoffHz`, -12 dB per octave below.
 */
export class HighPass {
  #b0;
  #b1;
  #a1;
  #a2;
  #x1 = 0;
  #x2 = 0;
  #y1 = 0;
  #y2 = 0;

  constructor(rateHz, cutoffHz) {
    const w = (2 * Math.PI * cutoffHz) / rateHz;
    const alpha = Math.sin(w) / Math.SQRT2;
    const a0 = 1 + alpha;
    this.#b0 = (1 + Math.cos(w)) / 2 / a0;
    this.#b1 = -(1 + Math.cos(w)) / a0;
    this.#a1 = (-2 * Math.cos(w)) / a0;
    this.#a2 = (1 - alpha) / a0;
  }

  /** The filtered `samples` (a new array), continuing from the previous call. */
  filter(samples) {
    const out = new Float32Array(samples.length);
    for (let i = 0; i < samples.length; i += 1) {
      const x = samples[i];
      const y = this.#b0 * (x + this.#x2) + this.#b1 * this.#x1 - this.#a1 * this.#y1
        - this.#a2 * this.#y2;
      this.#x2 = this.#x1;
      this.#x1 = x;
      this.#y2 = this.#y1;
      this.#y1 = y;
      out[i] = y;
    }
    return out;
  }
}

/** A report arriving this much later than its place in the series starts a new series (s). */
const SERIES_BREAK_S = 0.2;

/**
 * The assistant's output level as the microphone may hear it: the latest playback level reports
 * (dBFS of `frameMs` output frames), peak-held for `echoHoldMs`, then decaying at
 * `echoDecayDbPerS`. Times are seconds on one clock (the capture context's).
 *
 * The reports are consecutive output frames, but they arrive in bursts (the audio threads
 * render several quanta at a time and the message hop adds its own delay), so a report's
 * arrival time is its frame's time plus a jitter that is never negative. Frame k of a series is
 * placed at start + k·frameMs, start being the earliest arrival minus k·frameMs seen so far
 * (the minimum-delay clock estimate of network time sync, e.g. RFC 5905 section 10); a report
 * more than SERIES_BREAK_S later than its place starts a new series (a pause of the output
 * context).
 */
export class EchoReference {
  #config;
  #peakDb = SILENCE_DB;
  #peakAt = -Infinity;
  #activeAt = -Infinity;
  #seriesStart = null;
  #frames = 0;

  constructor(config) {
    this.#config = config;
    /** Output band levels of the last echoWindowMs + echoMaxLagMs, by report time (s). */
    this.envelope = new LevelHistory((config.echoWindowMs + config.echoMaxLagMs) / 1000 + 0.1);
  }

  /**
   * A playback report at `timeS`: its level (dBFS), its band levels (BANDS dB values) and
   * whether assistant audio was rendered.
   */
  update(db, bands, active, arrivalS) {
    const timeS = this.#frameTime(arrivalS);
    if (db >= this.levelAt(timeS)) {
      this.#peakDb = db;
      this.#peakAt = timeS;
    }
    if (active) this.#activeAt = timeS;
    this.envelope.push(timeS, bands);
  }

  /** The time of the next frame of the series, given that its report arrived at `arrivalS`. */
  #frameTime(arrivalS) {
    const frameS = this.#config.frameMs / 1000;
    const start = arrivalS - this.#frames * frameS;
    if (this.#seriesStart === null || start - this.#seriesStart > SERIES_BREAK_S) {
      this.#seriesStart = arrivalS;
      this.#frames = 0;
    }
    this.#seriesStart = Math.min(this.#seriesStart, arrivalS - this.#frames * frameS);
    const timeS = this.#seriesStart + this.#frames * frameS;
    this.#frames += 1;
    return timeS;
  }

  /** Expected output level (dBFS) still reaching the microphone at `timeS`. */
  levelAt(timeS) {
    const late = timeS - this.#peakAt - this.#config.echoHoldMs / 1000;
    if (late <= 0) return this.#peakDb;
    return Math.max(SILENCE_DB, this.#peakDb - late * this.#config.echoDecayDbPerS);
  }

  /**
   * Whether the microphone may still hear assistant audio at `timeS`: some was rendered within
   * the last `echoTailMs`, or, with an echo path held at `lagMs` (echo-path.js), within that
   * lag plus `echoReverbMs`: the echo of the last audio before the output stops or stalls
   * arrives that late and rings on in the room. With the lag search to 1.2 s (issue 24, a
   * Bluetooth or USB loudspeaker 600-1000 ms late), the echo of a reply's last words went on
   * after a 500 ms guard and fired the page (node, tests/test_client_vad.py's long-latency
   * rooms: 29 of 36 echo-alone cases); tests/echo_room.py's reverberant rooms ring for RT60
   * 300 ms.
   */
  playingAt(timeS, lagMs = null) {
    const c = this.#config;
    const tailMs = Math.max(c.echoTailMs, lagMs === null ? 0 : lagMs + c.echoReverbMs);
    return timeS - this.#activeAt <= tailMs / 1000;
  }
}

/**
 * Values (band levels) by time (s), oldest first, for the last `spanS` seconds (times never
 * decrease).
 */
export class LevelHistory {
  #spanS;

  constructor(spanS) {
    this.#spanS = spanS;
    this.times = [];
    this.levels = [];
  }

  push(timeS, db) {
    this.times.push(timeS);
    this.levels.push(db);
    let old = 0;
    while (old < this.times.length && this.times[old] < timeS - this.#spanS) old += 1;
    if (old > 0) {
      this.times.splice(0, old);
      this.levels.splice(0, old);
    }
  }

  /** The entries from `fromS` to `toS` (times included): {times, rows}. */
  between(fromS, toS) {
    const times = [];
    const rows = [];
    this.times.forEach((t, i) => {
      if (t >= fromS - 1e-6 && t <= toS + 1e-6) {
        times.push(t);
        rows.push(this.levels[i]);
      }
    });
    return { times, rows };
  }

  /** The value of the latest entry at or before `timeS`; null before the first one kept. */
  at(timeS) {
    let low = 0;
    let high = this.times.length - 1;
    if (high < 0 || this.times[0] > timeS) return null;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if (this.times[middle] <= timeS) low = middle;
      else high = middle - 1;
    }
    return this.levels[low];
  }
}

/**
 * The detector. Feed it consecutive frames of `config.frameMs`; it returns the transitions each
 * frame caused, in order (usually none; 'onset' and 'fired' together when minSpeechMs <= frameMs):
 *   'onset'    a candidate started on this frame (state 'speech');
 *   'echo'     the candidate was due to fire while the assistant played but the echo path
 *              explains it (echo-path.js); it stays a candidate, judged again on every frame;
 *              when the echo stops explaining it, it starts over with a new 'onset' at its
 *              first unexplained frame;
 *   'room'     the candidate was due to fire but the room's background explains it
 *              (room-background.js); it stays a candidate, judged again on every frame, and
 *              starts over ('onset') at the first frame clearly above the room;
 *   'transient' the candidate was due to fire on a frame of a run that may still be a
 *              transient (transients.js); it stays a candidate, judged again on every frame;
 *   'fired'    the candidate held `minSpeechMs` (state 'fired'): a barge-in, if the assistant
 *              is speaking;
 *   'released' speech (a candidate or fired speech) ended after `hangoverMs` below release
 *              (state 'idle').
 */
export class EnergyVad {
  #config;
  /** 'idle' | 'speech' | 'fired' ('speech' also while a candidate is held back) */
  state = 'idle';
  noiseFloorDb = null;
  levelDb = SILENCE_DB;
  onsetDb = null;
  playing = false;
  /** start time (s) of the frame that began the current candidate, or null */
  onsetTime = null;
  /** echo likeness (`echoLikeness`) of the latest check of the current candidate, or null */
  likeness = null;
  /** share of the current candidate's frames the echo path does not explain, or null */
  unexplained = null;
  /** the current candidate is held back: null | 'echo' | 'room' | 'transient' */
  held = null;
  #gapMs = 0;
  #voicedMs = 0;
  /** start time (s) of the current candidate's latest frame at or above release */
  #lastLoudS = null;
  /** the current candidate has a frame of speech (transients.js speechFrame) */
  #spoken = false;
  /** the band row of the latest frame */
  #row = null;
  /** the transients found of late: {fromS, toS} (s), oldest first */
  #transientSpans = [];
  /** loudest frame (dBFS) of the current candidate */
  #peakDb = SILENCE_DB;
  /** start time (s) of the first frame analysed (the capture's start) */
  #firstTime = null;
  /** time (s) of the latest attempt to learn the echo path */
  #learnedAt = -Infinity;
  /** start time (s) of the current candidate's first frame (before any restart), or null */
  #candidateS = null;

  /** @param {typeof DEFAULT_VAD_CONFIG} config */
  constructor(config) {
    this.#config = config;
    this.echo = new EchoReference(config);
    this.path = new EchoPath(config);
    this.room = new RoomBackground(config);
    this.echoRules = new RoomEchoRules(config);
    this.room.echoRules = (timeS) => this.echoRules.rules(timeS);
    this.transients = new TransientDetector(config);
    /** band rows of the last echoWindowMs of microphone frames, by frame start time */
    this.levels = new LevelHistory((config.echoWindowMs + 2 * config.frameMs) / 1000);
    this.bands = null;
    this.voicingMeter = null;
    this.highPass = null;
  }

  /** The current candidate is held back as the assistant's echo. */
  get heldAsEcho() {
    return this.held === 'echo';
  }

  /**
   * Analyse one frame that started at `timeS` (seconds).
   * @param {Float32Array} samples
   * @returns {Array<'onset'|'echo'|'room'|'transient'|'fired'|'released'>}
   */
  process(samples, timeS) {
    const c = this.#config;
    this.#firstTime ??= timeS;
    if (this.bands?.frameSamples !== samples.length) {
      const rateHz = (samples.length * 1000) / c.frameMs;
      this.bands = new BandEnvelope(rateHz);
      this.voicingMeter = new Voicing(rateHz);
      this.highPass = new HighPass(rateHz, c.levelHighPassHz);
    }
    const level = rmsDb(this.highPass.filter(samples));
    this.levelDb = level;
    this.playing = this.echo.playingAt(timeS, this.path.lagMs);
    this.voicingMeter.push(samples);
    for (const row of this.bands.push(samples)) {
      this.levels.push(timeS, row);
      if (this.playing) this.echoRules.update(timeS, this.levels, this.echo);
      this.room.push(timeS, row, this.playing, this.held === 'echo');
      this.#row = row;
      const found = this.transients.push(timeS, level,
        () => speechFrame(row, this.voicingMeter.strength(), c),
        this.state !== 'fired' && this.held !== 'echo');
      if (found) this.#transientFound(found.fromS, found.toS);
    }
    this.noiseFloorDb ??= clamp(level, c.minNoiseFloorDb, c.maxNoiseFloorDb);
    const margin = this.playing ? c.playingOnsetMarginDb : c.onsetMarginDb;
    const echoDb = this.echo.levelAt(timeS) + c.echoCouplingDb + c.echoMarginDb;
    const onset = Math.max(this.noiseFloorDb + margin, c.minOnsetDb, echoDb);
    this.onsetDb = onset;
    this.#trackFloor(level);
    if (this.playing && this.state !== 'fired' && timeS - this.#learnedAt >= c.echoLearnMs / 1000) {
      this.#learn(timeS);
    }
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

  /**
   * Try to learn the echo path from the microphone frames up to `timeS` (echo-path.js): the
   * last `echoWindowMs`, from `echoSettleMs` after the capture started (or the current
   * candidate's onset, if earlier). While a candidate is judged with a path held, only lags
   * within `echoLagDriftMs` of the held one are searched (the server's held heard lag,
   * server/listening/echo.py HEARD_LAG_HOLD_MS, LAG_DRIFT_MS): a loudspeaker's latency does not
   * jump by hundreds of ms under a candidate, a person's voice must not set a path at a
   * chance match far from it, and the search over 0-`echoMaxLagMs` (121 lags) runs only every
   * `echoLearnMs` between candidates, not every `echoRelearnMs` within one.
   */
  #learn(timeS) {
    const c = this.#config;
    this.#learnedAt = timeS;
    const settledS = Math.max(this.#firstTime + c.echoSettleMs / 1000,
      timeS - c.echoWindowMs / 1000);
    const fromS = Math.min(settledS, this.onsetTime ?? settledS);
    if (fromS >= timeS) return;
    const held = this.state === 'speech' && this.path.established ? this.path.lagMs : null;
    const lags = held === null ? null : {
      fromMs: Math.max(0, held - c.echoLagDriftMs),
      toMs: Math.min(c.echoMaxLagMs, held + c.echoLagDriftMs),
    };
    this.path.learn(this.levels, this.echo, fromS, timeS, this.room.floor(),
      (from, now) => echoLikeness(this.levels, this.echo, from, now, c, lags));
  }

  #step(level, onset, release, timeS) {
    const c = this.#config;
    if (this.state === 'idle') {
      if (level < onset) return [];
      this.state = 'speech';
      this.#peakDb = level;
      this.onsetTime = timeS;
      this.#candidateS = timeS;
      this.likeness = null;
      this.unexplained = null;
      this.#gapMs = 0;
      this.#voicedMs = 0;
      this.#spoken = false;
      this.held = null;
      this.#countVoiced(c, timeS);
      return ['onset', ...this.#hold(c, timeS)];
    }
    this.#peakDb = Math.max(this.#peakDb, level);
    const tail = level <= this.#peakDb - c.tailBelowPeakDb;
    if (level >= release && !tail) {
      this.#gapMs = 0;
      this.#countVoiced(c, timeS);
      return this.state === 'speech' ? this.#hold(c, timeS) : [];
    }
    this.#gapMs += c.frameMs;
    if (this.#gapMs < c.hangoverMs) {
      const dip = this.#gapMs <= c.closureMs;
      const closure = dip && this.#voicedMs >= c.minVoicedMs;
      const endedWord = dip && this.#spoken && this.held !== 'echo'
        && (this.#lastLoudS - this.onsetTime) * 1000 + c.frameMs >= c.minWordMs - 1e-6;
      return this.state === 'speech' && (closure || endedWord) ? this.#hold(c, timeS) : [];
    }
    if (this.state === 'fired') this.room.turnEnded(timeS);
    else this.room.speechDropped(this.#candidateS, timeS - c.hangoverMs / 1000);
    this.state = 'idle';
    this.onsetTime = null;
    this.held = null;
    return ['released'];
  }

  /**
   * The frames from `fromS` to `toS` (s) were a transient (transients.js): never the room's,
   * nor judged by the echo path (`#inTransient`): a knock over the reply's echo is energy the
   * echo does not explain, and a candidate of the echo with a knock in it fired the page.
   */
  #transientFound(fromS, toS) {
    this.room.transient(fromS, toS);
    this.#transientSpans.push({ fromS, toS });
    const keptS = toS - (this.#config.echoWindowMs + this.#config.echoShareSpanMs) / 1000;
    while (this.#transientSpans[0].toS < keptS) this.#transientSpans.shift();
  }

  /** Whether the frame that started at `timeS` (s) is of a transient found. */
  #inTransient(timeS) {
    return this.#transientSpans.some(({ fromS, toS }) => timeS >= fromS - 1e-6
      && timeS < toS - 1e-6);
  }

  /** The current frame, starting at `timeS`, is at or above the release threshold: count it
   * as voiced if it is, and as speech (`#spoken`) if it is (transients.js speechFrame). */
  #countVoiced(c, timeS) {
    this.#lastLoudS = timeS;
    const strength = this.voicingMeter.strength();
    if (strength >= c.voicingThreshold) this.#voicedMs += c.frameMs;
    if (!this.#spoken && this.#row) this.#spoken = speechFrame(this.#row, strength, c);
  }

  /**
   * A frame of a candidate (at or above the release threshold, or in a stop closure) starting at
   * `timeS`: ['fired'] once minSpeechMs passed since the onset, unless the room's background
   * explains the candidate (['room']) or, while the assistant plays, the echo path does
   * (['echo']). A candidate held back whose newest frames the room or the echo no longer
   * explains starts over from the first such frame (['onset']): that speech must hold
   * minSpeechMs on its own, so a cough over the echo does not fire.
   */
  #hold(c, timeS) {
    const heldMs = (timeS - this.onsetTime) * 1000 + c.frameMs;
    if (heldMs < c.minSpeechMs - 1e-6) return []; // frame times are float seconds
    if (this.transients.possible && !this.#spoken) return this.#holdBack('transient');
    const fromS = this.held === null ? this.onsetTime
      : Math.min(this.onsetTime, timeS - (c.echoShareSpanMs - c.frameMs) / 1000);
    const { times, rows } = this.levels.between(fromS, timeS);
    const room = this.room.isBackground(this.onsetTime, times, rows);
    if (room.background) return this.#holdBack('room');
    if (this.held === 'room') return this.#restart(c, room.firstS, timeS);
    if (this.playing) {
      if (!this.path.established || timeS - this.#learnedAt >= c.echoRelearnMs / 1000) {
        this.#learn(timeS);
      }
      this.likeness = this.path.lastCheck?.likeness ?? null;
      const { share, firstS } = this.path.unexplained(this.levels, this.echo, fromS, timeS,
        this.room.floor(), (t) => this.#inTransient(t));
      this.unexplained = share;
      if (share < c.echoUnexplainedShare) return this.#holdBack('echo');
      if (this.held === 'echo') return this.#restart(c, firstS ?? timeS, timeS);
    }
    this.state = 'fired';
    this.held = null;
    this.room.turnStarted(this.onsetTime);
    return ['fired'];
  }

  /** Hold the candidate back as `kind` ('echo' | 'room' | 'transient'): the event on the first
   * frame only. */
  #holdBack(kind) {
    if (this.held === kind) return [];
    this.held = kind;
    return [kind];
  }

  /** The held candidate starts over at `fromS` (its first frame the room or echo leaves
   * unexplained) and is judged from there. */
  #restart(c, fromS, timeS) {
    this.held = null;
    this.onsetTime = fromS;
    this.#voicedMs = 0;
    return ['onset', ...this.#hold(c, timeS)];
  }
}

function clamp(value, low, high) {
  return Math.min(Math.max(value, low), high);
}
