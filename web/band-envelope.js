/**
 * Band envelope of an audio stream: for every 10 ms frame, the level in dB of five frequency
 * bands, the features the client VAD's echo guard correlates between the assistant's output and
 * the microphone (vad.js). Plain objects, no audio APIs: it runs in both AudioWorklets.
 *
 * The analysis is the server echo detector's (server/listening/echo.py BandEnvelope), so both guards see
 * the same features: every 10 ms, the last 30 ms of samples under a Hann window, a power
 * spectrum (zero-padded to a power of two), and for each band [lo, hi) of BAND_EDGES_HZ 10 log10
 * of the band's share of the windowed mean square (a full-scale sine in the band reads -3 dB),
 * at least SILENCE_DB. Bands from an FFT do not overlap: a filter bank with skirts wide enough
 * to be cheap made the bands move together and told speech from echo no better than one band.
 */

/** Band edges in Hz (server/listening/echo.py BAND_EDGES_HZ). */
export const BAND_EDGES_HZ = Object.freeze([100, 400, 1000, 2000, 4000, 7000]);

/** Number of bands. */
export const BANDS = BAND_EDGES_HZ.length - 1;

/** Frame length in ms. */
export const FRAME_MS = 10;

/** Analysis window in ms. */
const ANALYSIS_MS = 30;

/** Level of a silent band (dB). */
export const SILENCE_DB = -120;

/** Total level (dB) of a row of band levels: 10 log10 of the summed band powers. */
export function totalDb(bands) {
  let power = 0;
  for (const level of bands) power += 10 ** (level / 10);
  return 10 * Math.log10(power);
}

/** In-place iterative radix-2 FFT of (re, im), length a power of two. */
function fft(re, im) {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i += 1) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j], re[i]];
      [im[i], im[j]] = [im[j], im[i]];
    }
  }
  for (let size = 2; size <= n; size <<= 1) {
    const step = (-2 * Math.PI) / size;
    for (let start = 0; start < n; start += size) {
      for (let k = 0; k < size / 2; k += 1) {
        const wr = Math.cos(step * k);
        const wi = Math.sin(step * k);
        const a = start + k;
        const b = a + size / 2;
        const tr = re[b] * wr - im[b] * wi;
        const ti = re[b] * wi + im[b] * wr;
        re[b] = re[a] - tr;
        im[b] = im[a] - ti;
        re[a] += tr;
        im[a] += ti;
      }
    }
  }
}

/**
 * Streaming band levels of one signal: push samples at `rateHz`, get one row of BANDS levels
 * (dB) per FRAME_MS frame completed (the analysis window reaches back over earlier pushes).
 */
export class BandEnvelope {
  /**
   * @param {number} rateHz sample rate of the samples pushed (Hz); the top band needs > 14 kHz
   */
  constructor(rateHz) {
    this.frameSamples = Math.round((rateHz * FRAME_MS) / 1000);
    const length = Math.round((rateHz * ANALYSIS_MS) / 1000);
    this.window = Float64Array.from({ length }, (_, i) => 0.5 - 0.5 * Math.cos(
      (2 * Math.PI * (i + 1)) / (length + 1)));
    let size = 1;
    while (size < length) size <<= 1;
    this.re = new Float64Array(size);
    this.im = new Float64Array(size);
    const squares = this.window.reduce((sum, w) => sum + w * w, 0);
    this.scale = 2 / (size * squares);
    this.bins = [];
    for (let band = 0; band < BANDS; band += 1) {
      this.bins.push([Math.ceil((BAND_EDGES_HZ[band] * size) / rateHz),
        Math.ceil((BAND_EDGES_HZ[band + 1] * size) / rateHz)]);
    }
    this.history = new Float32Array(length); // the last `length` samples, oldest first
    this.filled = 0;
  }

  /**
   * Push samples; returns the band levels (Float32Array of BANDS dB values) of each frame they
   * completed, in order (usually none or one).
   * @param {Float32Array} samples
   * @returns {Float32Array[]}
   */
  push(samples) {
    const rows = [];
    const history = this.history;
    let offset = 0;
    while (offset < samples.length) {
      const take = Math.min(this.frameSamples - this.filled, samples.length - offset);
      history.copyWithin(0, take);
      history.set(samples.subarray(offset, offset + take), history.length - take);
      offset += take;
      this.filled += take;
      if (this.filled === this.frameSamples) {
        this.filled = 0;
        rows.push(this.#row());
      }
    }
    return rows;
  }

  #row() {
    const { re, im, window, history } = this;
    re.fill(0);
    im.fill(0);
    for (let i = 0; i < window.length; i += 1) re[i] = history[i] * window[i];
    fft(re, im);
    const row = new Float32Array(BANDS);
    this.bins.forEach(([low, high], band) => {
      let power = 0;
      for (let k = low; k < high; k += 1) power += re[k] * re[k] + im[k] * im[k];
      power *= this.scale;
      row[band] = power > 0 ? Math.max(SILENCE_DB, 10 * Math.log10(power)) : SILENCE_DB;
    });
    return row;
  }
}
