/**
 * Streaming sample-rate converter for mono Float32 audio: band-limited interpolation with a
 * Blackman-windowed sinc kernel (J. O. Smith, "Digital Audio Resampling", CCRMA, the method of
 * libsamplerate/soxr in its simplest form). When downsampling, the cutoff is lowered to
 * `PASSBAND` of the output Nyquist frequency so the mic's upper band does not alias.
 * No DOM, no audio APIs: runs in the capture AudioWorklet.
 */

/** Zero crossings of the sinc on each side of the kernel (at the cutoff frequency). */
const ZERO_CROSSINGS = 8;
/** Fraction of the lower Nyquist frequency kept (the transition band is above it). */
const PASSBAND = 0.9;
/** Kernel table resolution: entries per input sample (linear interpolation between them). */
const TABLE_STEPS = 64;

export class Resampler {
  #step;
  #cutoff;
  #half;
  #table;
  #buffer = new Float32Array(4096);
  #length = 0;
  /** input position (in samples of #buffer) of the next output sample */
  #position;

  /**
   * @param {number} inRate input sample rate in Hz
   * @param {number} outRate output sample rate in Hz
   */
  constructor(inRate, outRate) {
    this.inRate = inRate;
    this.outRate = outRate;
    this.#step = inRate / outRate;
    this.#cutoff = Math.min(1, outRate / inRate) * (inRate === outRate ? 1 : PASSBAND);
    this.#half = Math.ceil(ZERO_CROSSINGS / this.#cutoff);
    this.#table = kernelTable(this.#cutoff, this.#half);
    // Start with the kernel's left half over silence so the first output is input sample 0.
    this.#length = this.#half;
    this.#position = this.#half;
  }

  /**
   * Convert the next block of input; returns the output samples it completed (possibly none).
   * @param {Float32Array} input samples at inRate
   * @returns {Float32Array} samples at outRate
   */
  push(input) {
    if (this.inRate === this.outRate) return Float32Array.from(input);
    this.#append(input);
    const count = Math.max(0, Math.ceil((this.#length - this.#half - this.#position) / this.#step));
    const out = new Float32Array(count);
    for (let n = 0; n < count; n += 1) {
      out[n] = this.#sampleAt(this.#position);
      this.#position += this.#step;
    }
    // Keep the samples the next outputs still need (the kernel's left half).
    const drop = Math.max(0, Math.floor(this.#position) - this.#half);
    this.#buffer.copyWithin(0, drop, this.#length);
    this.#length -= drop;
    this.#position -= drop;
    return out;
  }

  #append(input) {
    if (this.#length + input.length > this.#buffer.length) {
      const bigger = new Float32Array(2 * (this.#length + input.length));
      bigger.set(this.#buffer.subarray(0, this.#length));
      this.#buffer = bigger;
    }
    this.#buffer.set(input, this.#length);
    this.#length += input.length;
  }

  /** Band-limited value at fractional input position `x` (needs #half samples either side). */
  #sampleAt(x) {
    const base = Math.floor(x);
    let sum = 0;
    let weights = 0;
    for (let k = base - this.#half + 1; k <= base + this.#half; k += 1) {
      const distance = Math.abs(x - k) * TABLE_STEPS;
      const index = Math.floor(distance);
      if (index >= this.#table.length - 1) continue;
      const fraction = distance - index;
      const weight = this.#table[index] + (this.#table[index + 1] - this.#table[index]) * fraction;
      sum += this.#buffer[k] * weight;
      weights += weight;
    }
    return weights ? sum / weights : 0;
  }
}

/** Kernel values at distances 0, 1/TABLE_STEPS, ... half input samples (0 at the edge). */
function kernelTable(cutoff, half) {
  const table = new Float32Array(half * TABLE_STEPS + 1);
  for (let i = 0; i < table.length; i += 1) {
    const d = i / TABLE_STEPS;
    const arg = Math.PI * cutoff * d;
    const sinc = d === 0 ? 1 : Math.sin(arg) / arg;
    const w = 0.5 + 0.5 * (d / half); // Blackman window evaluated over [-half, half]
    const window = 0.42 - 0.5 * Math.cos(2 * Math.PI * w) + 0.08 * Math.cos(4 * Math.PI * w);
    table[i] = cutoff * sinc * window;
  }
  return table;
}
