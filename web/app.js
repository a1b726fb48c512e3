/**
 * Entry point of the duplex voice demo page: wires the realtime socket, the audio playback with
 * its ACKs, barge-in (Stop button / Space / client VAD), the microphone with server VAD turns,
 * the live transcript and the history panel.
 *
 * Test hooks: `window.duplexDemo.state` (see `state` below), `window.duplexDemo.vadConfig` (the
 * client VAD parameters, read when the microphone is switched on; see vad.js),
 * `window.duplexDemo.serverVad` and `window.duplexDemo.semanticVad` (the `server_vad` and
 * `semantic_vad` settings asked for when it is switched on, as the "End of turn" choice
 * `[data-testid=turn-end]` says; see mic-control.js) and `data-testid` attributes.
 */
import { BargeInTimings } from './barge-in-timings.js';
import { ConversationView } from './conversation-view.js';
import { HistoryView } from './history-view.js';
import { LevelMeter } from './level-meter.js';
import { MicControl, SEMANTIC_VAD, SERVER_VAD } from './mic-control.js';
import { Playback } from './playback.js';
import { RealtimeClient } from './realtime-client.js';
import { StatusView } from './status-view.js';
import { DEFAULT_VAD_CONFIG } from './vad.js';

/** Audio rate (Hz) assumed when `session.created` names none: the OpenAI default. */
const DEFAULT_RATE = 24000;

const byId = (id) => document.getElementById(id);
const promptInput = byId('prompt');
const stopButton = byId('stop');
const reconnectButton = byId('reconnect');
const turnEndChoice = byId('turn-end');

const status = new StatusView({
  connection: byId('status-connection'),
  response: byId('status-response'),
  latency: byId('status-latency'),
  log: byId('log'),
});
const conversation = new ConversationView(byId('conversation'));
const historyPanel = new HistoryView(byId('history'));
const levelMeter = new LevelMeter(byId('level-meter'));

/** responseId -> id of its assistant item (from `response.output_item.added`) */
const itemOfResponse = new Map();
/** responses whose transcript still needs animation frames */
const animated = new Set();
const timings = new BargeInTimings(renderTiming);

const state = {
  connected: false, // a session is established (`session.created` received, socket open)
  sessionRate: null, // output rate in Hz
  currentResponseId: null, // the newest response (kept after it finished)
  responseState: 'idle', // 'idle' | 'speaking' | 'stopped', for the current response
  lastBargeInLatencyMs: null, // Stop gesture or speech onset -> local silence (latest)
  acks: [], // sent playback.ack payloads {response_id, item_id?, played_ms}
  bargeIns: [], // sent barge_in events
  heard: {}, // item_id -> latest conversation.item.heard event
  items: [], // conversation items in order: {id, role, responseId}
  lastError: null, // latest error ({type, code, message, event_id} from the server)
  renderedMs: (responseId) => playback.renderedMs(responseId),
  inputRate: null, // the session's input audio rate in Hz (microphone audio is sent at it)
  mic: {
    enabled: false,
    error: null, // message shown in [data-testid=mic-error], or null
    vadState: 'idle', // client VAD: 'idle' | 'speech' | 'echo' | 'room' | 'fired'
    levelDb: null, // loudest 10 ms frame of the latest 50 ms report, dBFS
    noiseFloorDb: null, // dBFS
    onsetDb: null, // current onset threshold, dBFS
    playbackDb: null, // the assistant's output level as the echo guard sees it, dBFS
    serverVad: 'off', // server turn detection: 'off' | 'pending' | 'on' | 'unsupported'
    //                   (audio sent if pending/on)
    turnDetection: null, // while serverVad is 'on': 'server_vad' | 'semantic_vad'
    framesSent: 0, // input_audio_buffer.append events sent (40 ms each)
    contextRate: null, // capture AudioContext rate in Hz (resampled to inputRate in the worklet)
  },
  vadEvents: [], // {type: 'onset'|'echo'|'room'|'fired'|'released', t: performance.now(),
  //                  onsetT (where the candidate starts, performance.now(); null once
  //                  released), playing, likeness, unexplained, echoLagMs}: client VAD
  //                  transitions (vad.js)
  bargeInTimings: timings.list, // per interruption, see barge-in-timings.js
  userTranscripts: [], // {item_id, transcript} from input_audio_transcription.completed
  speechStarted: [], // input_audio_buffer.speech_started events
  pauses: [], // response.paused and response.resumed events, in order
  backchannels: [], // input_audio_buffer.backchannel events
  resumed: [], // session.resumed events (a session given back after a dropped connection)
  reconnects: [], // {detail, retryMs}: automatic reconnects scheduled after a drop
};
window.duplexDemo = {
  state,
  vadConfig: { ...DEFAULT_VAD_CONFIG },
  serverVad: { ...SERVER_VAD },
  semanticVad: { ...SEMANTIC_VAD },
};

