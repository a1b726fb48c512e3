/**
 * The room's background for the page's VAD (vad.js): babble, a TV, a fan. A barge-in starts
 * only on speech clearly above it and near the person's own level. The page's port of
 * server/listening/room_background.py (issue 24): the same rules, with the server's
 * constants, on the band-envelope.js rows (five bands, dB, 10 ms frames of 30 ms windows) the
 * VAD already computes. Plain objects, no audio APIs. Times are seconds on one clock.
 *
 * - The background: the band levels of the last `roomHistoryMs` of frames heard outside the
 *   person's turns (a candidate that fired, until it is released), outside candidates that
 *   ended without firing and stand out of the room (`speechDropped`: a person's cough or
 *   "Uh." is not the room) or were held back as the echo, and outside the assistant's
 *   playback where its echo may rule the microphone (`echoRules`, echo-correlation.js
 *   RoomEchoRules: the echo is echo-path.js's business, and a learned echo would hide the
 *   person talking over it; a room heard only while a reply plays is still the room, the
 *   server's rule); the last that much learned, not of time
 *   (as the server's): a reply longer than it left no background, 10 s after the room was
 *   last learned, and the room fired the page's VAD then (the page grid's babble at -45
 *   dBFS, 9.8 s into a 10.6 s reply). Frames are learned once they are `roomSettleMs` old
 *   (longer than a candidate takes to fire, so a person's first syllables are never learned as
 *   the room), and the frames before a candidate outside turns, playback and dropped
 *   candidates. Also learned:
 *   the turns the server's VAD did not take for the person (`confirmTurns`; outside playback
 *   or where the echo does not rule, and not shorter than the server's longer minimum speech,
 *   `roomTurnMinMs`: an "Uh." that fired the page is a person's sound the server dropped;
 *   a TV's sentences fire the page's VAD, which cannot tell a TV's voice from the person's,
 *   but the server's keeps the room's background and the person's level too; without server
 *   VAD every turn is the person's). When none is known (the microphone was switched on
 *   while a reply played), the background rule passes every candidate: the echo in the frames
 *   before it would raise the bar for the person talking over it.
 * - The person's level: the `roomPercentile` level (totalDb of a frame's bands) of the frames
 *   of the person's recent turns (their last `roomPersonHistoryMs`), `roomPersonPriorDb`
 *   before the first one.
 * - A candidate is the person (`isBackground` false) when its loudest frame reaches the
 *   person's level less `roomNearDb` (`roomColdNearDb` when it starts in the microphone's
 *   first `roomColdMs`, counted in microphone time: an auto gain converges with the stream's
 *   time), and, once a background is known, one of its frames holds `roomAboveDb` more energy
 *   than the background's `roomPercentile` band levels explain (energy counted band by band:
 *   a voice stands out where a fan's rumble or a TV's treble does not), up to
 *   `roomYoungAboveDb` more while less than `roomYoungMs` of the room was heard. The server's
 *   constants, measured there on tests/room_sounds.py's babble and TV at -45 dBFS RMS: the
 *   loudest window of babble held at most 2.5 dB above its 90th percentile levels, a TV
 *   talker's 5.3 dB; a person at -20 dBFS RMS, 20 dB and more.
 * - It follows a rising gain: the background's loud band levels rise, band by band, by as much
 *   as the `roomRisePercentile` levels of its last `roomRecentMs` before `roomRecentGapMs`
 *   ahead of the candidate (the person's own first word may be right before it) rose over
 *   those of all of it: an auto gain lifts that upper quartile, a cough shorter than a quarter
 *   of the second does not (the server's RISE_PERCENTILE; with the 90th percentile and the
 *   cough learned, a 180 ms cough 500 ms before a sentence kept it from firing the page).
 *   Chromium's auto gain,
 *   which the page asks for, lifts a TV at -45 dBFS by 10 dB at once and by 22 dB after
 *   4.6 s (measured: tests/room_sounds.py CHROMIUM_AGC_DB).
 * - It falls when the room falls: once the loud frames (`roomPercentile`) of the last
 *   `roomFallSpanMs` outside turns stay `roomFallDb` below the floor (`roomFloorPercentile`)
 *   of the last `roomFallFloorMs` of background (loud babble stopped), that background is
 *   forgotten and the room is learned anew, so the person is heard at once after loud noise,
 *   not `roomHistoryMs` later. A room that only pauses (a TV between sentences) has its
 *   pauses in that floor already.
 * - The room's floor (`floor`): the `roomFloorPercentile` band levels of every frame of the
 *   last `roomFloorMs` (minimum statistics, R. Martin, IEEE TSAP 2001, as the server's echo
 *   detector), which echo-path.js adds to the echo it predicts.
 */
