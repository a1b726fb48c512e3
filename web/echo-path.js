/**
 * The echo path of the page's VAD (vad.js): is a candidate the assistant's own reply heard
 * through the microphone, or the person? Issue 24's rule, the same as the server's
 * (server/listening/echo.py): a frame is the echo only when the reply's own audio, at the echo
 * path's measured lag and gain, explains its energy; speech energy the echo does not explain
 * is the person, whatever the envelopes' correlation; with no established echo path nothing
 * is echo. Plain objects, no audio APIs: it runs in the capture AudioWorklet and anywhere else.
 *
 * Features are band-envelope.js rows (five bands, dB, 10 ms frames) of the microphone and of
 * the playback worklet's output, placed on the capture clock (vad.js EchoReference).
 *
 * - Learning (`EchoPath.learn`): over the last `echoWindowMs` of microphone frames, the lag
 *   (0 to `echoMaxLagMs`) where the output's envelope correlates best with the microphone's
 *   (vad.js echoCorrelation, both the envelopes and the frames' spectral shapes), and the gain
 *   per band there (the median of microphone minus output over the frames where the output
 *   is within `echoGainRangeDb` of its loudest and the microphone is audible). A stretch is
 *   clearly echo, and sets the path, when that correlation reaches `echoPathLikeness`, at
 *   least `echoPathMinMs` of it is audible, and the output at that lag and gain explains it
 *   both ways: at least `echoPathConsistent` of its audible frames are within
 *   `echoConsistentDb` of the prediction (mean absolute band difference) and fewer than
 *   `echoUnexplainedShare` rise `echoExcessDb` above it. The two-sided test is what a
 *   person's voice cannot pass: the server's first version of this rule fitted the gain on a
 *   lead-in that already held the person's first syllable, so the reply "explained" the
 *   person (f06471a); fitted on the person, the gain puts a loud echo where the microphone is
 *   silent (the person's pauses, the reply's words before the person spoke), and those frames
 *   fail. The path is held until a later clear stretch replaces it, so a candidate is judged
 *   against the echo path as it was before the person spoke.
 * - Judging (`EchoPath.unexplained`): each frame of a candidate against the output at the
 *   held lag (each band the loudest within `echoSlackMs`: the output's placement on the
 *   capture clock jitters by a frame or two, and a room's reverberation holds the end of a
 *   word) plus the held gain, added in power to the room's floor (room-background.js): the
 *   frame is unexplained when the microphone is on average `echoExcessDb` or more above that
 *   over the bands (the server's EXCESS_DB, measured: echo-only frames under 0.5 dB, a person
 *   over an echo 6 dB within 20-40 ms of the onset).
 *
 * The server's version of the rule (issue 24, server/listening/echo_path.py)
 * shares the excess (6 dB), the share (0.1 of the frames, over at least the last 250 ms of a
 * held candidate) and the held path; it differs where the page's situation does: the page
 * knows the output exactly (no position estimate: `echoSlackMs` 30 ms, not 50), and its
 * microphone is usually switched on as a reply starts, so its first echo candidate comes
 * before any 1.5 s window of echo alone was heard. The server then falls back to the old
 * correlation rule; the page instead lets the stretch up to the candidate set the path, under
 * the two-sided test above, which a person's voice fails, and otherwise holds nothing as echo.
 * Measured in Chromium with a fake microphone (tests/test_browser_barge_in.py, node replays
 * of the capture worklet's input): the reply's own echo at -36 to -12 dBFS peak set the path
 * at its first candidate (likeness 0.87-0.97, consistent 0.97-1.0, unexplained 0-0.01); a
 * "Stop." with no echo correlated at most 0.31 and set none.
 */
import { BANDS } from './band-envelope.js';

/**
 * With no echo path yet, a candidate whose last learning stretch correlated at least this well
 * with the output is held as the reply's first echo until a path can be learned
 * (`EchoPath.unexplained`). Measured (tests/test_browser_barge_in.py's own-echo cases): a
 * -12 dB echo correlated 0.85-0.91 over its first 400 ms while no gain fitted it yet, and fired
 * the page when it dipped to 0.848 under `echoPathLikeness`; a "Stop." with no echo correlated
 * at most 0.31.
 */
const FIRST_ECHO_LIKENESS = 0.7;

/**
 * That first echo is held only at lags up to this (ms): where it was measured (the lag search
 * went to 500 ms then). Past it the search (to `echoMaxLagMs`, 1.2 s) finds a chance match of a
 * person's onset with the reply's start, the output before it silence as the microphone's was
 * (the server's SILENT_LEAD_LAG_MS, server/listening/echo.py): measured in node with no echo
 * at all (a headset), espeak-ng en-us+m3 "Wait." 0.7 and 1.1 s into the first reply matched
 * 0.84 at 700 and 1050 ms and was held as that echo. An echo that late still sets the path as
 * soon as it explains its stretch (`learn`): 600-1000 ms late, at its first candidate.
 */