const playback = new Playback({
  onAck(ack) {
    if (client.send({ type: 'playback.ack', ...ack })) state.acks.push(ack);
  },
  onFinished({ responseId, reason, playedMs, silentAt }) {
    if (reason !== 'drained') conversation.markStopped(responseId, playedMs);
    // The client VAD fired and the playback worklet stopped the reply at once (a reply not
    // rendered yet is the server's to stop: its VAD heard the same speech).
    if (reason === 'barge-in') sendBargeIn(responseId, playedMs, 'vad', mic.onsetT, silentAt);
  },
  onChange: renderStatus,
  onPaused({ responseId, reason, playedMs, silentAt }) {
    // The client VAD paused the reply in the worklet, or fired on the person over a reply the
    // server's VAD had paused first (silentAt: that pause's time): the server decides what it was.
    if (reason === 'barge-in') sendBargeIn(responseId, playedMs, 'vad', mic.onsetT, silentAt, true);
  },
});

const client = new RealtimeClient(
  `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/realtime`,
  {
    onEvent: (event) => handlers[event.type]?.(event),
    onState: onSocketState,
    onProtocolError: (message) => reportError({ type: 'client_error', message }),
  },
);

const mic = new MicControl({
  button: byId('mic'),
  error: byId('mic-error'),
  meter: levelMeter,
  client,
  playback,
  state,
  vadConfig: () => window.duplexDemo.vadConfig,
  turnDetection: () => (turnEndChoice.value === 'semantic_vad'
    ? window.duplexDemo.semanticVad : window.duplexDemo.serverVad),
});
turnEndChoice.addEventListener('change', () => mic.turnDetectionChanged());

/** Server event handlers by `type`; events not listed are ignored. */
const handlers = {
  'session.created': onSession,
  'session.updated': onSession,
  'session.resumed': onResumed,
  'conversation.item.added': onItem,
  'conversation.item.created': onItem,
  'conversation.item.done': onItem,
  'conversation.item.deleted': onItemDeleted,
  'conversation.item.input_audio_transcription.completed': onTranscript,
  'conversation.item.truncated': (event) => timings.serverStopped(responseOfItem(event.item_id)),
  'input_audio_buffer.speech_started': (event) => {
    state.speechStarted.push(event);
    levelMeter.markServerSpeech(event);
    mic.onSpeechStarted();
  },
  'input_audio_buffer.speech_stopped': (event) => {
    status.log('info', `Server VAD: speech ended at ${event.audio_end_ms} ms of input`);
  },
  'response.created': onResponseCreated,
  'response.paused': (event) => {
    state.pauses.push(event);
    playback.pauseReply(event.response_id);
    conversation.markPaused(event.response_id, event.audio_end_ms);
    status.log('info', `Paused at ${event.audio_end_ms} ms (${event.reason}): listening`);
  },
  'response.resumed': (event) => {
    state.pauses.push(event);
    playback.resumeReply(event.response_id);
    conversation.markResumed(event.response_id, event.reason);
    status.log('info', `Resumed (${event.reason}) after ${event.paused_ms} ms`);
  },
  'input_audio_buffer.backchannel': (event) => {
    state.backchannels.push(event);
    conversation.addBackchannel(event.item_id, event.transcript);
  },
  'response.output_item.added': onOutputItem,
  'response.output_audio_transcript.delta': (event) => {
    conversation.transcript(event.response_id)?.appendText(event.delta);
    historyPanel.appendText(itemIdOf(event), event.delta);
    animated.add(event.response_id);
  },
  'response.output_audio_transcript.done': (event) => {
    if (typeof event.transcript !== 'string') return;
    conversation.transcript(event.response_id)?.setText(event.transcript);
    historyPanel.setText(itemIdOf(event), event.transcript);
    animated.add(event.response_id);
  },
  'response.output_audio.delta': (event) => {
    if (event.marks?.length) {
      conversation.transcript(event.response_id)?.addMarks(event.marks);
      animated.add(event.response_id);
    }
    playback.enqueue(event.response_id, event.delta, event.audio_end_ms);
  },
  'response.output_audio.done': (event) => playback.endAudio(event.response_id),
  'response.done': onResponseDone,
  // The server dropped this response's unsent audio: stop it here too (a late clear for an
  // older response is a no-op because only the active response can be stopped).
  'output_audio_buffer.cleared': (event) => stopForServer(event.response_id),
  'playback.acknowledged': (event) => {
    if (event.cursor) historyPanel.setCursor(itemIdOf(event), event.cursor);
  },
  'conversation.item.heard': (event) => {
    state.heard[event.item_id] = event;
    historyPanel.setHeard(event);
    if (Number.isFinite(event.elapsed_ms)) timings.calibrated(event.response_id, event.elapsed_ms);
  },
  error: onError,
};

