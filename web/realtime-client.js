/** Where the resume token of the tab's session is kept: `sessionStorage` outlives a reload. */
const TOKEN_KEY = 'duplex-demo.resume-token';

/** Reconnect backoff: the first retry after this long (ms), doubling per failed try... */
const RECONNECT_BASE_MS = 500;
/** ...up to this (ms); each delay is drawn within ±25 % (clients of one server spread out). */
const RECONNECT_MAX_MS = 8000;

/**
 * Close codes after which the page does not reconnect by itself: 1000 (the server ended the
 * session on purpose, e.g. its idle timeout) and 1008 (a limit was broken: event rate, input
 * speed). Every other close (1006 a dropped network, 1001 a server going away, 1011 a missed
 * keepalive) is retried with backoff; the Reconnect button connects at once.
 */
const FINAL_CLOSE_CODES = new Set([1000, 1008]);

/**
 * One WebSocket to the realtime endpoint: one JSON event per text frame, every sent event gets
 * a unique `event_id` (errors name it). After a drop it reconnects by itself (backoff above),
 * with the resume token of its session (`?resume=`; the app stores the token from each
 * `session.created`), so the server gives the same session back (`session.resumed`) within
 * its resume window; a refused token gets a fresh session and an `error`.
 */
export class RealtimeClient {
  #url;
  #socket = null;
  #sent = 0;
  #idPrefix = `evt_${Date.now().toString(36)}`;
  #storage;
  #attempt = 0;
  #retryTimer = null;

  /**
   * @param {string} url ws:// or wss:// URL
   * @param {object} handlers
   * @param {(event: object) => void} handlers.onEvent a parsed server event
   * @param {(state: 'connecting'|'open'|'closed', detail?: string, retryMs?: number|null) => void} handlers.onState
   *   `retryMs`: when closed, the delay before the next automatic try (null: none)
   * @param {(message: string) => void} handlers.onProtocolError a frame that is not a JSON event
   * @param {Storage|null} [storage] where the resume token is kept (default `sessionStorage`)
   */
  constructor(url, { onEvent, onState, onProtocolError }, storage = globalThis.sessionStorage ?? null) {
    this.#url = url;
    this.#storage = storage;
    this.onEvent = onEvent;
    this.onState = onState;
    this.onProtocolError = onProtocolError;
  }

  get isOpen() {
    return this.#socket?.readyState === WebSocket.OPEN;
  }

  /** The token that resumes this tab's session, null when there is none. */
  get resumeToken() {
    return this.#storage?.getItem(TOKEN_KEY) ?? null;
  }

  set resumeToken(token) {
    if (typeof token === 'string' && token) this.#storage?.setItem(TOKEN_KEY, token);
    else this.#storage?.removeItem(TOKEN_KEY);
  }

  /** Open a socket (resuming the tab's session when a token is kept) unless one is already
   * connecting or open; cancels a pending automatic retry. */
  connect() {
    if (this.#socket) return;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    const token = this.resumeToken;
    const url = token ? `${this.#url}?resume=${encodeURIComponent(token)}` : this.#url;
    const socket = new WebSocket(url);
    this.#socket = socket;
    this.onState('connecting');
    socket.addEventListener('open', () => this.onState('open'));
    socket.addEventListener('message', (message) => this.#receive(message.data));
    socket.addEventListener('close', (close) => {
      if (this.#socket !== socket) return;
      this.#socket = null;
      const retryMs = FINAL_CLOSE_CODES.has(close.code) ? null : this.#scheduleRetry();
      this.onState('closed', close.reason || `code ${close.code}`, retryMs);
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

  /** Schedule the next automatic `connect`; returns its delay (ms). */
  #scheduleRetry() {
    const base = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** this.#attempt);
    const delay = Math.round(base * (0.75 + Math.random() * 0.5));
    this.#attempt += 1;
    this.#retryTimer = setTimeout(() => this.connect(), delay);
    return delay;
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
    if (event.type === 'session.created') this.#attempt = 0;
    this.onEvent(event);
  }
}
