/**
 * The room's background for the page's VAD (vad.js): babble, a TV, a fan. A barge-in starts
 * only on speech clearly above it. The page's port of server/listening/room_background.py
 * (issue 24): the same rule, on the band-envelope.js rows (five bands, dB, 10 ms frames) the
 * VAD already computes. Plain objects, no audio APIs.
 *
 * - The background: the band levels of the last `roomHistoryMs` of frames heard outside the
 *   person's turns (a candidate that fired, until it is released) and outside the assistant's
 *   playback (its echo is echo-path.js's business), learned once they are `roomSettleMs` old
 *   (and the turns outside playback the server's VAD did not take for the person: a TV's
 *   sentences fire the page's VAD, which cannot tell a TV's voice from the person's, but the
 *   server's keeps the room's background and the person's level too,
 *   server/listening/room_background.py; without server VAD every turn is the person's)
 *   (longer than a candidate takes to fire, so a person's first syllables are never learned as
 *   the room), and the frames before a candidate outside turns and playback. When none is
 *   known (the microphone was switched on while a reply played), no candidate is the room:
 *   the echo in the frames before it would raise the bar for the person talking over it.
 * - A candidate is the room (`isBackground`) when none of its frames holds `roomAboveDb` more
 *   energy than the background's `roomPercentile` band levels explain (energy counted band by
 *   band: a voice stands out where a fan's rumble or a TV's treble does not). The server's
 *   constants, measured there on tests/room_sounds.py's babble and TV at -45 dBFS RMS: the
 *   loudest window of babble held at most 2.5 dB above its 90th percentile levels, a TV
 *   talker's 5.3 dB; a person at -20 dBFS RMS, 20 dB and more.
 * - The room's floor (`floor`): the `roomFloorPercentile` band levels of every frame of the
 *   last `roomFloorMs` (minimum statistics, R. Martin, IEEE TSAP 2001, as the server's echo
 *   detector), which echo-path.js adds to the echo it predicts.
 */
import { BANDS, SILENCE_DB } from './band-envelope.js';

/** The `percentile` (0-100, nearest rank) of each band over `rows`; SILENCE_DB when none. */
export function bandPercentile(rows, percentile) {
  const out = new Array(BANDS).fill(SILENCE_DB);
  if (!rows.length) return out;
  const index = Math.min(rows.length - 1, Math.floor((percentile / 100) * rows.length));
  for (let band = 0; band < BANDS; band += 1) {
    const values = rows.map((row) => row[band]).sort((a, b) => a - b);
    out[band] = values[index];
  }
  return out;
}

/**
 * The room's background over one microphone stream; times are seconds on one clock.
 * `confirmTurns`: the server's VAD judges the turns (the page asked for server VAD): the
 * frames of a turn heard outside playback that the server did not take for the person
 * (`personSpoke`) within `roomConfirmMs` of them are the room (a TV's sentence, babble that
 * never pauses) and become background.
 */
export class RoomBackground {
  #config;
  confirmTurns = false;
  /** frames not yet settled, outside turns: {t, row, playing}, oldest first */
  #recent = [];
  /** settled background rows, oldest first: {t, row} */
  #background = [];
  /** every frame's row of the last roomFloorMs: {t, row} */
  #all = [];
  /** the turns not yet settled: {fromS, endS, person, frames}, the latest last; a turn's
   * frames `roomConfirmMs` old leave it (background unless the server confirmed the turn) */
  #turns = [];

  /** @param {object} config DEFAULT_VAD_CONFIG-shaped (vad.js) */
  constructor(config) {
    this.#config = config;
  }

  /** A frame that started at `timeS` with band levels `row`; `playing`: the reply (or its
   * echo tail) may be in it. */
  push(timeS, row, playing) {
    const c = this.#config;
    const turn = this.#turns.at(-1);
    if (turn && turn.endS === null) {
      turn.frames.push({ t: timeS, row, playing });
    } else {
      this.#recent.push({ t: timeS, row, playing });
    }
    this.#all.push({ t: timeS, row });
    while (this.#all[0].t < timeS - c.roomFloorMs / 1000) this.#all.shift();
    while (this.#recent.length && this.#recent[0].t <= timeS - c.roomSettleMs / 1000) {
      const frame = this.#recent.shift();
      if (!frame.playing) this.#background.push(frame);
    }
    const confirmedS = timeS - c.roomConfirmMs / 1000;
    for (const old of this.#turns) {
      if (old.fromS > confirmedS) break;
      while (old.frames.length && old.frames[0].t <= confirmedS) {
        const frame = old.frames.shift();
        if (this.confirmTurns && !old.person && !frame.playing) this.#background.push(frame);
      }
    }
    while (this.#turns.length && this.#turns[0].endS !== null
      && this.#turns[0].endS <= confirmedS) this.#turns.shift();
    while (this.#background.length
      && this.#background[0].t < timeS - c.roomHistoryMs / 1000) this.#background.shift();
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

  /** The room's floor per band (dB): see the module comment; SILENCE_DB before any frame. */
  floor() {
    return bandPercentile(this.#all.map((frame) => frame.row), this.#config.roomFloorPercentile);
  }

  /** The background's loud band levels (dB) for a candidate from `fromS`: of the settled
   * background and of the frames before `fromS` outside turns and playback; null: none. */
  #loud(fromS) {
    const rows = this.#background.map((frame) => frame.row);
    for (const frame of this.#recent) {
      if (frame.t < fromS && !frame.playing) rows.push(frame.row);
    }
    return rows.length ? bandPercentile(rows, this.#config.roomPercentile) : null;
  }
  /**
   * Whether the candidate frames `rows` (band rows, by start time `times`) starting at
   * `fromS` are the room: {background, firstS}; firstS is the first frame that holds
   * `roomAboveDb` more energy than the background explains (null: none). Not background when
   * no background is known.
   */
  isBackground(fromS, times, rows) {
    const loud = this.#loud(fromS);
    if (loud === null) return { background: false, firstS: times[0] ?? null };
    const loudPower = loud.map((db) => 10 ** (db / 10));
    const total = loudPower.reduce((sum, power) => sum + power, 0);
    const needed = total * 10 ** (this.#config.roomAboveDb / 10);
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
