/**
 * Short loud non-speech sounds (a cough, a clap, a knock on a door, a dropped cup) told from the
 * room and from the person, for the page's VAD (vad.js): the page's port of the server's
 * server/listening/transients.py (issue 24), with its constants. Plain objects, no audio APIs.
 * Times are seconds on one clock; levels dBFS.
 *
 * A transient is a run of frames that rises out of the room (the frame before it is within
 * `transientEdgeDb` of the room's level, the `transientPercentile` of the last
 * `transientReferenceMs` of the room's own frames, or, the page's own, `transientRiseDb`
 * below it), stays `transientEdgeDb` over that level for
 * at most `transientMaxMs`, reaches `transientAboveDb` over it, has no frame of speech, and falls
 * back within `transientEdgeDb` of the room's level. Frames that are not the room's (a turn's,
 * a candidate held back as the reply's echo) are not judged and break a run.
 *
 * Speech: the server asks Silero (a window it scores 0.35 or more); the page has no Silero, and
 * asks its voicing meter instead (voicing.js): a frame is speech when it is voiced
 * (`voicingThreshold`) and at least `transientVoiceLowShare` of its band power (band-envelope.js)
 * lies under 1 kHz, where a voice's pitch and first formant are. Measured on the server tests'
 * recordings (tests/room_sounds.py TRANSIENTS at -10 dBFS peak, tests/test_room_changes.py's
 * Piper sentence): three knocks' frames voice 0.22-0.45 (their power all under 1 kHz); a dropped
 * cup's ring voices 1.0 (a periodic ring) with none of its power under 1 kHz; a clap 0.19-0.28,
 * a cough 0.20-0.48; the sentence's vowels 0.6-0.98 with 0.5-1.0 of their power under 1 kHz.
 * A whisper is never voiced: a whispered word shorter than `transientMaxMs` that rises
 * `transientAboveDb` out of the room is a transient to the page too (the server's Silero may
 * hear it).
 *
 * The server's VAD never starts a turn on a transient (Silero does not score it as speech); the
 * page's energy VAD would (knocks and a dropped cup fired it: a barge-in for a non-person sound),
 * so vad.js holds a candidate back while the frame it would fire on is in a run that may still
 * be a transient (`possible`), and the room (room-background.js) never learns a transient's
 * frames nor counts them in its last second (`found`).
 */
import { BANDS } from './band-envelope.js';

/**
 * The transient parameters, part of vad.js DEFAULT_VAD_CONFIG (dB differences; times in ms).
 * The server's (server/listening/transients.py REFERENCE_MS, REFERENCE_MIN_MS,
 * ROOM_PERCENTILE, EDGE_DB, ABOVE_DB, MAX_MS, which documents where each was measured);
 * tests/test_client_vad_rooms.py checks that the values are the same.
 */
export const TRANSIENT_CONFIG = Object.freeze({
  transientReferenceMs: 1000, // the room's level: its last this much of frames ...
  transientReferenceMinMs: 256, // ... once this much was heard (else no run is judged) ...
  transientPercentile: 50, // ... at this percentile (its median)
  transientEdgeDb: 6, // a frame this far over the room's level is loud (a run's frames)
  transientAboveDb: 20, // a run's loudest frame reaches this far over it
  transientMaxMs: 480, // a run loud longer than this is a change of the room, not a transient
  // the page's own: a run also begins on a frame this far over the one before (a knock over a
  // loud syllable of the reply's echo, where the frame before is not the room's level);
  // offline over a Piper reply with its echo -20/-30 dB, 12 positions, the server's tests'
  // transients: 39 of 288 fired the page with the server's rule alone, 17 with this at 10-14
  transientRiseDb: 14,
  // the page's stand-in for Silero's 0.35 (see the module comment): a voiced frame
  // (voicingThreshold) with this share of its band power under 1 kHz is speech
  transientVoiceLowShare: 0.5,
});

/** Bands of band-envelope.js under 1 kHz (100-400 and 400-1000 Hz). */
const LOW_BANDS = 2;

/**
 * Whether a frame of band levels `row` (band-envelope.js, dB) with voicing strength `voicing`
 * (voicing.js, 0-1) is speech to the transient detector (see the module comment).
 */