function onSocketState(socketState, detail, retryMs = null) {
  reconnectButton.hidden = socketState !== 'closed';
  if (socketState !== 'closed') {
    status.setConnection('connecting');
    return;
  }
  state.connected = false;
  playback.reset();
  status.setConnection('disconnected');
  if (retryMs === null) {
    status.log('error', `Disconnected (${detail})`);
    return;
  }
  state.reconnects.push({ detail, retryMs });
  status.log('error', `Disconnected (${detail}); reconnecting in ${(retryMs / 1000).toFixed(1)} s`);
}

function onSession(event) {
  const { input, output } = event.session?.audio ?? {};
  const rate = output?.format?.rate ?? state.sessionRate ?? DEFAULT_RATE;
  state.inputRate = input?.format?.rate ?? state.inputRate ?? DEFAULT_RATE;
  if (event.type === 'session.created') {
    resetSession();
    // The token that gives this session back after a drop or a reload (single-use: each
    // session.created brings the next one).
    client.resumeToken = event.session?.resume?.token ?? null;
    status.log('info', `Session ${event.session?.id ?? ''} started, audio at ${rate} Hz`);
    // Opt in to the extension events (heard text, ACK replies, pauses, backchannels), the
    // interim heard texts too: the history view shows each calibration and its evidence.
    // Server VAD (on by default) waits for the microphone: `mic` asks for it when it is on.
    // A resumed session kept its settings (opted in already): they are not sent again.
    if (!event.session?.extensions?.enabled) {
      client.send({ type: 'session.update', session: {
        type: 'realtime', extensions: { enabled: true, interim_heard: true },
        audio: { input: { turn_detection: null } } } });
    }
  }
  state.sessionRate = rate;
  state.connected = true;
  status.setConnection('connected');
  // A new audio context needs the microphone's echo guard linked to it again.
  // The client VAD pauses a reply when the server decides what the speech was (its VAD hears
  // the same audio); without server VAD it stops it.
  const session = event.session ?? {};
  playback.setPauseOnBargeIn(session.interruption?.mode === 'pause' && Boolean(input?.turn_detection));
  playback.configure(rate).then(() => mic.linkLevels(), (error) => {
    reportError({ type: 'client_error', message: `audio output unavailable: ${error.message}` });
  });
  mic.onSession(event);
}

/** A new session starts with an empty conversation. */
function resetSession() {
  playback.reset();
  conversation.clear();
  historyPanel.clear();
  itemOfResponse.clear();
  animated.clear();
  timings.clear();
  Object.assign(state, {
    currentResponseId: null,
    acks: [],
    bargeIns: [],
    heard: {},
    items: [],
    userTranscripts: [],
    speechStarted: [],
    pauses: [],
    backchannels: [],
  });
  renderStatus();
}

/**
 * The server gave this tab's session back after a dropped connection or a reload: show the
 * history it kept, as heard (the reply the drop cut ends where the last ACK put it, the rest
 * struck through), in place of whatever the page showed (`session.created` cleared it).
 */
function onResumed(event) {
  state.resumed.push(event);
  const heardOf = new Map((event.heard ?? []).map((heard) => [heard.item_id, heard]));
  for (const item of event.items ?? []) {
    if (!item?.id || (item.role !== 'user' && item.role !== 'assistant')) continue;
    const heard = heardOf.get(item.id);
    addItem(item.id, item.role, heard?.response_id ?? null);
    if (item.role === 'user') {
      const part = item.content?.[0] ?? {};
      if (part.type === 'input_audio') {
        addSpokenTurn(item.id);
        setUserTranscript(item.id, part.transcript ?? '');
      } else {
        conversation.addUser(part.text ?? '');
        historyPanel.addItem(item.id, 'user', part.text ?? '');
      }
      continue;
    }
    historyPanel.addItem(item.id, 'assistant');
    if (!heard) continue;
    itemOfResponse.set(heard.response_id, item.id);
    state.heard[item.id] = heard;
    historyPanel.setHeard(heard);
    conversation.addAssistant(heard.response_id).setText(heard.text);
    if (heard.interrupted) conversation.markStopped(heard.response_id, heard.played_ms);
  }
  const seconds = ((event.parked_ms ?? 0) / 1000).toFixed(1);
  status.log('info', `Resumed session ${event.session_id} after ${seconds} s: `
    + `${state.items.length} items kept, as heard`);
}