import { BANDS, FRAME_MS, SILENCE_DB, totalDb } from './band-envelope.js';

/**
 * The room's parameters, part of vad.js DEFAULT_VAD_CONFIG (dB values are dB differences
 * unless named dBFS; times in ms). The server's (server/listening/room_background.py:
 * HISTORY_MS, SETTLE_MS, LOUD_PERCENTILE, ABOVE_DB, RECENT_*, RISE_PERCENTILE,
 * YOUNG_*, COLD_*, NEAR_DB, PERSON_PRIOR_DBFS; server/listening/room_fall.py FALL_*,
 * FLOOR_PERCENTILE; server/listening/echo.py
 * ROOM_ECHO_CORRELATION, MAX_SPAN_MS; server/listening/echo_path.py LEARN_STEP_MS;
 * server/listening/vad.py TurnDetectionConfig.min_speech_ms), which
 * documents where each was measured; tests/test_client_vad_rooms.py checks that the values
 * are the same.
 */
export const ROOM_CONFIG = Object.freeze({
  roomHistoryMs: 10000, // the background: the last this much of room learned
  roomSettleMs: 1000, // a frame outside turns and playback becomes background this old
  roomConfirmMs: 2000, // a turn the server's VAD did not confirm this long after is the room,
  roomTurnMinMs: 200, // unless its speech was shorter than this (the server's echo_min_speech_ms,
  // its minimum while a reply plays; min_speech_ms, 120, otherwise: the longer, so no sound the
  // server may have dropped for its length is learned)
  roomPercentile: 90, // the background's loud levels (per band), the person's level
  roomAboveDb: 12, // a candidate needs a frame this much more energy than the background
  roomYoungMs: 4000, // until this much room was heard, a candidate needs up to ...
  roomYoungAboveDb: 8, // ... this much more
  roomRecentMs: 1000, // the background's last this much counts on its own (a rising gain) ...
  roomRecentGapMs: 500, // ... up to this long before the candidate ...
  roomRisePercentile: 75, // ... by the rise of this percentile of it over the background's
  // A second of a reply playing whose band rows correlate with the output under this is room,
  // judged every roomEchoStepMs over roomEchoSpanMs around each step (echo-correlation.js).
  // Measured on the page's rows (the server tests' rooms, tests/test_client_vad_rooms.py):
  // a TV or babble at -35 to -40 dBFS RMS with no echo 0.05-0.48, with a -30 dB echo under
  // it up to 0.64; the echo alone, -30 dB over a -60 dBFS pink floor 0.73-0.88, -10 dB
  // 0.96-0.99, -10 dB in a 400 ms RT60 room 0.76-0.94.
  roomEchoCorrelation: 0.7,
  roomEchoStepMs: 250,
  roomEchoSpanMs: 1000,
  roomFallSpanMs: 640, // the room fell when this long outside turns stays ...
  roomFallDb: 10, // ... this far below the floor ...
  roomFallFloorMs: 3000, // ... of the last this much background
  roomPersonHistoryMs: 10000, // the person's level: their last this much of turn frames
  roomPersonPriorDb: -12, // the person's level (dBFS) before their first turn
  roomNearDb: 20, // a candidate's loudest frame may stay this far below the person's level
  roomColdMs: 1000, // in the microphone's first this much ...
  roomColdNearDb: 12, // ... only this far
  roomGainMs: 4000, // the room's level of this last much outside turns, reply included, ...
  roomGainPercentile: 50, // ... vs the background's, at this percentile and roomPercentile
  roomFloorMs: 4000, // the room's floor is taken over this much of every frame ...
  roomFloorPercentile: 10, // ... at this percentile per band (and the fall's floor)
});

/** The `percentile` (0-100, nearest rank) of each band over `rows`; SILENCE_DB when none. */
export function bandPercentile(rows, percentile) {
  const out = new Array(BANDS).fill(SILENCE_DB);
  if (!rows.length) return out;
  for (let band = 0; band < BANDS; band += 1) {
    out[band] = percentileOf(rows.map((row) => row[band]), percentile);
  }
  return out;
}

/** The `percentile` (0-100, nearest rank) of the numbers `values` (not empty). */
function percentileOf(values, percentile) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((percentile / 100) * sorted.length))];
}

