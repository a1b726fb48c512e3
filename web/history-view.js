import { renderMarkdown, wrapText } from './markdown-view.js';

/**
 * The conversation history as the server stores it for the next prompt: user turns verbatim,
 * assistant turns cut to what the listener heard, their markdown rendered (`markdown-view.js`).
 * For an assistant item the heard part comes from its latest `conversation.item.heard` (`text`);
 * the unheard rest is `full_text` minus that prefix, struck through: the rendered text of the
 * heard prefix is wrapped in `.heard` elements, the rest in `<del class="unheard">` elements
 * (several of each when the reply has several blocks). Before any heard event the reply text is
 * shown as pending.
 */
export class HistoryView {
  #list;
  /** itemId -> entry (see #createEntry) */
  #entries = new Map();

  /** @param {HTMLOListElement} list */
  constructor(list) {
    this.#list = list;
  }

  clear() {
    this.#list.replaceChildren();
    this.#entries.clear();
  }

  /** Add an item (idempotent); `text` is a user turn's verbatim text. */
  addItem(itemId, role, text = '') {
    const entry = this.#entries.get(itemId) ?? this.#createEntry(itemId, role);
    if (role === 'user' && text) entry.text.textContent = text;
  }

  /** Add a spoken user turn whose transcript is still coming (idempotent). */
  addSpokenItem(itemId) {
    if (this.#entries.has(itemId)) return;
    const entry = this.#createEntry(itemId, 'user');
    entry.text.className = 'pending';
    entry.text.textContent = 'Transcribing…';
  }

  /** Set a spoken user turn's transcript; one without words is removed (never shown empty). */
  setUserText(itemId, text) {
    const entry = this.#entries.get(itemId);
    if (!entry) return;
    if (!text.trim()) {
      this.remove(itemId);
      return;
    }
    entry.text.className = '';
    entry.text.textContent = text;
  }

  /**
   * Show the barge-in timing of an interrupted assistant item:
   * {source, onsetToSilenceMs, bargeInToServerStopMs, calibrationMs} (ms; null = not yet/none).
   */
  setTiming(itemId, timing) {
    const entry = this.#entries.get(itemId);
    if (!entry?.timing) return;
    const ms = (value) => (Number.isFinite(value) ? `${Math.round(value)} ms` : '–');
    entry.timing.textContent = [
      `${ONSET_LABELS[timing.source] ?? timing.source} → silence ${ms(timing.onsetToSilenceMs)}`,
      `barge-in → server stop ${ms(timing.bargeInToServerStopMs)}`,
      `calibration ${ms(timing.calibrationMs)}`,
    ].join(' · ');
  }

  /** Grow an assistant item's pending text with a transcript delta. */
  appendText(itemId, delta) {
    const entry = this.#entries.get(itemId);
    if (!entry) return;
    entry.fullText += delta;
    this.#renderText(entry);
    if (!entry.heard) entry.text.lastElementChild?.scrollIntoView({ block: 'nearest' });
  }

  /** Replace an assistant item's pending text (the final transcript). */
  setText(itemId, text) {
    const entry = this.#entries.get(itemId);
    if (!entry) return;
    entry.fullText = text;
    this.#renderText(entry);
  }

  /** Show a `conversation.item.heard` event (the latest one wins). */
  setHeard(heard) {
    const entry = this.#entries.get(heard.item_id) ?? this.#createEntry(heard.item_id, 'assistant');
    entry.heard = heard;
    this.#renderText(entry);
    this.#renderBadges(entry);
    // Show where the cut is: the end of the heard part (and the badges below the text).
    (entry.cutAt ?? entry.text).scrollIntoView({ block: 'nearest' });
  }

  /** Show the cursor of the latest `playback.acknowledged` for an item. */
  setCursor(itemId, cursor) {
    const entry = this.#entries.get(itemId);
    if (!entry?.cursor) return;
    const parts = [
      `played ${cursor.played_ms} ms`,
      `sent ${cursor.sent_ms} ms`,
      `generated ${cursor.generated_ms} ms`,
    ];
    if (cursor.audio_complete) parts.push('audio complete');
    entry.cursor.textContent = parts.join(' · ');
  }

  remove(itemId) {
    this.#entries.get(itemId)?.item.remove();
    this.#entries.delete(itemId);
  }

  #createEntry(itemId, role) {
    const item = document.createElement('li');
    item.className = `turn ${role}`;
    item.dataset.itemId = itemId;
    const who = document.createElement('span');
    who.className = 'who';
    who.textContent = role === 'user' ? 'User' : 'Assistant';
    if (role === 'user') item.dataset.testid = 'history-user';
    const text = document.createElement(role === 'assistant' ? 'div' : 'p');
    item.append(who, text);
    const entry = { item, text, fullText: '', heard: null, cutAt: null };
    if (role === 'assistant') {
      item.dataset.testid = 'history-item';
      text.className = 'markdown';
      entry.badges = document.createElement('ul');
      entry.badges.className = 'badges';
      entry.cursor = document.createElement('p');
      entry.cursor.className = 'cursor';
      entry.timing = document.createElement('p');
      entry.timing.className = 'timing';
      entry.timing.dataset.testid = 'barge-in-timing';
      item.append(entry.badges, entry.timing, entry.cursor);
      this.#renderText(entry);
    }
    this.#entries.set(itemId, entry);
    this.#list.append(item);
    item.scrollIntoView({ block: 'nearest' });
    return entry;
  }

