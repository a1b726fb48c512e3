/**
 * performance.now() time (ms) of time `time` (s) on the clock of `context` (an AudioContext or
 * null): a worklet stamped it with its `currentTime`, which the context's clock read `time`
 * seconds; that was now minus the clock's advance since then (never in the future).
 */
export function performanceTimeOf(context, time) {
  const behindMs = ((context?.currentTime ?? time) - time) * 1000;
  return performance.now() - Math.max(0, behindMs);
}