const FIRST_ECHO_MAX_LAG_MS = 500;

/** Level of no sound in a band (dB), in the power sums. */
const NONE_DB = -200;

/** Power sum of two levels (dB). */
function addDb(a, b) {
  return 10 * Math.log10(10 ** (a / 10) + 10 ** (b / 10));
}

/**
 * Microphone rows from `fromS` to `nowS` (at most the last `echoWindowMs`, by frame start
 * time) with the output rows `lagMs` earlier, where both exist:
 * {times, mic, output} (arrays of the same length; rows are BANDS dB values).
 */
export function alignedRows(mic, echo, fromS, nowS, lagMs, config) {
  const frameS = config.frameMs / 1000;
  const span = Math.min(config.echoWindowMs, (nowS - fromS) * 1000 + config.frameMs);
  const count = Math.round(span / config.frameMs);
  const times = [];
  const micRows = [];
  const output = [];
  for (let i = count - 1; i >= 0; i -= 1) {
    const t = nowS - i * frameS;
    const row = mic.at(t);
    const played = echo.envelope.at(t - lagMs / 1000);
    if (row === null || played === null) continue;
    times.push(t);
    micRows.push(row);
    output.push(played);
  }
  return { times, mic: micRows, output };
}

/**
 * The gain per band (dB, microphone over output; null where the band heard no echo) of
 * aligned rows: the median difference over the frames where the output is within
 * `echoGainRangeDb` of its loudest in the band and the microphone `echoAudibleDb` above the
 * floor (`floor`: BANDS dB values).
 */
export function fitGain(micRows, outRows, floor, config) {
  const gain = new Array(BANDS).fill(null);
  for (let band = 0; band < BANDS; band += 1) {
    let loudest = -Infinity;
    for (const row of outRows) loudest = Math.max(loudest, row[band]);
    const differences = [];
    outRows.forEach((row, i) => {
      if (row[band] >= loudest - config.echoGainRangeDb
        && micRows[i][band] >= floor[band] + config.echoAudibleDb) {
        differences.push(micRows[i][band] - row[band]);
      }
    });
    if (differences.length < config.echoGainMinFrames) continue;
    differences.sort((a, b) => a - b);
    gain[band] = differences[differences.length >> 1];
  }
  return gain;
}

/**
 * How a microphone row compares with the echo predicted for it (`predicted`: {low, high}, the
 * quietest and loudest output level within the slack plus the gain, BANDS dB values each,
 * NONE_DB where no echo) and the floor: {audible, excessDb, differenceDb}. audible: some band
 * of either is `echoAudibleDb` above the floor; excessDb: mean over the bands of how far the
 * microphone rises above the loudest echo + floor (power sum); differenceDb: mean over the
 * audible bands of how far the microphone lies outside [quietest, loudest] echo + floor.
 */
function compareRow(row, predicted, floor, config) {
  let excess = 0;
  let difference = 0;
  let audibleBands = 0;
  for (let band = 0; band < BANDS; band += 1) {
    const high = addDb(predicted.high[band], floor[band]);
    const low = addDb(predicted.low[band], floor[band]);
    excess += Math.max(0, row[band] - high);
    const limit = floor[band] + config.echoAudibleDb;
    if (row[band] >= limit || predicted.high[band] >= limit) {
      difference += Math.max(0, row[band] - high, low - row[band]);
      audibleBands += 1;
    }
  }
  return {
    audible: audibleBands > 0,
    excessDb: excess / BANDS,
    differenceDb: audibleBands ? difference / audibleBands : 0,
  };
}

/** The echo predicted from output rows around index `i`: {low, high}, the quietest and the
 * loudest output level within `slack` rows per band plus `gain` (BANDS dB values, NONE_DB
 * where the band has no gain). */
function predictAt(outRows, i, slack, gain) {
  const low = new Array(BANDS).fill(NONE_DB);
  const high = new Array(BANDS).fill(NONE_DB);
  for (let band = 0; band < BANDS; band += 1) {
    if (gain[band] === null) continue;
    let loudest = -Infinity;
    let quietest = Infinity;
    for (let j = Math.max(0, i - slack); j <= Math.min(outRows.length - 1, i + slack); j += 1) {
      loudest = Math.max(loudest, outRows[j][band]);
      quietest = Math.min(quietest, outRows[j][band]);
    }
    low[band] = quietest + gain[band];
    high[band] = loudest + gain[band];
  }
  return { low, high };
}