/**
 * The room's background and the person's level over one microphone stream; times are
 * seconds on one clock, the first frame pushed being the microphone's start.
 * `confirmTurns`: the server's VAD judges the turns (the page asked for server VAD): the
 * frames of a turn heard outside playback that the server did not take for the person
 * (`personSpoke`) within `roomConfirmMs` of them are the room (a TV's sentence, babble that
 * never pauses) and become background; those it did take are the person's level.
 */
export class RoomBackground {
  #config;
  confirmTurns = false;
  /** Whether the reply's echo may rule the microphone around the frame that started at a
   * time (s) of a reply playing (echo-correlation.js RoomEchoRules.rules; true: it may, and
   * the frame is not learned); null: it may always. */
  echoRules = null;
  /** start time (s) of the first frame pushed */
  #firstS = null;
  /** frames not yet settled, outside turns: {t, row, db, playing, held}, oldest first */
  #recent = [];
  /** settled background frames, oldest first: {t, row, db} */
  #background = [];
  /** frames ever learned as background (how much of the room was heard) */
  #learned = 0;
  /** every frame's row of the last roomFloorMs: {t, row} */
  #all = [];
  /** the frames of the last roomGainMs outside turns, playback included: {t, row} */
  #outside = [];
  /** the turns not yet settled: {fromS, endS, person, frames}, the latest last; a turn's
   * frames `roomConfirmMs` old leave it (background unless the server confirmed the turn) */
  #turns = [];
  /** frame levels (dBFS) of the person's turns, oldest first */
  #person = [];

  /** @param {object} config DEFAULT_VAD_CONFIG-shaped (vad.js; the ROOM_CONFIG keys) */
  constructor(config) {
    this.#config = config;
  }

  /** A frame that started at `timeS` with band levels `row`; `playing`: the reply (or its
   * echo tail) may be in it; `held`: it is of a candidate held back as the reply's echo (never
   * learned: the echo or the person talking over it). */
  push(timeS, row, playing, held = false) {
    const c = this.#config;
    this.#firstS ??= timeS;
    const frame = { t: timeS, row, db: totalDb(row), playing, held };
    const turn = this.#turns.at(-1);
    if (turn && turn.endS === null) {
      turn.frames.push(frame);
    } else {
      this.#recent.push(frame);
      this.#outside.push(frame);
    }
    this.#all.push(frame);
    while (this.#all[0].t < timeS - c.roomFloorMs / 1000) this.#all.shift();
    while (this.#outside.length && this.#outside[0].t <= timeS - c.roomGainMs / 1000) {
      this.#outside.shift();
    }
    while (this.#recent.length && this.#recent[0].t <= timeS - c.roomSettleMs / 1000) {
      const settled = this.#recent.shift();
      if (this.#learnable(settled)) this.#learn(settled);
    }
    this.#settleTurns(timeS - c.roomConfirmMs / 1000);
    this.#forgetAFallenRoom(timeS);
  }

  /** Turn frames that started by `confirmedS` leave their turn: the person's level, or
   * background (`confirmTurns`, not confirmed, `#learnable`, and not `#short`). */
  #settleTurns(confirmedS) {
    const c = this.#config;
    for (const old of this.#turns) {
      if (old.fromS > confirmedS) break;
      while (old.frames.length && old.frames[0].t <= confirmedS) {
        const frame = old.frames.shift();
        if (!this.confirmTurns || old.person) {
          this.#person.push(frame.db);
          if (this.#person.length > c.roomPersonHistoryMs / FRAME_MS) this.#person.shift();
        } else if (!this.#short(old) && this.#learnable(frame)) {
          this.#learn(frame);
        }
      }
    }
    while (this.#turns.length && this.#turns[0].endS !== null
      && this.#turns[0].endS <= confirmedS) this.#turns.shift();
  }

  /** Whether an ended `turn` was too short for the server's VAD to take it for a turn: its
   * speech (up to its release less `hangoverMs`) lasted under `roomTurnMinMs`. Its frames are
   * then never learned when the server does not confirm it: the person's own short sound (an
   * "Uh." that fired the page), which the server's VAD drops and never learns either. */
  #short(turn) {
    const c = this.#config;
    if (turn.endS === null) return false;
    return turn.endS - turn.fromS - c.hangoverMs / 1000 < c.roomTurnMinMs / 1000;
  }

  /** Whether a frame heard outside the person's turns may be learned as background: it was not
   * held back (`held`), and outside playback or where the reply's echo does not rule it
   * (`echoRules`). */
  #learnable(frame) {
    return !frame.held && !this.#echoMayRule(frame);
  }

  /** Whether the reply's echo may rule a frame: it was heard while the reply played and
   * `echoRules` does not clear it. */
  #echoMayRule(frame) {
    return frame.playing && (this.echoRules?.(frame.t) ?? true);
  }

