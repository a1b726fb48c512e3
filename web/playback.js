import { performanceTimeOf } from './audio-clock.js';
import { decodePcm16 } from './pcm16.js';

/** Periodic ACK interval while a response plays (the protocol asks for every ~100-250 ms). */
const ACK_INTERVAL_MS = 150;
const WORKLET_URL = new URL('./playback-worklet.js', import.meta.url);

/**
 * Plays the assistant's audio, one response at a time, through the "playback-processor"
 * AudioWorklet and reports with playback ACKs what the listener actually heard.
 *
 * Heard position of a response, in ms from its first sample:
 * - while it plays and when it is stopped (Stop, server cancel, superseded by a newer response):
 *   round(renderedFrames / rate * 1000 - outputLatency * 1000), clamped to [0, audio_end_ms];
 * - when it drained (all its audio rendered): all of it, reported once the output latency has
 *   passed, so that a fully played reply can enter the history in full.
 *
 * Each response goes through the phases
 *   'active' -> 'stopping' (stop requested) or 'draining' (all rendered) -> 'done'.
 * An active response may be paused (`pauseReply`, or the client VAD in pause mode) and resumed
 * (`resumeReply`): its queued audio is kept and rendering continues exactly where it stopped.
 * Only the newest response is ever active; audio of any other response is dropped.
 */
export class Playback {
  #context = null;
  #node = null;
  /** [message, transfer] posted before the worklet node exists; flushed in order once it does. */
  #pending = [];
  /** responseId -> track (see #newTrack) */
  #tracks = new Map();
  #currentId = null;
  #ackTimer = null;

  /**
   * @param {object} callbacks
   * @param {(ack: {response_id: string, item_id?: string, played_ms: number}) => void} callbacks.onAck
   *   an ACK to send: periodic ones only when the position grew, plus one final per response
   * @param {(result: {responseId: string, reason: 'stop'|'superseded'|'barge-in'|'drained',
   *   playedMs: number, silentAt: number|null}) => void} callbacks.onFinished a response
   *   stopped or played out; 'barge-in': the client VAD stopped it in the worklet (see
   *   playback-worklet.js); silentAt: performance.now() time at which the worklet stopped
   *   rendering it (null when it drained)
   * @param {() => void} callbacks.onChange a response started, stalled, resumed or finished
   * @param {(result: {responseId: string, reason: 'pause'|'barge-in', playedMs: number,
   *   silentAt: number|null}) => void} [callbacks.onPaused] a response paused ('barge-in': the
   *   client VAD paused it in the worklet, or fired over a reply the server paused first, once
   *   per pause); playedMs: all rendered audio (it is heard); silentAt: performance.now() time
   *   at which the worklet paused rendering it
   */
  constructor({ onAck, onFinished, onChange, onPaused = () => {} }) {
    this.onAck = onAck;
    this.onFinished = onFinished;
    this.onChange = onChange;
    this.onPaused = onPaused;
  }

  /** Whether the client VAD pauses the playing reply (true) or stops it (false). */
  setPauseOnBargeIn(pause) {
    this.#post({ type: 'barge-in-mode', pause });
  }

  /** Pause `responseId` if it is active, keeping its queued audio (`response.paused`). */
  pauseReply(responseId) {
    if (this.#tracks.get(responseId)?.phase === 'active') {
      this.#post({ type: 'pause', responseId });
    }
  }

  /** Continue `responseId` where it paused (`response.resumed`). */
  resumeReply(responseId) {
    if (this.#tracks.get(responseId)?.phase === 'active') {
      this.#post({ type: 'resume', responseId });
    }
  }

  /** Output sample rate in Hz, or null before `configure`. */
  get rate() {
    return this.#context?.sampleRate ?? null;
  }