function onItem(event) {
  const { item } = event;
  if (!item?.id || (item.role !== 'user' && item.role !== 'assistant')) return;
  addItem(item.id, item.role, null);
  const speech = item.content?.find((part) => part.type === 'input_audio');
  if (item.role === 'user' && speech) {
    // A spoken turn: shown as pending until its transcript arrives (an empty one never shows).
    addSpokenTurn(item.id);
    if (speech.transcript?.trim()) setUserTranscript(item.id, speech.transcript);
    return;
  }
  const text = item.content?.find((part) => part.type === 'input_text')?.text;
  historyPanel.addItem(item.id, item.role, text);
}

function onItemDeleted(event) {
  state.items = state.items.filter((item) => item.id !== event.item_id);
  delete state.heard[event.item_id];
  historyPanel.remove(event.item_id);
  conversation.removeUser(event.item_id);
}

function onTranscript(event) {
  const transcript = typeof event.transcript === 'string' ? event.transcript : '';
  state.userTranscripts.push({ item_id: event.item_id, transcript });
  if (!state.items.some((item) => item.id === event.item_id)) return;
  setUserTranscript(event.item_id, transcript);
}

function addSpokenTurn(itemId) {
  conversation.addUserSpeech(itemId);
  historyPanel.addSpokenItem(itemId);
}

function setUserTranscript(itemId, transcript) {
  conversation.setUserTranscript(itemId, transcript);
  historyPanel.setUserText(itemId, transcript);
}

function onResponseCreated(event) {
  const responseId = event.response?.id;
  if (!responseId) return;
  state.currentResponseId = responseId;
  conversation.addAssistant(responseId);
  animated.add(responseId);
  playback.begin(responseId);
}

/** The assistant item of a response: its id is the one every later event and ACK must use. */
function onOutputItem(event) {
  const { item, response_id: responseId } = event;
  if (!item?.id) return;
  itemOfResponse.set(responseId, item.id);
  playback.setItem(responseId, item.id);
  addItem(item.id, 'assistant', responseId);
  historyPanel.addItem(item.id, 'assistant');
  const timing = timings.find(responseId);
  if (timing) renderTiming(timing);
}

function onResponseDone(event) {
  const { id, status: outcome } = event.response ?? {};
  // A cancelled response stops playing at once (server VAD or a cancel); otherwise what is
  // queued plays out. A failed one was reported by its `error` event (generation_failed).
  if (outcome === 'cancelled') {
    timings.serverStopped(id);
    stopForServer(id);
  } else {
    playback.endAudio(id);
  }
}

function addItem(id, role, responseId) {
  const known = state.items.find((item) => item.id === id);
  if (!known) state.items.push({ id, role, responseId });
  else if (responseId) known.responseId = responseId;
}

function itemIdOf(event) {
  return event.item_id ?? itemOfResponse.get(event.response_id);
}

function responseOfItem(itemId) {
  return state.items.find((item) => item.id === itemId)?.responseId ?? null;
}

function onError(event) {
  const error = event.error ?? { type: 'error', message: 'unspecified error' };
  mic.onError(error);
  reportError(error);
}

function reportError(error) {
  state.lastError = error;
  const code = error.code ?? error.type ?? 'error';
  const origin = error.event_id ? ` (event ${error.event_id})` : '';
  status.log('error', `${code}: ${error.message ?? ''}${origin}`);
}

function renderStatus() {
  const phase = playback.phase(state.currentResponseId);
  state.responseState = phase === 'waiting' ? 'speaking' : phase;
  status.setResponse(phase);
  stopButton.dataset.active = String(playback.isActive(state.currentResponseId));
}

/**
 * Stop the current response for the Stop button (or a typed prompt) and tell the server how much
 * was heard; `startedAt` is the performance.now() of the gesture. Does nothing when nothing
 * plays.
 */
async function bargeIn(startedAt) {
  const responseId = state.currentResponseId;
  const stopping = playback.stop(responseId);
  if (!stopping) return;
  const { reason, playedMs, silentAt } = await stopping;
  // The client VAD may have stopped it first: that barge-in was sent (playback onFinished).
  if (reason === 'stop') sendBargeIn(responseId, playedMs, 'button', startedAt, silentAt);
}

