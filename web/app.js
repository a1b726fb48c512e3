/**
 * Entry point of the duplex voice demo page: wires the realtime socket, the audio playback with
 * its ACKs, barge-in (Stop button / Space), the live transcript and the history panel.
 *
 * Test hooks: `window.duplexDemo.state` (see `state` below) and `data-testid` attributes.
 */
import { ConversationView } from './conversation-view.js';
import { HistoryView } from './history-view.js';
import { Playback } from './playback.js';
import { RealtimeClient } from './realtime-client.js';
import { StatusView } from './status-view.js';

/** Output rate (Hz) assumed when `session.created` names none: the OpenAI default. */
const DEFAULT_RATE = 24000;

const byId = (id) => document.getElementById(id);
const promptInput = byId('prompt');
const stopButton = byId('stop');
const reconnectButton = byId('reconnect');

const status = new StatusView({
  connection: byId('status-connection'),
  response: byId('status-response'),
  latency: byId('status-latency'),
  log: byId('log'),
});
const conversation = new ConversationView(byId('conversation'));
const historyPanel = new HistoryView(byId('history'));

/** responseId -> id of its assistant item (from `response.output_item.added`) */
const itemOfResponse = new Map();
/** responses whose transcript still needs animation frames */
const animated = new Set();

const state = {
  connected: false, // a session is established (`session.created` received, socket open)
  sessionRate: null, // output rate in Hz
  currentResponseId: null, // the newest response (kept after it finished)
  responseState: 'idle', // 'idle' | 'speaking' | 'stopped', for the current response
  lastBargeInLatencyMs: null, // Stop gesture -> local silence
  acks: [], // sent playback.ack payloads {response_id, item_id?, played_ms}
  bargeIns: [], // sent barge_in events
  heard: {}, // item_id -> latest conversation.item.heard event
  items: [], // conversation items in order: {id, role, responseId}
  lastError: null, // latest error ({type, code, message, event_id} from the server)
  renderedMs: (responseId) => playback.renderedMs(responseId),
};
window.duplexDemo = { state };

const playback = new Playback({
  onAck(ack) {
    if (client.send({ type: 'playback.ack', ...ack })) state.acks.push(ack);
  },
  onFinished({ responseId, reason, playedMs }) {
    if (reason !== 'drained') conversation.markStopped(responseId, playedMs);
  },
  onChange: renderStatus,
});

const client = new RealtimeClient(
  `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/realtime`,
  {
    onEvent: (event) => handlers[event.type]?.(event),
    onState: onSocketState,
    onProtocolError: (message) => reportError({ type: 'client_error', message }),
  },
);

/** Server event handlers by `type`; events not listed are ignored. */
const handlers = {
  'session.created': onSession,
  'session.updated': onSession,
  'conversation.item.added': onItem,
  'conversation.item.created': onItem,
  'conversation.item.done': onItem,
  'conversation.item.deleted': onItemDeleted,
  'response.created': onResponseCreated,
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
  'output_audio_buffer.cleared': (event) => playback.stop(event.response_id),
  'playback.acknowledged': (event) => {
    if (event.cursor) historyPanel.setCursor(itemIdOf(event), event.cursor);
  },
  'conversation.item.heard': (event) => {
    state.heard[event.item_id] = event;
    historyPanel.setHeard(event);
  },
  error: (event) => reportError(event.error ?? { type: 'error', message: 'unspecified error' }),
};

function onSocketState(socketState, detail) {
  reconnectButton.hidden = socketState !== 'closed';
  if (socketState !== 'closed') {
    status.setConnection('connecting');
    return;
  }
  state.connected = false;
  playback.reset();
  status.setConnection('disconnected');
  status.log('error', `Disconnected (${detail})`);
}

function onSession(event) {
  const rate = event.session?.audio?.output?.format?.rate ?? state.sessionRate ?? DEFAULT_RATE;
  if (event.type === 'session.created') {
    resetSession();
    status.log('info', `Session ${event.session?.id ?? ''} started, audio at ${rate} Hz`);
  }
  state.sessionRate = rate;
  state.connected = true;
  status.setConnection('connected');
  playback.configure(rate).catch((error) => {
    reportError({ type: 'client_error', message: `audio output unavailable: ${error.message}` });
  });
}

/** A new session starts with an empty conversation. */
function resetSession() {
  playback.reset();
  conversation.clear();
  historyPanel.clear();
  itemOfResponse.clear();
  animated.clear();
  Object.assign(state, {
    currentResponseId: null,
    acks: [],
    bargeIns: [],
    heard: {},
    items: [],
  });
  renderStatus();
}

function onItem(event) {
  const { item } = event;
  if (!item?.id || (item.role !== 'user' && item.role !== 'assistant')) return;
  addItem(item.id, item.role, null);
  const text = item.content?.find((part) => part.type === 'input_text')?.text;
  historyPanel.addItem(item.id, item.role, text);
}

function onItemDeleted(event) {
  state.items = state.items.filter((item) => item.id !== event.item_id);
  delete state.heard[event.item_id];
  historyPanel.remove(event.item_id);
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
}

function onResponseDone(event) {
  const { id, status: outcome, status_details: details } = event.response ?? {};
  // A cancelled response stops playing at once (server VAD or a cancel); otherwise what is
  // queued plays out.
  if (outcome === 'cancelled') playback.stop(id);
  else playback.endAudio(id);
  if (outcome === 'failed') {
    reportError(details?.error ?? { type: 'response_failed', message: `response ${id} failed` });
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
 * Barge in on the current response: silence it locally at once, then tell the server how much
 * was heard. `startedAt` is the gesture's performance.now(). Does nothing when nothing plays.
 */
async function bargeIn(startedAt) {
  const responseId = state.currentResponseId;
  const stopping = playback.stop(responseId);
  if (!stopping) return;
  const { playedMs } = await stopping; // the final ACK has been sent by now
  state.lastBargeInLatencyMs = performance.now() - startedAt;
  status.setBargeInLatency(state.lastBargeInLatencyMs);
  const itemId = itemOfResponse.get(responseId);
  const event = {
    type: 'barge_in',
    response_id: responseId,
    ...(itemId ? { item_id: itemId } : {}),
    audio_end_ms: playedMs,
    source: 'button',
  };
  if (client.send(event)) state.bargeIns.push(event);
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
