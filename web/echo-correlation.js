/**
 * How well the microphone's band envelope follows the assistant's output (vad.js
 * EchoReference): the correlations the page's VAD asks of its echo path (echo-path.js, through
 * `echoLikeness`) and of the room (room-background.js, through `RoomEchoRules`: where the
 * reply's echo does not rule the microphone, a room heard while it plays is learned). Plain
 * functions over vad.js LevelHistory rows (band-envelope.js: five bands, dB, 10 ms frames), no
 * audio APIs. Times are seconds on the capture clock.
 */
import { BANDS } from './band-envelope.js';
import { alignedRows } from './echo-path.js';

/**
 * Correlation of two equally long lists of band-level rows (Pearson's r over all bands and
 * rows with each band's mean removed, levels floored `rangeDb` below the loudest of each
 * list); 0 when either is constant. With `shape`, each row's mean over the bands is removed
 * too, so that only the spectral shape of each frame counts, not its overall level.
 */
export function bandCorrelation(xs, ys, rangeDb, shape = false) {
  return correlation(centred(xs, rangeDb, shape), centred(ys, rangeDb, shape));
}

/**
 * Rows flattened, floored `rangeDb` below their maximum, each band's mean removed (with
 * `shape`, then each row's mean as well).
 */
function centred(rows, rangeDb, shape) {
  let loudest = -Infinity;
  for (const row of rows) for (const level of row) loudest = Math.max(loudest, level);
  const floor = loudest - rangeDb;
  const out = new Float64Array(rows.length * BANDS);
  for (let band = 0; band < BANDS; band += 1) {
    let mean = 0;
    for (const row of rows) mean += Math.max(row[band], floor);
    mean /= rows.length;
    rows.forEach((row, i) => {
      out[i * BANDS + band] = Math.max(row[band], floor) - mean;
    });
  }
  if (shape) {
    for (let i = 0; i < rows.length; i += 1) {
      let mean = 0;
      for (let band = 0; band < BANDS; band += 1) mean += out[i * BANDS + band];
      mean /= BANDS;
      for (let band = 0; band < BANDS; band += 1) out[i * BANDS + band] -= mean;
    }
  }
  return out;
}


/** Pearson's r of two `centred` lists of the same length; 0 when either is constant. */
function correlation(x, y) {
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < x.length; i += 1) {
    sxy += x[i] * y[i];
    sxx += x[i] * x[i];
    syy += y[i] * y[i];
  }
  return sxx > 0 && syy > 0 ? sxy / Math.sqrt(sxx * syy) : 0;
}

/**
 * The delay of the output's band rows `echo.envelope` behind the microphone's `mic` (`lags`:
 * {fromMs, toMs}, by default 0 to `echoMaxLagMs`, in `frameMs` steps) where their
 * `bandCorrelation` from `fromS` to `nowS` (at most the last `echoWindowMs`, by frame start
 * time) is largest: {r, lagMs, rows} (rows: echo-path.js alignedRows' {times, mic, output}), or
 * null when no delay overlaps on `minSpeechMs` of frames. The microphone's rows are read and
 * centred once for all the delays where the output covers all of them (the usual case: the
 * output's rows are kept `echoMaxLagMs` longer than the microphone's): the search costs one
 * output lookup and one correlation per delay, not a second lookup and centring of the
 * microphone's (the range grew from 500 to 1200 ms, issue 24).
 */
function bestLag(mic, echo, fromS, nowS, config, lags = null) {
  const needed = Math.max(2, Math.round(config.minSpeechMs / config.frameMs));
  const heard = alignedRows(mic, { envelope: mic }, fromS, nowS, 0, config); // the mic's own rows
  const fromMs = lags?.fromMs ?? 0;
  const toMs = lags?.toMs ?? config.echoMaxLagMs;
  let micCentred = null;
  let best = null;
  for (let lag = fromMs; lag <= toMs + 1e-6; lag += config.frameMs) {
    const output = heard.times.map((t) => echo.envelope.at(t - lag / 1000));
    const whole = output.every((row) => row !== null);
    const rows = whole ? { times: heard.times, mic: heard.mic, output }
      : alignedRows(mic, echo, fromS, nowS, lag, config);
    if (rows.mic.length < needed) continue;
    const x = whole ? (micCentred ??= centred(heard.mic, config.echoDynamicRangeDb, false))
      : centred(rows.mic, config.echoDynamicRangeDb, false);
    const r = correlation(x, centred(rows.output, config.echoDynamicRangeDb, false));
    if (best === null || r > best.r) best = { r, lagMs: lag, rows };
  }
  return best;
}

