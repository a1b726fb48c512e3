import { performanceTimeOf } from './audio-clock.js';

const WORKLET_URL = new URL('./capture-worklet.js', import.meta.url);

/** Audio processing asked of the browser: the constraints (echo cancellation matters for
 * barge-in: the assistant's voice must not come back through the microphone). */
const CONSTRAINTS = {
  audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true },
};

/**
 * The microphone: getUserMedia, an AudioContext at the device's own rate and the
 * "capture-processor" worklet (capture-worklet.js), which resamples to the session's input rate,
 * runs the client VAD and hands out PCM16 frames. Failures never throw: `start` resolves with a
 * message for the page, and a device that goes away later is reported through `onEnded`.
 */
export class Microphone {
  #stream = null;
  #context = null;
  #node = null;
  /** bumped by every start/stop, so a start that finishes after a stop cleans up after itself */
  #generation = 0;

  /**
   * @param {object} callbacks
   * @param {(pcm: ArrayBuffer) => void} callbacks.onAudio 40 ms of PCM16 LE mono at the rate
   * @param {(event: {event: 'onset'|'echo'|'room'|'fired'|'released', t: number,
   *   onsetT: number|null, playing: boolean, likeness: number|null,
   *   unexplained: number|null, echoLagMs: number|null}) => void} callbacks.onVad
   *   a VAD transition; t and onsetT are performance.now() times of the frame that caused it
   *   and of the candidate's first frame; likeness is the candidate's echo likeness (vad.js),
   *   unexplained the share of its frames the echo path does not explain (echo-path.js),
   *   echoLagMs the echo path's lag (null: none established)
   * @param {(level: {levelDb: number, noiseFloorDb: number, onsetDb: number, playbackDb: number,
   *   state: 'idle'|'speech'|'echo'|'room'|'fired', playing: boolean}) => void} callbacks.onLevel every 50 ms
   * @param {(message: string) => void} callbacks.onEnded the device stopped delivering audio
   */
  constructor({ onAudio, onVad, onLevel, onEnded }) {
    this.onAudio = onAudio;
    this.onVad = onVad;
    this.onLevel = onLevel;
    this.onEnded = onEnded;
  }

  get enabled() {
    return this.#node !== null;
  }

  /** Sample rate of the capture context in Hz (null when off). */
  get contextRate() {
    return this.#context?.sampleRate ?? null;
  }

  /**
   * Open the microphone and start capturing at `rate` Hz with the VAD parameters `vad`.
   * @returns {Promise<string|null>} null when capturing, else a message saying why not
   */
  async start(rate, vad) {
    this.stop();
    const generation = this.#generation;
    if (!navigator.mediaDevices?.getUserMedia) {
      return 'This page cannot use a microphone here (it needs https or localhost).';
    }
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia(CONSTRAINTS);
    } catch (error) {
      return describeError(error);
    }
    if (generation !== this.#generation) {
      stopTracks(stream);
      return null;
    }
    this.#stream = stream;
    try {
      const context = new AudioContext({ latencyHint: 'interactive' });
      this.#context = context;
      await context.audioWorklet.addModule(WORKLET_URL);
      if (generation !== this.#generation) return null;
      const node = new AudioWorkletNode(context, 'capture-processor', {
        numberOfInputs: 1,
        numberOfOutputs: 0,
        channelCount: 1,
        channelCountMode: 'explicit',
        processorOptions: { targetRate: rate, vad: { ...vad } },
      });
      node.port.onmessage = (event) => this.#onMessage(event.data);
      context.createMediaStreamSource(stream).connect(node);
      await context.resume();
      this.#node = node;
    } catch (error) {
      this.stop();
      return `Microphone audio could not be processed: ${error.message}`;
    }
    for (const track of stream.getAudioTracks()) {
      track.addEventListener('ended', () => {
        if (this.#stream !== stream) return;
        this.stop();
        this.onEnded('The microphone was disconnected.');
      });
    }
    return null;
  }

  /** Stop capturing and release the device (idempotent). */
  stop() {
    this.#generation += 1;
    if (this.#stream) stopTracks(this.#stream);
    this.#stream = null;
    if (this.#node) {
      this.#node.port.onmessage = null; // reports already queued are dropped
      this.#node.disconnect();
    }
    this.#node = null;
    this.#context?.close();
    this.#context = null;
  }

  /** The session's input rate changed (Hz). */
  setRate(rate) {
    this.#node?.port.postMessage({ type: 'rate', targetRate: rate });
  }

  /** Pass `message` to the capture worklet's VAD ({type: 'server-vad', on} or
   * {type: 'speech-started'}: see capture-worklet.js); nothing while no capture runs. */
  tellVad(message) {
    this.#node?.port.postMessage(message);
  }

  /** Hand the worklet the port on which the playback worklet reports its output level. */
  linkPlaybackLevel(port) {
    if (this.#node) this.#node.port.postMessage({ type: 'playback-port', port }, [port]);
  }

  #onMessage(message) {
    if (message.type === 'audio') this.onAudio(message.pcm);
    else if (message.type === 'level') this.onLevel(message);
    else if (message.type === 'vad') {
      this.onVad({
        event: message.event,
        t: performanceTimeOf(this.#context, message.time),
        onsetT: message.onsetTime === null
          ? null
          : performanceTimeOf(this.#context, message.onsetTime),
        playing: message.playing,
        likeness: message.likeness,
        unexplained: message.unexplained,
        echoLagMs: message.echoLagMs,
      });
    }
  }
}

/** A user-facing message for a getUserMedia failure (DOMException names from Media Capture). */
function describeError(error) {
  switch (error?.name) {
    case 'NotAllowedError':
    case 'SecurityError':
      return 'Microphone permission was denied. Allow the microphone for this page and try again.';
    case 'NotFoundError':
    case 'OverconstrainedError':
      return 'No microphone was found. Connect one and try again.';
    case 'NotReadableError':
    case 'AbortError':
      return 'The microphone could not be opened (another application may be using it).';
    default:
      return `The microphone is unavailable: ${error?.message || error}`;
  }
}

function stopTracks(stream) {
  for (const track of stream.getTracks()) track.stop();
}
