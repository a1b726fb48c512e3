/**
 * The text of one assistant reply as it is spoken: each word mark becomes a <span class="word">
 * whose data-state is '' (not yet played), 'current' (start_ms <= position < end_ms) or
 * 'spoken' (end_ms <= position). Text without marks is shown plain.
 *
 * Offsets in marks are code points into the concatenation of the reply's transcript deltas, so
 * the text is kept as an array of code points and never indexed as UTF-16.
 */
export class TranscriptView {
  #element;
  #chars = [];
  #marks = [];
  /** {element, startMs, endMs} for every rendered mark, in text order */
  #words = [];
  #dirty = false;
  #positionMs = null;

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

  /** Show `positionMs` (heard position on the reply's audio timeline); cheap when nothing changed. */
  render(positionMs) {
    const rebuilt = this.#dirty;
    if (rebuilt) this.#rebuild();
    if (!rebuilt && positionMs === this.#positionMs) return;
    this.#positionMs = positionMs;
    for (const word of this.#words) {
      let state = '';
      if (word.endMs <= positionMs) state = 'spoken';
      else if (word.startMs <= positionMs) state = 'current';
      if (word.element.dataset.state !== state) word.element.dataset.state = state;
    }
  }

  #rebuild() {
    const fragment = document.createDocumentFragment();
    const text = (start, end) => this.#chars.slice(start, end).join('');
    this.#words = [];
    let at = 0;
    for (const mark of this.#marks) {
      if (mark.char_start < at) continue; // overlaps an earlier mark
      if (mark.char_start > at) fragment.append(text(at, mark.char_start));
      const element = document.createElement('span');
      element.className = mark.estimated ? 'word estimated' : 'word';
      element.dataset.state = '';
      element.textContent = text(mark.char_start, mark.char_end);
      fragment.append(element);
      this.#words.push({ element, startMs: mark.start_ms, endMs: mark.end_ms });
      at = mark.char_end;
    }
    if (at < this.#chars.length) fragment.append(text(at));
    this.#element.replaceChildren(fragment);
    this.#dirty = false;
  }
}
