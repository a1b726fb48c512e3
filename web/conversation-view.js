import { TranscriptView } from './transcript-view.js';

/** The spoken conversation: user prompts and assistant replies with word highlighting. */
export class ConversationView {
  #list;
  /** responseId -> {item: HTMLLIElement, transcript: TranscriptView, note: HTMLElement} */
  #replies = new Map();
  /** itemId -> {item: HTMLLIElement, body: HTMLParagraphElement} of spoken user turns */
  #spoken = new Map();

  /** @param {HTMLOListElement} list */
  constructor(list) {
    this.#list = list;
  }

  clear() {
    this.#list.replaceChildren();
    this.#replies.clear();
    this.#spoken.clear();
  }

  addUser(text) {
    const body = document.createElement('p');
    body.textContent = text;
    this.#append('user', 'You', body);
  }

  /** Add a spoken user turn (item `itemId`) whose transcript is still coming. */
  addUserSpeech(itemId) {
    if (this.#spoken.has(itemId)) return;
    const body = document.createElement('p');
    body.className = 'pending';
    body.textContent = 'Transcribing…';
    const item = this.#append('user', 'You (spoken)', body);
    item.dataset.itemId = itemId;
    item.dataset.testid = 'user-speech';
    this.#spoken.set(itemId, { item, body });
  }

  /** The transcript of a spoken turn arrived; a turn without words is removed. */
  setUserTranscript(itemId, text) {
    const turn = this.#spoken.get(itemId);
    if (!turn) return;
    if (!text.trim()) {
      this.removeUser(itemId);
      return;
    }
    turn.body.className = '';
    turn.body.textContent = text;
  }

  /** Remove a spoken user turn (the server deleted its item). */
  removeUser(itemId) {
    this.#spoken.get(itemId)?.item.remove();
    this.#spoken.delete(itemId);
  }

  /** Add the reply of `responseId` and return its TranscriptView. */
  addAssistant(responseId) {
    const body = document.createElement('div');
    body.className = 'transcript markdown';
    const note = document.createElement('p');
    note.className = 'turn-note';
    const item = this.#append('assistant', 'Assistant', body, note);
    const transcript = new TranscriptView(body);
    this.#replies.set(responseId, { item, transcript, note });
    return transcript;
  }

  transcript(responseId) {
    return this.#replies.get(responseId)?.transcript ?? null;
  }

  /** Mark a reply whose playback was cut at `playedMs`. */
  markStopped(responseId, playedMs) {
    const reply = this.#replies.get(responseId);
    if (!reply) return;
    reply.item.classList.remove('paused');
    reply.item.classList.add('stopped');
    const cut = reply.item.dataset.pausedAt ? ' (cut where it paused: you interrupted)' : '';
    reply.note.textContent = `Stopped after ${(playedMs / 1000).toFixed(2)} s of audio${cut}`;
  }

  /** Mark a reply paused at `audioEndMs` while the server listens (`response.paused`). */
  markPaused(responseId, audioEndMs) {
    const reply = this.#replies.get(responseId);
    if (!reply) return;
    reply.item.classList.add('paused');
    reply.item.dataset.pausedAt = String(audioEndMs);
    reply.note.textContent = `Paused at ${(audioEndMs / 1000).toFixed(2)} s — listening`;
  }

  /** Mark a paused reply resumed (`response.resumed`, `reason` e.g. 'backchannel'). */
  markResumed(responseId, reason) {
    const reply = this.#replies.get(responseId);
    if (!reply) return;
    reply.item.classList.remove('paused');
    reply.note.textContent = `Resumed (${reason})`;
  }

  /**
   * Show a backchannel ("uh-huh" over a reply): visible, marked as such, never a turn.
   * @param {string} itemId the input turn it came from
   * @param {string} transcript what the ASR heard
   */
  addBackchannel(itemId, transcript) {
    const body = document.createElement('p');
    body.className = 'backchannel';
    body.textContent = `${transcript || '…'} (backchannel: the reply went on)`;
    const item = this.#append('user backchannel', 'You (backchannel)', body);
    item.dataset.itemId = itemId;
    item.dataset.testid = 'backchannel';
  }

  #append(role, label, ...content) {
    const item = document.createElement('li');
    item.className = `turn ${role}`;
    const who = document.createElement('span');
    who.className = 'who';
    who.textContent = label;
    item.append(who, ...content);
    this.#list.append(item);
    item.scrollIntoView({ block: 'nearest' });
    return item;
  }
}