/**
 * Echo likeness of the microphone's band rows in `mic` (by frame start time) from `fromS` to
 * `nowS` (at most the last `echoWindowMs`), compared with the output's band rows
 * `echo.envelope` delayed by 0 to `echoMaxLagMs` (in `frameMs` steps; `lags`: {fromMs, toMs}
 * instead, as vad.js asks near a held echo path's lag): at the delay with the
 * largest `bandCorrelation` (the envelopes move together), the mean of that correlation and of
 * the spectral-shape correlation (`bandCorrelation` with `shape`: the frames sound alike).
 * A delay counts when the two overlap on at least `minSpeechMs` of frames (the output
 * envelope starts when the microphone does). Returns {likeness, lagMs}, or null when no delay
 * counts. Measured before issue 24 (node and Chromium, the benchmark's recordings): the
 * reply's own echo at 0 to -10 dB and 40-450 ms late 0.95-1.0, through Chromium's processing
 * 0.86-0.99; a person over the reply -0.10-0.58.
 */
export function echoLikeness(mic, echo, fromS, nowS, config, lags = null) {
  const best = bestLag(mic, echo, fromS, nowS, config, lags);
  if (best === null) return null;
  const shape = bandCorrelation(best.rows.mic, best.rows.output, config.echoDynamicRangeDb, true);
  return { likeness: (best.r + shape) / 2, lagMs: best.lagMs };
}

/**
 * Whether the reply's echo may rule the microphone around a frame heard while it played: the
 * server's `EchoDetector.echo_rules` (server/listening/echo.py), with its constants
 * (`roomEchoCorrelation` is ROOM_ECHO_CORRELATION, `roomEchoStepMs` LEARN_STEP_MS,
 * `roomEchoSpanMs` MAX_SPAN_MS). The second around each `roomEchoStepMs` step (from half of
 * `roomEchoSpanMs` before it to as long after) is compared with the output once all of it was
 * heard (`update`), at the delay where they correlate best (`bestLag`, as `echoLikeness`); the
 * echo rules there (`rules`: true) unless that correlation is above 0 and below
 * `roomEchoCorrelation`, or when nothing could be compared (no output rows, the second not
 * judged while a reply played). Measured on the server (tests/echo_room.py rooms, 1 s spans
 * every 250 ms over a Piper reply): a TV talker or babble at -45 dBFS RMS with no echo
 * correlated 0.19-0.64, the echo alone 0.82-1.0; on the page's band rows, see
 * `roomEchoCorrelation` in room-background.js ROOM_CONFIG.
 */
export class RoomEchoRules {
  #config;
  /** step index (multiples of roomEchoStepMs) -> the echo rules its second */
  #steps = new Map();
  /** the latest step judged */
  #last = null;

  /** @param {object} config vad.js DEFAULT_VAD_CONFIG-shaped */
  constructor(config) {
    this.#config = config;
  }

  /**
   * The microphone frame that started at `timeS` was pushed to `mic` (vad.js LevelHistory) and
   * the output's rows to `echo.envelope` (vad.js EchoReference): judge the latest step whose
   * second ends with that frame, if not judged yet. Call it for the frames of a reply playing
   * (the steps of its frames are judged then; a step never judged is ruled by the echo).
   */
  update(timeS, mic, echo) {
    const c = this.#config;
    const halfMs = c.roomEchoSpanMs / 2;
    const step = Math.floor((Math.round(timeS * 1000) + c.frameMs - halfMs) / c.roomEchoStepMs);
    if (step === this.#last) return;
    this.#last = step;
    const stepS = (step * c.roomEchoStepMs) / 1000;
    const best = bestLag(mic, echo, stepS - halfMs / 1000, stepS + (halfMs - c.frameMs) / 1000, c);
    this.#steps.set(step, !(best !== null && best.r > 0 && best.r < c.roomEchoCorrelation));
    const kept = Math.ceil((c.roomSettleMs + c.roomEchoSpanMs) / c.roomEchoStepMs) + 1;
    for (const old of this.#steps.keys()) if (old < step - kept) this.#steps.delete(old);
  }

  /** Whether the echo may rule the second around the frame that started at `timeS` (see the
   * class comment): the verdict of the step nearest to its end; true for a step not judged. */
  rules(timeS) {
    const step = Math.round((timeS * 1000 + this.#config.frameMs) / this.#config.roomEchoStepMs);
    return this.#steps.get(step) ?? true;
  }
}
