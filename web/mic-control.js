import { Microphone } from './microphone.js';
import { encodeBase64 } from './pcm16.js';
import { DEFAULT_VAD_CONFIG } from './vad.js';

/**
 * Server turn detection asked for while the microphone is on, when the page's "End of turn"
 * choice is "after a silence" (OpenAI Realtime `server_vad`: the turn ends after 500 ms of
 * silence). A test may ask for other settings through `window.duplexDemo.serverVad` (app.js)
 * before the mic is switched on: tests/page_barge_in.py turns `interrupt_response` and
 * `create_response` off, so that the server's VAD reports turns but never stops the reply
 * before the page's VAD decides.
 */
export const SERVER_VAD = Object.freeze({
  type: 'server_vad',
  threshold: 0.5,
  prefix_padding_ms: 300,
  silence_duration_ms: 500,
  create_response: true,
  interrupt_response: true,
});

/**
 * Server turn detection asked for when the page's "End of turn" choice is "when the sentence is
 * finished" (OpenAI Realtime `semantic_vad`, eagerness `auto` = medium: a turn whose words and
 * sound look unfinished, "I want to book a table for...", is waited for up to 4 s; the server
 * judges it with Smart Turn v3.2 and the transcript, docs/listening.md). Settable through
 * `window.duplexDemo.semanticVad` as SERVER_VAD is.
 */
export const SEMANTIC_VAD = Object.freeze({
  type: 'semantic_vad',
  eagerness: 'auto',
  create_response: true,
  interrupt_response: true,
});

/** Input rate (Hz) used before a session names one: the OpenAI default. */
const DEFAULT_INPUT_RATE = 24000;

/** Bound on `state.vadEvents` (oldest dropped). */
const VAD_EVENTS_KEPT = 1000;

/** The level meter's note per server turn-detection state (`on`: per turn-detection type). */
const SERVER_VAD_NOTES = {
  off: '',
  pending: 'Turn detection: requested',
  server_vad: 'Turn detection: on (speak to send a prompt; it ends after 500 ms of silence)',
  semantic_vad: 'Turn detection: on (speak to send a prompt; it ends when the sentence is finished)',
  unsupported: 'Server VAD unavailable: the microphone only interrupts the assistant',
};

/**
 * The page's microphone feature: the Mic toggle, the capture worklet with the client VAD, the
 * level meter, server turn detection (`session.update` with SERVER_VAD or SEMANTIC_VAD, as the
 * page's "End of turn" choice says) and the audio stream
 * (`input_audio_buffer.append`, 40 ms PCM16 frames, only while server VAD is requested or on: a
 * server without it would only buffer them).
 *
 * Keeps `state.mic` and `state.vadEvents` of the page's test hook up to date (see app.js).
 */
export class MicControl {
  #button;
  #error;
  #meter;
  #client;
  #playback;
  #state;
  #vadConfig;
  #turnDetection;
  #microphone;
  /** event_id of the session.update that asked for server VAD (its error means: unsupported) */
  #requestId = null;
  /** performance.now() of the current VAD candidate's first frame, null when the VAD is idle */
  onsetT = null;

