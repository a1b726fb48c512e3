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

/**
 * Base64 of raw bytes (e.g. PCM16 LE frames for `input_audio_buffer.append`).
 * @param {ArrayBuffer} buffer
 * @returns {string}
 */
export function encodeBase64(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x2000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x2000));
  }
  return btoa(binary);
}
