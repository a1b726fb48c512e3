/**
 * Decode base64 PCM16 little-endian mono into Float32 samples in [-1, 1).
 * @param {string} base64
 * @returns {Float32Array} one sample per 16-bit frame (a trailing odd byte is ignored)
 */
export function decodePcm16(base64) {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  const samples = new Float32Array(bytes.length >> 1);
  for (let i = 0; i < samples.length; i += 1) {
    samples[i] = view.getInt16(i * 2, true) / 32768;
  }
  return samples;
}
