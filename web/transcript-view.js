import { renderMarkdown, wrapText } from './markdown-view.js';

/**
 * The text of one assistant reply as it is spoken, its markdown rendered (`markdown-view.js`):
 * the rendered text of each word mark becomes one or more <span class="word"> (more when the
 * mark spans several rendered elements) whose data-state is '' (not yet played), 'current'
 * (start_ms <= position < end_ms) or 'spoken' (end_ms <= position). Text without marks is shown
 * plain. The current word is kept scrolled into view.
 *
 * Offsets in marks are code points into the concatenation of the reply's transcript deltas, so
 * the text is kept as an array of code points and never indexed as UTF-16.
 */
export class TranscriptView {
  #element;
  #chars = [];
  #marks = [];
  /** {elements, startMs, endMs} for every rendered mark, in text order */
  #words = [];
  #dirty = false;
  #positionMs = null;
  #live = true;

  /** @param {HTMLElement} element the container the reply is rendered into */
  constructor(element) {
    this.#element = element;
  }

  /** Append a `response.output_audio_transcript.delta`. */
  appendText(delta) {
    this.#chars.push(...Array.from(delta));
    this.#dirty = true;
  }

  /** Replace the text (the `transcript` of `response.output_audio_transcript.done`). */
  setText(text) {
    this.#chars = Array.from(text);
    this.#dirty = true;
  }

  /** Add the `marks` of a `response.output_audio.delta`: [{char_start, char_end, start_ms, end_ms, estimated}]. */
  addMarks(marks) {
    this.#marks.push(...marks);
    this.#marks.sort((a, b) => a.char_start - b.char_start);
    this.#dirty = true;
  }

  /**
   * Show `positionMs` (heard position on the reply's audio timeline); cheap when nothing changed.
   * `live` is false once playback stopped: the word cut in the middle is then shown unplayed,
   * as history counts it (a word is heard only when its end_ms <= the position).
   */
  render(positionMs, live = true) {
    const rebuilt = this.#dirty;
    if (rebuilt) this.#rebuild();
    if (!rebuilt && positionMs === this.#positionMs && live === this.#live) return;
    this.#positionMs = positionMs;
    this.#live = live;
    for (const word of this.#words) {
      let state = '';
      if (word.endMs <= positionMs) state = 'spoken';
      else if (live && word.startMs <= positionMs) state = 'current';
      if (!word.elements.length || word.elements[0].dataset.state === state) continue;
      for (const element of word.elements) element.dataset.state = state;
      // Keep the word being spoken on screen as the reply grows below the panel's fold.
      if (state === 'current') word.elements[0].scrollIntoView({ block: 'nearest' });
    }
  }

  #rebuild() {
    const spans = [];
    let at = 0;
    for (const mark of this.#marks) {
      if (mark.char_start < at) continue; // overlaps an earlier mark
      spans.push(mark);
      at = mark.char_end;
    }
    const offsets = spans.flatMap((mark) => [mark.char_start, mark.char_end]);
    const segments = renderMarkdown(this.#element, this.#chars, offsets);
    this.#words = spans.map((mark, index) => ({
      elements: wrapText(segments[2 * index + 1], () => {
        const element = document.createElement('span');
        element.className = mark.estimated ? 'word estimated' : 'word';
        element.dataset.state = '';
        return element;
      }),
      startMs: mark.start_ms,
      endMs: mark.end_ms,
    }));
    this.#dirty = false;
  }
}