  /**
   * @param {object} options
   * @param {HTMLButtonElement} options.button the Mic toggle (aria-pressed, data-state)
   * @param {HTMLElement} options.error the element showing microphone failures
   * @param {import('./level-meter.js').LevelMeter} options.meter
   * @param {import('./realtime-client.js').RealtimeClient} options.client
   * @param {import('./playback.js').Playback} options.playback
   * @param {object} options.state the page state: `mic`, `vadEvents`, `inputRate` are used
   * @param {() => object} options.vadConfig the VAD parameters to use when the mic starts
   * @param {() => object} options.turnDetection the `turn_detection` settings to ask for when
   *   the mic starts or the page's choice changes (SERVER_VAD or SEMANTIC_VAD unless a test
   *   changed them)
   */
  constructor({ button, error, meter, client, playback, state, vadConfig, turnDetection }) {
    this.#button = button;
    this.#error = error;
    this.#meter = meter;
    this.#client = client;
    this.#playback = playback;
    this.#state = state;
    this.#vadConfig = vadConfig;
    this.#turnDetection = turnDetection;
    this.#microphone = new Microphone({
      onAudio: (pcm) => this.#sendAudio(pcm),
      onVad: (event) => this.#onVad(event),
      onLevel: (level) => this.#onLevel(level),
      onEnded: (message) => {
        this.stop();
        this.#showError(message);
      },
    });
    button.addEventListener('click', () => this.toggle());
    this.#setButton('off');
  }

  get enabled() {
    return this.#microphone.enabled;
  }

  /** Switch the microphone on (asking for permission) or off. */
  async toggle() {
    if (this.#button.dataset.state !== 'off') {
      this.stop();
      return;
    }
    this.#showError(null);
    this.#setButton('starting');
    const error = await this.#microphone.start(this.#state.inputRate ?? DEFAULT_INPUT_RATE,
      this.#config());
    if (this.#button.dataset.state !== 'starting') return; // switched off meanwhile
    if (error) {
      this.#setButton('off');
      this.#showError(error);
      return;
    }
    this.#setButton('on');
    Object.assign(this.#state.mic, { enabled: true, contextRate: this.#microphone.contextRate });
    this.linkLevels();
    this.#requestServerVad(true);
  }

  /** The microphone is off (switched off, failed or disconnected): release it, stop server VAD. */
  stop() {
    this.#microphone.stop();
    this.#setButton('off');
    this.onsetT = null;
    Object.assign(this.#state.mic, {
      enabled: false, vadState: 'idle', levelDb: null, noiseFloorDb: null, onsetDb: null,
      playbackDb: null, contextRate: null,
    });
    this.#meter.setOff();
    if (this.#serverVadAsked) {
      this.#requestServerVad(false);
      this.#client.send({ type: 'input_audio_buffer.clear' });
    }
    this.#setServerVad('off');
  }

  /** A `session.created` / `session.updated` (state.inputRate already updated from it). */
  onSession(event) {
    this.#microphone.setRate(this.#state.inputRate ?? DEFAULT_INPUT_RATE);
    if (event.type === 'session.created' && this.enabled) this.#requestServerVad(true);
    const detection = event.session?.audio?.input?.turn_detection;
    if (event.type === 'session.updated' && detection && this.enabled) {
      this.#state.mic.turnDetection = detection.type;
      this.#setServerVad('on');
    }
  }

  /**
   * The page's "End of turn" choice changed: while the microphone is on, ask the server for the
   * new `turn_detection` at once (the next turn ends the new way); otherwise it is asked for
   * when the microphone is switched on.
   */
  turnDetectionChanged() {
    if (this.#serverVadAsked) this.#requestServerVad(true);
  }

  /** Server turn detection is asked for or on (microphone audio is then sent). */
  get #serverVadAsked() {
    return this.#state.mic.serverVad === 'pending' || this.#state.mic.serverVad === 'on';
  }

  /**
   * A server `input_audio_buffer.speech_started`: the server's VAD took the latest speech for
   * the person (the page's VAD then keeps it out of the room's background, room-background.js).
   */
  onSpeechStarted() {
    this.#microphone.tellVad({ type: 'speech-started' });
  }

  /** A server `error`: one naming our server VAD request means this server has none. */
  onError(error) {
    if (this.#requestId === null || error.event_id !== this.#requestId) return;
    this.#requestId = null;
    this.#setServerVad('unsupported');
  }

  /** Connect the playback worklet's output level to the capture worklet (the echo guard). */
  linkLevels() {
    if (!this.enabled) return;
    const channel = new MessageChannel();
    this.#playback.linkLevelPort(channel.port1);
    this.#microphone.linkPlaybackLevel(channel.port2);
  }

  /** `vadConfig()` over the defaults; a value that is not a finite number is ignored. */
  #config() {
    const edited = this.#vadConfig() ?? {};
    const config = { ...DEFAULT_VAD_CONFIG };
    for (const key of Object.keys(config)) {
      if (Number.isFinite(edited[key])) config[key] = edited[key];
    }
    return config;
  }

  /** Ask the server to detect turns in the microphone audio (or to stop doing so). */
  #requestServerVad(on) {
    const detection = on ? { ...this.#turnDetection() } : null;
    const sent = this.#client.send({
      type: 'session.update',
      session: { type: 'realtime', audio: { input: { turn_detection: detection } } },
    });
    this.#requestId = on ? (sent?.event_id ?? null) : null;
    if (on && sent) this.#setServerVad('pending');
  }

  #setServerVad(mode) {
    this.#state.mic.serverVad = mode;
    if (mode !== 'on') this.#state.mic.turnDetection = null;
    this.#microphone.tellVad({ type: 'server-vad', on: mode === 'on' });
    const note = mode === 'on' ? this.#state.mic.turnDetection : mode;
    this.#meter.setNote(SERVER_VAD_NOTES[note] ?? '', mode === 'unsupported' ? 'warn' : '');
  }

  #sendAudio(pcm) {
    if (!this.#serverVadAsked) return;
    const event = { type: 'input_audio_buffer.append', audio: encodeBase64(pcm) };
    if (this.#client.send(event)) this.#state.mic.framesSent += 1;
  }

  #onVad({ event, t, onsetT, playing, likeness, unexplained, echoLagMs }) {
    const { vadEvents, mic } = this.#state;
    vadEvents.push({ type: event, t, onsetT, playing, likeness, unexplained, echoLagMs });
    if (vadEvents.length > VAD_EVENTS_KEPT) vadEvents.shift();
    mic.vadState = {
      onset: 'speech', echo: 'echo', room: 'room', fired: 'fired', released: 'idle',
    }[event];
    this.onsetT = event === 'released' ? null : onsetT;
    if (event === 'fired') this.#meter.markFired(t);
  }

  #onLevel(level) {
    Object.assign(this.#state.mic, {
      vadState: level.state,
      levelDb: level.levelDb,
      noiseFloorDb: level.noiseFloorDb,
      onsetDb: level.onsetDb,
      playbackDb: level.playbackDb,
    });
    this.#meter.update(level);
  }

  /** @param {'off'|'starting'|'on'} mode */
  #setButton(mode) {
    this.#button.dataset.state = mode;
    this.#button.setAttribute('aria-pressed', String(mode !== 'off'));
    this.#button.setAttribute('aria-busy', String(mode === 'starting'));
  }

  #showError(message) {
    this.#state.mic.error = message;
    this.#error.textContent = message ?? '';
    this.#error.hidden = message === null;
  }
}
