/**
 * Timing of each interruption of an assistant reply, one entry per interrupted response:
 *   {responseId, itemId, source: 'vad'|'button'|'server_vad',
 *    onsetToSilenceMs   speech onset (first frame the VAD counted as speech) or Stop gesture ->
 *                       local silence, browser clock (performance.now()); 0 when the
 *                       reply was silent already (the server's VAD paused it first);
 *                       null when the server stopped the reply and no speech onset was known,
 *    bargeInToServerStopMs  barge_in sent -> `response.done` cancelled or
 *                       `conversation.item.truncated` received; null until then (and for
 *                       'server_vad', where the page sent no barge_in),
 *    calibrationMs      `conversation.item.heard.elapsed_ms` of the first calibrated result}
 */
export class BargeInTimings {
  /** the entries, oldest first (the same array for the page's lifetime: a test hook) */
  list = [];
  /** responseId -> {timing, sentAt}: barge-ins sent whose server stop has not arrived yet */
  #awaitingStop = new Map();

  /** @param {(timing: object) => void} onChange an entry was added or completed */
  constructor(onChange) {
    this.onChange = onChange;
  }

  /** Start the entry of an interruption that silenced `responseId`. */
  add(responseId, itemId, source, onsetToSilenceMs) {
    const timing = {
      responseId,
      itemId,
      source,
      onsetToSilenceMs,
      bargeInToServerStopMs: null,
      calibrationMs: null,
    };
    this.list.push(timing);
    this.onChange(timing);
    return timing;
  }

  /** The page sent `barge_in` for the entry's response (now). */
  sent(timing) {
    this.#awaitingStop.set(timing.responseId, { timing, sentAt: performance.now() });
  }

  /** The server stopped `responseId` (cancelled it or confirmed the truncation). */
  serverStopped(responseId) {
    const pending = this.#awaitingStop.get(responseId);
    if (!pending) return;
    this.#awaitingStop.delete(responseId);
    pending.timing.bargeInToServerStopMs = performance.now() - pending.sentAt;
    this.onChange(pending.timing);
  }

  /** A calibrated `conversation.item.heard` for `responseId` took `elapsedMs`. */
  calibrated(responseId, elapsedMs) {
    const timing = this.find(responseId);
    if (!timing || timing.calibrationMs !== null) return;
    timing.calibrationMs = elapsedMs;
    this.onChange(timing);
  }

  find(responseId) {
    return this.list.find((timing) => timing.responseId === responseId) ?? null;
  }

  /** Forget every entry (a new session). */
  clear() {
    this.list.length = 0;
    this.#awaitingStop.clear();
  }
}