  /**
   * Render the item's markdown: with a heard event, the heard prefix's rendered text in `.heard`
   * spans and the rest in `del.unheard` (the whitespace right after the cut in a `.gap` inside
   * the first one, so that the strike starts at a word); before it, all in `.pending` spans.
   */
  #renderText(entry) {
    const { heard } = entry;
    if (!heard) {
      const [all] = renderMarkdown(entry.text, Array.from(entry.fullText), []);
      wrapText(all, () => element('span', 'pending'));
      entry.cutAt = null;
      return;
    }
    const full = heard.full_text ?? '';
    const source = full.startsWith(heard.text) ? full : heard.text;
    const [heardNodes, rest] = renderMarkdown(
      entry.text, Array.from(source), [Array.from(heard.text).length]);
    const heardParts = wrapText(heardNodes, () => element('span', 'heard'));
    // Whitespace-only text before the first unheard word is not struck.
    const words = rest.slice(Math.max(0, rest.findIndex((node) => node.data.trim())));
    const first = words.find((node) => node.data.trim());
    const unheard = first ? wrapText(words, () => element('del', 'unheard')) : [];
    const gap = first?.data.match(/^\s+/)?.[0];
    if (gap) {
      const space = document.createElement('span');
      space.className = 'gap';
      space.textContent = gap;
      first.data = first.data.slice(gap.length);
      unheard[0].prepend(space);
    }
    entry.cutAt = heardParts[heardParts.length - 1] ?? unheard[0] ?? null;
  }

  #renderBadges(entry) {
    const { heard } = entry;
    const badges = [];
    if (heard.interrupted) badges.push(['interrupted', 'warn']);
    // Method 'none' means the heard text is unknown (not calibrated), not that nothing was heard.
    if (heard.text === '' && heard.method === 'none') badges.push(['heard text unknown', 'warn']);
    else if (heard.text === '') badges.push(['nothing heard', 'warn']);
    badges.push([`method: ${heard.method}`]);
    if (heard.marks_agree === true) badges.push(['marks agree with ASR', 'ok']);
    if (heard.marks_agree === false) badges.push(['marks disagree with ASR', 'warn']);
    if (Number.isFinite(heard.played_ms)) badges.push([`heard up to ${heard.played_ms} ms`]);
    if (Number.isFinite(heard.elapsed_ms)) {
      badges.push([`calibration ${Math.round(heard.elapsed_ms)} ms`]);
    }
    if (heard.asr_text != null) badges.push([`ASR heard: “${heard.asr_text}”`, 'asr']);
    entry.badges.replaceChildren(
      ...badges.map(([label, tone]) => {
        const badge = document.createElement('li');
        badge.className = tone ? `badge ${tone}` : 'badge';
        badge.textContent = label;
        return badge;
      }),
    );
  }
}

/** What starts the onset -> silence interval, by barge-in source. */
const ONSET_LABELS = {
  vad: 'speech onset',
  server_vad: 'speech onset (server VAD stop)',
  button: 'Stop press',
};

/** An element whose class and `data-testid` are both `name`. */
function element(tag, name) {
  const node = document.createElement(tag);
  node.className = name;
  node.dataset.testid = name;
  return node;
}
