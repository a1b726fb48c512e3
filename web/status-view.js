/** Maximum number of entries kept in the log area. */
const LOG_LIMIT = 50;

/** The status line (connection, response state, barge-in latency) and the small event log. */
export class StatusView {
  #connection;
  #response;
  #latency;
  #log;

  /** @param {{connection: HTMLElement, response: HTMLElement, latency: HTMLElement, log: HTMLOListElement}} elements */
  constructor({ connection, response, latency, log }) {
    this.#connection = connection;
    this.#response = response;
    this.#latency = latency;
    this.#log = log;
  }

  /** @param {'connecting'|'connected'|'disconnected'} state */
  setConnection(state) {
    this.#connection.dataset.state = state;
    setText(this.#connection, state[0].toUpperCase() + state.slice(1));
  }

  /** @param {'idle'|'waiting'|'speaking'|'paused'|'stopped'} state */
  setResponse(state) {
    const label = { waiting: 'waiting for audio', paused: 'paused — listening' }[state] ?? state;
    setText(this.#response, `Assistant: ${label}`);
  }

  /**
   * @param {number} ms time from the barge-in's start to local silence
   * @param {string} source 'button' (start: the Stop gesture) or 'vad' (start: speech onset)
   */
  setBargeInLatency(ms, source) {
    const start = source === 'vad' ? 'Speech' : 'Stop';
    setText(this.#latency, `${start} → silence: ${ms.toFixed(1)} ms`);
  }

  /** Append a log line; `level` ('info' | 'error') is its CSS class. */
  log(level, message) {
    const entry = document.createElement('li');
    entry.className = level;
    const time = document.createElement('time');
    time.textContent = new Date().toLocaleTimeString();
    entry.append(time, ` ${message}`);
    this.#log.append(entry);
    while (this.#log.childElementCount > LOG_LIMIT) this.#log.firstElementChild.remove();
    this.#log.scrollTop = this.#log.scrollHeight;
  }
}

/** Set text only when it changed, so the aria-live region announces real changes only. */
function setText(element, text) {
  if (element.textContent !== text) element.textContent = text;
}