/**
 * The echo path: lag (ms) and gain (dB per band) learned from stretches that were clearly
 * echo, held until the next one. See the module comment.
 */
export class EchoPath {
  #config;
  /** the lag (ms) of the echo path, or null before one was established */
  lagMs = null;
  /** the gain (dB per band, null where no echo was heard), or null before one */
  gainDb = null;
  /** what the last `learn` measured: {likeness, lagMs, consistent, unexplained, audibleMs} */
  lastCheck = null;

  /** @param {object} config DEFAULT_VAD_CONFIG-shaped (vad.js) */
  constructor(config) {
    this.#config = config;
  }

  /** Whether a path was established (without one nothing is echo). */
  get established() {
    return this.lagMs !== null;
  }

  /**
   * Try to learn the path from the microphone rows (`mic`, a vad.js LevelHistory) from
   * `fromS` to `nowS` against the output (`echo`, a vad.js EchoReference), given the room's
   * `floor` (BANDS dB values) and `bestLag` ((fromS, nowS) => {likeness, lagMs} | null: the
   * best correlation's lag). Returns true when the stretch was clearly echo and set the path.
   */
  learn(mic, echo, fromS, nowS, floor, bestLag) {
    const c = this.#config;
    const best = bestLag(fromS, nowS);
    if (best === null || best.likeness < c.echoPathLikeness) {
      this.lastCheck = best && { likeness: best.likeness, lagMs: best.lagMs };
      return false;
    }
    const rows = alignedRows(mic, echo, fromS, nowS, best.lagMs, c);
    const gain = fitGain(rows.mic, rows.output, floor, c);
    const judged = this.#judge(rows, gain, floor, 0);
    this.lastCheck = { likeness: best.likeness, lagMs: best.lagMs, ...judged };
    if (judged.audibleMs < c.echoPathMinMs || judged.consistent < c.echoPathConsistent
      || judged.unexplained >= c.echoUnexplainedShare) return false;
    this.lagMs = best.lagMs;
    this.gainDb = gain;
    return true;
  }

  /**
   * The candidate's frames from `fromS` to `nowS` against the held path: {share, firstS}:
   * the share of its audible frames the echo does not explain and the start time of the first
   * such frame (null: none). With no path held nothing is echo (share 1), except while the last
   * `learn` found a stretch correlating with the output (`FIRST_ECHO_LIKENESS`) that could not
   * set a path yet: the reply's first echo, too short to learn from (under `echoPathMinMs`
   * audible) or not yet consistent with one gain (its first few hundred ms, while the
   * browser's audio processing settles on it), is held (share 0) until a path can be learned.
   * Holding only the too-short echo, a -12 dB echo correlating 0.94 whose first fit failed
   * fired the page about 340 ms into the reply (3 of 138 own-echo cases); holding neither,
   * 2 of 15 runs. `skip(t)`: the frame that started at t (s) is not judged (vad.js: a
   * transient's, transients.js).
   */
  unexplained(mic, echo, fromS, nowS, floor, skip = null) {
    if (!this.established) {
      const check = this.lastCheck;
      const likely = check !== null && check.likeness >= FIRST_ECHO_LIKENESS
        && check.lagMs <= FIRST_ECHO_MAX_LAG_MS;
      return { share: likely ? 0 : 1, firstS: fromS };
    }
    const rows = alignedRows(mic, echo, fromS, nowS, this.lagMs, this.#config);
    const judged = this.#judge(rows, this.gainDb, floor, fromS, skip);
    return { share: judged.unexplained, firstS: judged.firstS };
  }

  /**
   * Aligned rows against `gain`: {audibleMs, consistent, unexplained, firstS} (shares of the
   * audible frames; firstS: the first unexplained frame at or after `fromS`, or null).
   */
  #judge(rows, gain, floor, fromS, skip = null) {
    const c = this.#config;
    const slack = Math.round(c.echoSlackMs / c.frameMs);
    let audible = 0;
    let consistent = 0;
    let unexplained = 0;
    let firstS = null;
    rows.mic.forEach((row, i) => {
      if (skip?.(rows.times[i])) return;
      const { audible: heard, excessDb, differenceDb } = compareRow(
        row, predictAt(rows.output, i, slack, gain), floor, c);
      if (!heard) return;
      audible += 1;
      if (differenceDb <= c.echoConsistentDb) consistent += 1;
      if (excessDb >= c.echoExcessDb) {
        unexplained += 1;
        if (firstS === null && rows.times[i] >= fromS - 1e-6) firstS = rows.times[i];
      }
    });
    return {
      audibleMs: audible * c.frameMs,
      consistent: audible ? consistent / audible : 0,
      unexplained: audible ? unexplained / audible : 0,
      firstS,
    };
  }
}