export function speechFrame(row, voicing, config) {
  if (voicing < config.voicingThreshold) return false;
  let low = 0;
  let total = 0;
  for (let band = 0; band < BANDS; band += 1) {
    const power = 10 ** (row[band] / 10);
    total += power;
    if (band < LOW_BANDS) low += power;
  }
  return total > 0 && low >= config.transientVoiceLowShare * total;
}

/** The `percentile` (0-100, linear interpolation, numpy's default) of `values` (not empty). */
function percentile(values, pct) {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (pct / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.min(sorted.length - 1, low + 1);
  return sorted[low] + (sorted[high] - sorted[low]) * (rank - low);
}

/**
 * Finds the transients (module comment) in one stream of frames: feed every frame in order to
 * `push`. `possible` says whether the latest frame is in a run that may still be a transient;
 * a transient found is reported by the frame that ends it.
 */
export class TransientDetector {
  #config;
  /** levels (dBFS) of the room's own last frames, transients left out */
  #levels = [];
  /** levels (dBFS) of the run in progress */
  #run = [];
  #runStartS = 0;
  #roomDb = 0;
  #quiet = false;
  /** level (dBFS) of the latest frame pushed */
  #lastDb = Infinity;

  /** @param {object} config vad.js DEFAULT_VAD_CONFIG-shaped (the TRANSIENT_CONFIG keys) */
  constructor(config) {
    this.#config = config;
  }

  /** The latest frame pushed is in a run that may still be a transient (no speech in it, loud
   * for at most `transientMaxMs` so far). */
  get possible() {
    return this.#run.length > 0;
  }

  /**
   * Take the frame that started at `timeS` (s; `frameMs` long): its level (dBFS), whether it is
   * speech (`speech()`, asked only of a loud frame: voicing costs), and whether it is the
   * room's. Returns the span {fromS, toS} (s: the first frame's start, the last frame's end) of
   * the transient this frame ends (the frame itself is not part of it), or null.
   */
  push(timeS, levelDb, speech, room = true) {
    const c = this.#config;
    const lastDb = this.#lastDb;
    this.#lastDb = levelDb;
    if (!room) {
      this.#run = [];
      this.#quiet = false;
      return null;
    }
    if (this.#run.length) {
      if (levelDb < this.#roomDb + c.transientEdgeDb) return this.#endRun(timeS, levelDb);
      if (this.#run.length >= c.transientMaxMs / c.frameMs || speech()) {
        this.#remember(...this.#run, levelDb);
        this.#run = [];
        this.#quiet = false;
        return null;
      }
      this.#run.push(levelDb);
      return null;
    }
    if (this.#levels.length >= Math.floor(c.transientReferenceMinMs / c.frameMs)) {
      const roomDb = percentile(this.#levels, c.transientPercentile);
      const loud = levelDb >= roomDb + c.transientEdgeDb;
      const rise = levelDb >= lastDb + c.transientRiseDb;
      if (loud && (this.#quiet || rise) && !speech()) {
        this.#roomDb = roomDb;
        this.#runStartS = timeS;
        this.#run.push(levelDb);
        return null;
      }
      this.#quiet = !loud;
    } else {
      this.#quiet = true;
    }
    this.#remember(levelDb);
    return null;
  }

  /** Keep `levels` as the room's, the last `transientReferenceMs` of them. */
  #remember(...levels) {
    const c = this.#config;
    this.#levels.push(...levels);
    const kept = Math.floor(c.transientReferenceMs / c.frameMs);
    if (this.#levels.length > kept) this.#levels.splice(0, this.#levels.length - kept);
  }

  /** The run fell back to the room at the frame that started at `timeS`: a transient when it
   * reached `transientAboveDb`; else its frames are the room's. */
  #endRun(timeS, levelDb) {
    const run = this.#run;
    this.#run = [];
    this.#quiet = true;
    const transient = Math.max(...run) >= this.#roomDb + this.#config.transientAboveDb;
    if (!transient) this.#remember(...run);
    this.#remember(levelDb);
    return transient ? { fromS: this.#runStartS, toS: timeS } : null;
  }
}
