/**
 * One WebSocket to the realtime endpoint: one JSON event per text frame, every sent event gets
 * a unique `event_id` (errors name it). No automatic reconnect: a new socket is a new server
 * session, so the page offers a Reconnect button that calls `connect()` again.
 */
export class RealtimeClient {
  #url;
  #socket = null;
  #sent = 0;
  #idPrefix = `evt_${Date.now().toString(36)}`;

  /**
   * @param {string} url ws:// or wss:// URL
   * @param {object} handlers
   * @param {(event: object) => void} handlers.onEvent a parsed server event
   * @param {(state: 'connecting'|'open'|'closed', detail?: string) => void} handlers.onState
   * @param {(message: string) => void} handlers.onProtocolError a frame that is not a JSON event
   */
  constructor(url, { onEvent, onState, onProtocolError }) {
    this.#url = url;
    this.onEvent = onEvent;
    this.onState = onState;
    this.onProtocolError = onProtocolError;
  }

  get isOpen() {
    return this.#socket?.readyState === WebSocket.OPEN;
  }

  /** Open a socket unless one is already connecting or open. */
  connect() {
    if (this.#socket) return;
    const socket = new WebSocket(this.#url);
    this.#socket = socket;
    this.onState('connecting');
    socket.addEventListener('open', () => this.onState('open'));
    socket.addEventListener('message', (message) => this.#receive(message.data));
    socket.addEventListener('close', (close) => {
      if (this.#socket !== socket) return;
      this.#socket = null;
      this.onState('closed', close.reason || `code ${close.code}`);
    });
  }

  /**
   * Send one client event with a fresh `event_id`.
   * @returns {object|null} the event as sent, or null when the socket is not open
   */
  send(event) {
    if (!this.isOpen) return null;
    this.#sent += 1;
    const sent = { event_id: `${this.#idPrefix}_${this.#sent}`, ...event };
    this.#socket.send(JSON.stringify(sent));
    return sent;
  }

  #receive(data) {
    if (typeof data !== 'string') {
      this.onProtocolError('binary frame ignored');
      return;
    }
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      this.onProtocolError('malformed JSON frame ignored');
      return;
    }
    if (typeof event?.type !== 'string') {
      this.onProtocolError('frame without a type ignored');
      return;
    }
    this.onEvent(event);
  }
}