/**
 * Send `barge_in` for `responseId`, silenced here by `source` ('button' | 'vad') after
 * `playedMs` heard, and add its entry to `state.bargeInTimings`: from `startedAt` (the gesture,
 * or the first frame the VAD counted as speech) to `silentAt` (the playback worklet stopped
 * rendering), performance.now() times, null when unknown; then the server's stop and
 * calibration times as they arrive. With `pause`, the reply was paused, not stopped: the server
 * decides (`response.resumed`, or a cut).
 */
function sendBargeIn(responseId, playedMs, source, startedAt, silentAt, pause = false) {
  const known = startedAt !== null && silentAt !== null;
  const timing = addTiming(responseId, source, known ? Math.max(0, silentAt - startedAt) : null);
  const itemId = itemOfResponse.get(responseId);
  const event = {
    type: 'barge_in',
    response_id: responseId,
    ...(itemId ? { item_id: itemId } : {}),
    audio_end_ms: playedMs,
    source,
    ...(pause ? { pause: true } : {}),
  };
  if (!client.send(event)) return;
  state.bargeIns.push(event);
  timings.sent(timing);
}

/** The server stopped `responseId` (playing here or not): it may have been asked to. */
function stopForServer(responseId) {
  const stopping = playback.stop(responseId);
  if (!stopping || !mic.enabled) return;
  // A reply this page paused by its own barge-in was timed then: the server's cut ends it.
  if (state.bargeIns.some((event) => event.response_id === responseId)) return;
  // With the microphone on, the server stops a playing reply when its VAD heard speech.
  const { onsetT } = mic;
  stopping.then(({ silentAt }) => {
    const known = onsetT !== null && silentAt !== null; // silentAt is null when it played out
    addTiming(responseId, 'server_vad', known ? Math.max(0, silentAt - onsetT) : null);
  });
}

/** Record an interruption of `responseId` that took `onsetToSilenceMs` (null: unknown). */
function addTiming(responseId, source, onsetToSilenceMs) {
  if (onsetToSilenceMs !== null) {
    state.lastBargeInLatencyMs = onsetToSilenceMs;
    status.setBargeInLatency(onsetToSilenceMs, source === 'button' ? 'button' : 'vad');
  }
  return timings.add(responseId, itemOfResponse.get(responseId) ?? null, source, onsetToSilenceMs);
}

function renderTiming(timing) {
  const itemId = itemOfResponse.get(timing.responseId);
  if (!itemId) return;
  timing.itemId = itemId;
  historyPanel.setTiming(itemId, timing);
}

/** Send the typed prompt; a reply still playing is barged in on first. */
async function sendPrompt() {
  const text = promptInput.value;
  if (!text.trim() || !state.connected) return;
  promptInput.value = '';
  if (playback.isActive(state.currentResponseId)) await bargeIn(performance.now());
  conversation.addUser(text);
  client.send({
    type: 'conversation.item.create',
    item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
  });
  client.send({ type: 'response.create' });
}

/** Whether a key event goes to a text field (where Space must type a space). */
function isTyping(target) {
  return target instanceof HTMLElement && target.matches('input, textarea, [contenteditable]');
}

function animate() {
  for (const responseId of animated) {
    const phase = playback.phase(responseId);
    conversation.transcript(responseId)?.render(playback.playedMs(responseId), phase !== 'stopped');
    if (phase === 'idle' || phase === 'stopped') animated.delete(responseId);
  }
  requestAnimationFrame(animate);
}

byId('composer').addEventListener('submit', (event) => {
  event.preventDefault();
  sendPrompt();
});
stopButton.addEventListener('click', () => bargeIn(performance.now()));
reconnectButton.addEventListener('click', () => client.connect());
document.addEventListener('keydown', (event) => {
  if (event.code !== 'Space' || isTyping(event.target)) return;
  // Also keeps a focused button from being activated by this Space press.
  event.preventDefault();
  if (!event.repeat) bargeIn(performance.now());
});
document.addEventListener('keyup', (event) => {
  if (event.code === 'Space' && !isTyping(event.target)) event.preventDefault();
});
// Autoplay policy: (re)start audio output on any user gesture.
for (const type of ['pointerdown', 'keydown']) {
  document.addEventListener(type, () => playback.resume(), { capture: true });
}

renderStatus();
requestAnimationFrame(animate);
client.connect();