  /** Learn `frame` as background; the oldest goes once `roomHistoryMs` of frames were
   * learned (room heard, not time passed: a reply or a turn learns none meanwhile). */
  #learn(frame) {
    this.#background.push(frame);
    this.#learned += 1;
    if (this.#background.length > this.#config.roomHistoryMs / FRAME_MS) this.#background.shift();
  }

  /**
   * Forget the background when the room fell (`roomFallDb`, see the module comment): the
   * frames of the last `roomFallSpanMs` up to `timeS` are all outside turns (the reply's echo
   * may be in them: it only makes them louder), and their loud level stays `roomFallDb` below
   * the floor of the last `roomFallFloorMs` of background. The unsettled frames before them
   * are forgotten too, and so are the turns' not yet settled (but the person's): a turn the
   * server's VAD did not confirm (loud babble) would be learned after the fall otherwise.
   */
  #forgetAFallenRoom(timeS) {
    const c = this.#config;
    const spanFrames = Math.round(c.roomFallSpanMs / FRAME_MS);
    if (this.#background.length < spanFrames) return;
    const turn = this.#turns.at(-1);
    const spanS = timeS - c.roomFallSpanMs / 1000;
    if (turn && (turn.endS === null || turn.endS > spanS)) return;
    const span = this.#recent.filter((frame) => frame.t > spanS);
    if (span.length < spanFrames - 1) return;
    const loud = percentileOf(span.map((frame) => frame.db), c.roomPercentile);
    const floorFrames = Math.round(c.roomFallFloorMs / FRAME_MS);
    const floor = percentileOf(this.#background.slice(-floorFrames).map((frame) => frame.db),
      c.roomFloorPercentile);
    if (loud <= floor - c.roomFallDb) {
      this.#background = [];
      this.#recent = span;
      for (const old of this.#turns) if (!old.person) old.frames = [];
    }
  }

  /**
   * A candidate from `fromS` to `toS` (s) ended without firing (too short, or held back):
   * unless the room explains it (`isBackground`), its frames are never learned as background
   * nor counted in the room's last second. A person's own short sound is not the room: the
   * server's rule (room_background.py `speech_dropped`; measured there, Piper "Uh." learned
   * so kept the same voice's "Stop." 1.2 s later from starting a turn).
   */
  speechDropped(fromS, toS) {
    const frames = this.#recent.filter((frame) => frame.t >= fromS - 1e-6 && frame.t <= toS);
    if (!frames.length) return;
    const { background } = this.isBackground(fromS, frames.map((frame) => frame.t),
      frames.map((frame) => frame.row));
    if (background) return;
    for (const frame of frames) frame.held = true;
  }

  /** The frames from `fromS` to `toS` (s, frame start times) are a transient (transients.js:
   * a cough, a clap, a knock, a dropped cup): never learned as background nor counted in the
   * room's last second (the server's rule, room_background.py with transients.py). */
  transient(fromS, toS) {
    for (const frame of this.#recent) {
      if (frame.t >= fromS - 1e-6 && frame.t < toS - 1e-6) frame.held = true;
    }
  }

  /** The person's turn started at `fromS` (a candidate fired): its frames are never room,
   * unless the server's VAD does not confirm it (`confirmTurns`). */
  turnStarted(fromS) {
    const frames = this.#recent.filter((frame) => frame.t >= fromS);
    this.#recent = this.#recent.filter((frame) => frame.t < fromS);
    this.#turns.push({ fromS, endS: null, person: false, frames });
  }

  /** The turn in progress ended at `timeS`. */
  turnEnded(timeS) {
    const turn = this.#turns.at(-1);
    if (turn && turn.endS === null) turn.endS = timeS;
  }

  /** The server's VAD took the latest speech for the person (its `speech_started` arrived at
   * `timeS`): the latest turn, if it started within `roomConfirmMs` plus its length, is theirs. */
  personSpoke(timeS) {
    const turn = this.#turns.at(-1);
    if (turn && (turn.endS === null || turn.endS >= timeS - this.#config.roomConfirmMs / 1000)) {
      turn.person = true;
    }
  }

  /** The person's level (dBFS): see the module comment. */
  personDb() {
    if (!this.#person.length) return this.#config.roomPersonPriorDb;
    return percentileOf(this.#person, this.#config.roomPercentile);
  }

  /** The room's floor per band (dB): see the module comment; SILENCE_DB before any frame. */
  floor() {
    return bandPercentile(this.#all.map((frame) => frame.row), this.#config.roomFloorPercentile);
  }

  /** The background's loud band levels (dB) for a candidate from `fromS` (null: none known)
   * and how much of the room was heard (frames): see the module comment. */
  #loud(fromS) {
    const c = this.#config;
    const before = this.#recent.filter((frame) => frame.t < fromS && !frame.playing
      && !frame.held);
    const rows = [...this.#background, ...before].map((frame) => frame.row);
    if (!rows.length) return { loud: null, heard: this.#learned };
    const gapS = fromS - c.roomRecentGapMs / 1000;
    const recent = [...this.#background, ...before.filter((frame) => frame.t < gapS)]
      .slice(-Math.round(c.roomRecentMs / FRAME_MS)).map((frame) => frame.row);
    const all = bandPercentile(rows, c.roomPercentile);
    const then = bandPercentile(rows, c.roomRisePercentile);
    const last = recent.length ? bandPercentile(recent, c.roomRisePercentile) : then;
    const rise = this.#gainRise(rows, fromS);
    return { loud: all.map((db, band) => db + Math.max(0, last[band] - then[band]) + rise),
      heard: this.#learned + before.length };
  }

  /**
   * How far (dB, at least 0) the room's level rose above that of the background `rows`, from
   * the frames of the last `roomGainMs` outside turns before the candidate (it starts at
   * `fromS`: counted, its own frames, 700 ms of a person's words after the server's VAD paused
   * the reply, were the room's rise and held those words back as the room:
   * tests/test_client_vad.py), playback included where the reply's
   * echo does not rule them (`#echoMayRule`: the echo is no rise of the room; counted as one, a
   * reply's echo 30 dB down through Chromium's processing lifted the background 14 dB 1 s into
   * the reply, and a "Stop." at -6 dBFS over it was held back as the room), once they hold
   * `roomRecentMs` of frames (a rise is a second of room: the quarter second of echo before a
   * person's "Wait.", which their voice decorrelated, lifted it 15 dB as the room's median in
   * Chromium, and held that "Wait." back as the room): the smaller of the
   * rises of their `roomGainPercentile` and of their `roomPercentile` levels (each the median
   * over the bands). An auto gain lifts both; it lifts the quiet frames more than the loud ones
   * (its limiter holds the peaks: in the page grid's TV case at -45 dBFS, the 4 s before 8.8 s
   * stood 15 dB above the first 4 s in their median levels, 7.6 dB in their loud ones), so the
   * smaller rise is taken.
   */
  #gainRise(rows, fromS) {
    const c = this.#config;
    const outside = this.#outside.filter((frame) => frame.t < fromS && !this.#echoMayRule(frame))
      .map((frame) => frame.row);
    if (outside.length < c.roomRecentMs / FRAME_MS) return 0;
    const rise = (percentile) => {
      const now = bandPercentile(outside, percentile);
      const then = bandPercentile(rows, percentile);
      return now.map((db, band) => db - then[band]).sort((x, y) => x - y)[Math.floor(BANDS / 2)];
    };
    return Math.max(0, Math.min(rise(c.roomGainPercentile), rise(c.roomPercentile)));
  }

  /**
   * Whether the candidate frames `rows` (band rows, by start time `times`) starting at
   * `fromS` are the room: {background, firstS}; firstS is the first frame that holds enough
   * more energy than the background explains (the first frame when no background is known;
   * null: none, or the candidate stays too far below the person's level).
   */
  isBackground(fromS, times, rows) {
    const c = this.#config;
    const nearDb = fromS - this.#firstS < c.roomColdMs / 1000 ? c.roomColdNearDb : c.roomNearDb;
    const loudest = Math.max(...rows.map((row) => totalDb(row)));
    if (loudest < this.personDb() - nearDb) return { background: true, firstS: null };
    const { loud, heard } = this.#loud(fromS);
    if (loud === null) return { background: false, firstS: times[0] ?? null };
    const loudPower = loud.map((db) => 10 ** (db / 10));
    const total = loudPower.reduce((sum, power) => sum + power, 0);
    const youngFrames = c.roomYoungMs / FRAME_MS;
    const marginDb = c.roomAboveDb + c.roomYoungAboveDb * Math.max(0, 1 - heard / youngFrames);
    const needed = total * 10 ** (marginDb / 10);
    for (let i = 0; i < rows.length; i += 1) {
      let excess = 0;
      for (let band = 0; band < BANDS; band += 1) {
        excess += Math.max(0, 10 ** (rows[i][band] / 10) - loudPower[band]);
      }
      if (excess >= needed) return { background: false, firstS: times[i] };
    }
    return { background: true, firstS: null };
  }
}