  /**
   * Create the AudioContext at the session's output rate (Hz) and load the worklet. A context at
   * another rate is closed first (dropping what it played). Rejects when the browser refuses the
   * rate or the module.
   */
  async configure(rate) {
    if (this.#context?.sampleRate === rate) return;
    this.reset();
    const previous = this.#context;
    const context = new AudioContext({ sampleRate: rate, latencyHint: 'interactive' });
    this.#context = context;
    this.#node = null;
    await previous?.close();
    await context.audioWorklet.addModule(WORKLET_URL);
    if (this.#context !== context) return;
    const node = new AudioWorkletNode(context, 'playback-processor', {
      numberOfInputs: 0,
      numberOfOutputs: 1,
      outputChannelCount: [1],
    });
    node.port.onmessage = (event) => this.#onWorkletMessage(event.data);
    node.connect(context.destination);
    this.#node = node;
    for (const [message, transfer] of this.#pending.splice(0)) {
      node.port.postMessage(message, transfer);
    }
  }

  /**
   * Hand the worklet one end of a MessageChannel on which it reports its output level every
   * ~20 ms ({type: 'level', db, active}: dBFS, assistant audio rendered): the echo reference of
   * the client VAD. Lost when `configure` creates a new context: link again after it.
   */
  linkLevelPort(port) {
    this.#post({ type: 'level-port', port }, [port]);
  }

  /** Resume a context the autoplay policy suspended; call from user gestures. */
  resume() {
    if (this.#context?.state === 'suspended') this.#context.resume();
  }

  /** Make `responseId` the current response; a still-active older one is stopped (superseded). */
  begin(responseId) {
    if (this.#tracks.has(responseId)) return;
    const previous = this.#tracks.get(this.#currentId);
    if (previous?.phase === 'active') previous.phase = 'stopping';
    this.#tracks.set(responseId, this.#newTrack(responseId));
    this.#currentId = responseId;
    this.#post({ type: 'start', responseId });
    this.#ackTimer ??= setInterval(() => this.#tick(), ACK_INTERVAL_MS);
    this.onChange();
  }

  /** Remember the item id of a response (sent with its ACKs). */
  setItem(responseId, itemId) {
    const track = this.#tracks.get(responseId);
    if (track) track.itemId = itemId;
  }

  /**
   * Queue one `response.output_audio.delta`. Audio of a response that is not active (stopped,
   * superseded, unknown) is dropped. `audioEndMs` is the delta's cumulative `audio_end_ms`.
   */
  enqueue(responseId, base64, audioEndMs) {
    const track = this.#tracks.get(responseId);
    if (track?.phase !== 'active') return;
    if (Number.isFinite(audioEndMs)) track.audioEndMs = audioEndMs;
    const samples = decodePcm16(base64);
    this.#post({ type: 'audio', responseId, samples }, [samples.buffer]);
  }

  /** No more audio will come for `responseId`: play out what is queued. */
  endAudio(responseId) {
    if (this.#tracks.get(responseId)?.phase === 'active') {
      this.#post({ type: 'end', responseId });
    }
  }

  /**
   * Stop `responseId` at once if it is active. Resolves with its final result (as given to
   * onFinished; the final ACK has been handed to onAck by then); returns null when it was not
   * active.
   */
  stop(responseId) {
    const track = this.#tracks.get(responseId);
    if (track?.phase !== 'active') return null;
    track.phase = 'stopping';
    this.#post({ type: 'stop', responseId });
    return track.finished;
  }

  isActive(responseId) {
    return this.#tracks.get(responseId)?.phase === 'active';
  }

  /** 'waiting' | 'speaking' | 'paused' | 'stopped' | 'idle' (idle: unknown or played out). */
  phase(responseId) {
    const track = this.#tracks.get(responseId);
    if (!track) return 'idle';
    if (track.phase === 'done') return track.reason === 'drained' ? 'idle' : 'stopped';
    if (track.phase === 'active' && track.paused) return 'paused';
    if (track.phase === 'active' && track.starved) return 'waiting';
    return 'speaking';
  }

  /** Heard position in ms: live while playing, the final value once finished. */
  playedMs(responseId) {
    const track = this.#tracks.get(responseId);
    if (!track) return 0;
    return track.finalMs ?? this.#liveMs(track);
  }

  /** Audio actually rendered for `responseId`, in ms (no latency correction). */
  renderedMs(responseId) {
    const track = this.#tracks.get(responseId);
    return track && this.rate ? (track.frames / this.rate) * 1000 : 0;
  }

  /** Forget every response without final ACKs (the session they belonged to is gone). */
  reset() {
    for (const track of this.#tracks.values()) track.phase = 'done';
    this.#tracks.clear();
    this.#pending.length = 0;
    if (this.#currentId !== null) this.#post({ type: 'stop', responseId: this.#currentId });
    this.#currentId = null;
    this.onChange();
  }

  #newTrack(id) {
    let resolve;
    const finished = new Promise((done) => {
      resolve = done;
    });
    return {
      id,
      itemId: null,
      phase: 'active',
      frames: 0,
      starved: true, // nothing rendered yet or the queue ran empty
      audioEndMs: null,
      paused: false,
      lastAckMs: 0,
      finalMs: null,
      reason: null,
      finished,
      resolve,
    };
  }

  #post(message, transfer = []) {
    if (this.#node) this.#node.port.postMessage(message, transfer);
    else this.#pending.push([message, transfer]);
  }

  #latencyMs() {
    return (this.#context?.outputLatency || 0) * 1000;
  }

  #liveMs(track) {
    const ms = Math.round((track.frames / this.rate) * 1000 - this.#latencyMs());
    return Math.min(Math.max(ms, 0), track.audioEndMs ?? Infinity);
  }

  #onWorkletMessage(message) {
    const track = this.#tracks.get(message.responseId);
    if (!track || track.phase === 'done' || track.phase === 'draining') return;
    track.frames = message.renderedFrames;
    if (message.type === 'progress') {
      const starved = !message.rendering || message.queueEmpty;
      if (starved !== track.starved) {
        track.starved = starved;
        this.onChange();
      }
    } else if (message.type === 'paused') {
      track.paused = true;
      // Every rendered frame is heard: the output pipeline plays it out after the pause.
      // Rounded down: the cut never claims part of a millisecond that was not rendered.
      const playedMs = Math.min(Math.floor((track.frames / this.rate) * 1000),
        track.audioEndMs ?? Infinity);
      if (playedMs > track.lastAckMs) this.#ack(track, playedMs);
      const silentAt = performanceTimeOf(this.#context, message.at);
      this.onPaused({ responseId: track.id, reason: message.reason, playedMs, silentAt });
      this.onChange();
    } else if (message.type === 'resumed') {
      track.paused = false;
      this.onChange();
    } else if (message.type === 'stopped') {
      const silentAt = performanceTimeOf(this.#context, message.at);
      this.#finish(track, message.reason, this.#liveMs(track), silentAt);
    } else if (message.type === 'drained') {
      track.phase = 'draining';
      // The last rendered frames are still in the output pipeline; they are heard after it.
      const allMs = Math.ceil((track.frames / this.rate) * 1000);
      setTimeout(
        () => this.#finish(track, 'drained', Math.min(allMs, track.audioEndMs ?? Infinity)),
        this.#latencyMs(),
      );
    }
  }

  #finish(track, reason, playedMs, silentAt = null) {
    if (track.phase === 'done') return;
    track.phase = 'done';
    track.reason = reason;
    track.finalMs = Math.max(playedMs, track.lastAckMs);
    if (track.finalMs > 0) this.#ack(track, track.finalMs);
    const result = { responseId: track.id, reason, playedMs: track.finalMs, silentAt };
    track.resolve(result);
    this.onFinished(result);
    this.onChange();
  }

  #tick() {
    const track = this.#tracks.get(this.#currentId);
    if (track?.phase !== 'active') {
      clearInterval(this.#ackTimer);
      this.#ackTimer = null;
      return;
    }
    const ms = this.#liveMs(track);
    if (ms > track.lastAckMs) this.#ack(track, ms);
  }

  #ack(track, playedMs) {
    track.lastAckMs = playedMs;
    this.onAck({
      response_id: track.id,
      ...(track.itemId ? { item_id: track.itemId } : {}),
      played_ms: playedMs,
    });
  }
}
