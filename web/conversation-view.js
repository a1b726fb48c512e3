import { TranscriptView } from './transcript-view.js';

/** The spoken conversation: user prompts and assistant replies with word highlighting. */
export class ConversationView {
  #list;
  /** responseId -> {item: HTMLLIElement, transcript: TranscriptView, note: HTMLElement} */
  #replies = new Map();

  /** @param {HTMLOListElement} list */
  constructor(list) {
    this.#list = list;
  }

  clear() {
    this.#list.replaceChildren();
    this.#replies.clear();
  }

  addUser(text) {
    const body = document.createElement('p');
    body.textContent = text;
    this.#append('user', 'You', body);
  }

  /** Add the reply of `responseId` and return its TranscriptView. */
  addAssistant(responseId) {
    const body = document.createElement('p');
    body.className = 'transcript';
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
    reply.item.classList.add('stopped');
    reply.note.textContent = `Stopped after ${(playedMs / 1000).toFixed(2)} s of audio`;
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
