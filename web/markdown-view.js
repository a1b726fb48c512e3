import { marked } from './vendor/marked.esm.js';
import DOMPurify from './vendor/purify.es.mjs';

/**
 * A reply's markdown rendered as the page shows it (code blocks, tables, links, lists, emphasis),
 * with positions of the written text found again in the rendered text.
 *
 * The voice speaks a reply's spoken form (server/speech/speakable.py) while word marks and the
 * heard cut are code-point offsets into the written text. To keep them exact on the rendered
 * page, each wanted offset gets a sentinel character of its own (Supplementary Private Use
 * Area-A, U+F0000 + its index) inserted into the markdown source before rendering; markdown
 * keeps text characters in order, so after rendering every sentinel sits in a text node at the
 * place its offset's text went, and the text between two sentinels is exactly the rendered form
 * of the written text between the two offsets. Sentinels are moved off the few places where a
 * character would change the markdown's structure (before a line's block marker, onto a code
 * fence line, between an emphasis run and its word: CommonMark flanking rules), never across
 * text that renders.
 *
 * LLM text is untrusted: marked's HTML goes through DOMPurify (script, event handlers and
 * `javascript:` URLs removed; forms, media and styles forbidden), links open in a new tab
 * without a referrer, and the page's Content-Security-Policy allows scripts from its own origin
 * only. Libraries: marked and DOMPurify, vendored in web/vendor/ (versions in package.json).
 */

const SENTINEL_BASE = 0xf0000;
const MAX_SENTINELS = 0xfffd;
const SENTINEL = /[\u{f0000}-\u{ffffd}]/gu;
/** A sentinel in a URL attribute, percent-encoded (UTF-8 F3 B0-BF xx xx). */
const ENCODED_SENTINEL = /%F3%B[0-9A-F]%[89AB][0-9A-F]%[89AB][0-9A-F]/gi;
/** Lines that render no text of their own: a code fence, a table rule, a setext underline or
 * thematic break, a blank line. */
const SILENT_LINE = /^[ \t]*(?:(?:`{3,}|~{3,})[^\n]*|\|?[ \t:|-]*-[ \t:|-]*|[=*_-][ \t=*_-]*|)$/;
/** Block markers at a line start: indentation, list bullets and numbers, headings, quotes, a
 * table's leading pipe. */
const BLOCK_MARKERS = /^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?|#{1,6}[ \t]+|>[ \t]?|\|[ \t]*)*/;
const DELIMITERS = new Set(['*', '_', '~']);
const FORBID_TAGS = ['style', 'form', 'input', 'button', 'textarea', 'select', 'img', 'video',
  'audio', 'iframe', 'object', 'embed', 'svg', 'math', 'link', 'meta', 'base'];

/**
 * Render the markdown `chars` (an array of code points) into `container`, replacing its
 * children, and return the rendered text between the given offsets.
 *
 * @param {HTMLElement} container
 * @param {string[]} chars the written text as code points
 * @param {number[]} offsets ascending code-point offsets into `chars` (0..chars.length), at
 *   most 65,533
 * @returns {Text[][]} offsets.length + 1 lists of text nodes of `container`, in document order:
 *   list i holds the rendered text between offsets[i - 1] and offsets[i] (list 0: before the
 *   first offset; the last: after the last). Text nodes are split at the offsets.
 */
export function renderMarkdown(container, chars, offsets) {
  if (offsets.length > MAX_SENTINELS) throw new RangeError('too many offsets to render');
  const source = [];
  const placed = placeOffsets(chars, offsets);
  let next = 0;
  for (let index = 0; index <= chars.length; index += 1) {
    while (next < placed.length && placed[next] === index) {
      source.push(String.fromCodePoint(SENTINEL_BASE + next));
      next += 1;
    }
    if (index < chars.length) source.push(chars[index]);
  }
  const html = marked.parse(source.join(''), { gfm: true, breaks: true, async: false });
  const fragment = DOMPurify.sanitize(html, {
    RETURN_DOM_FRAGMENT: true, FORBID_TAGS, FORBID_ATTR: ['style', 'class', 'id'],
  });
  for (const element of fragment.querySelectorAll('*')) {
    for (const attribute of [...element.attributes]) {
      const value = attribute.value.replace(SENTINEL, '').replace(ENCODED_SENTINEL, '');
      if (value !== attribute.value) element.setAttribute(attribute.name, value);
    }
    if (element.tagName === 'A') {
      element.target = '_blank';
      element.rel = 'noopener noreferrer';
    }
  }
  container.replaceChildren(fragment);
  return splitAtSentinels(container, offsets.length);
}

/**
 * Wrap every text node of `nodes` in a new element made by `make()`; returns the wrappers.
 * Line ends between blocks (a whitespace-only node with a line break, outside code) stay
 * unwrapped: an element there would be stray content of a list or table.
 *
 * @param {Text[]} nodes
 * @param {() => HTMLElement} make
 * @returns {HTMLElement[]}
 */
export function wrapText(nodes, make) {
  const wrappers = [];
  for (const node of nodes) {
    if (!node.data.trim() && node.data.includes('\n') && !node.parentElement?.closest('pre')) {
      continue;
    }
    const wrapper = make();
    node.replaceWith(wrapper);
    wrapper.append(node);
    wrappers.push(wrapper);
  }
  return wrappers;
}

/** Where each offset's sentinel goes (code-point index of `chars`, ascending). */
function placeOffsets(chars, offsets) {
  const placed = [];
  let least = 0;
  for (const offset of offsets) {
    const at = Math.max(least, safeOffset(chars, Math.min(Math.max(offset, 0), chars.length)));
    placed.push(at);
    least = at;
  }
  return placed;
}

/**
 * `at`, moved where a character changes no markdown structure: off a line's block markers and
 * off lines that render no text (forward), and out of an emphasis run that touches a word
 * (into the word's side: "**bold**" keeps its sentinels around "bold").
 */
function safeOffset(chars, at) {
  const lineStart = (index) => {
    let start = index;
    while (start > 0 && chars[start - 1] !== '\n') start -= 1;
    return start;
  };
  const lineEnd = (index) => {
    let end = index;
    while (end < chars.length && chars[end] !== '\n') end += 1;
    return end;
  };
  for (;;) {
    const start = lineStart(at);
    const end = lineEnd(at);
    const line = chars.slice(start, end).join('');
    if (SILENT_LINE.test(line)) {
      if (end < chars.length) {
        at = end + 1;
        continue;
      }
      if (start > 0) at = start - 1;
      break;
    }
    const before = chars.slice(start, at).join('');
    if (!before.trim()) {
      const marker = line.match(BLOCK_MARKERS)[0].length;
      at = Math.max(at, start + [...line.slice(0, marker)].length);
    }
    break;
  }
  // A table cell's text starts after its pipe's spaces (marked trims them, not a sentinel).
  while (at > 0 && chars[at - 1] === '|' && (chars[at] === ' ' || chars[at] === '\t')) at += 1;
  const wordBefore = at > 0 && !/\s/u.test(chars[at - 1]);
  const wordAfter = at < chars.length && !/\s/u.test(chars[at]);
  if (wordBefore && !wordAfter) {
    while (at > 0 && DELIMITERS.has(chars[at - 1])) at -= 1;
  } else if (wordAfter && !wordBefore) {
    while (at < chars.length && DELIMITERS.has(chars[at])) at += 1;
  }
  return at;
}

/** Split the text nodes of `root` at sentinels (removed) into `count` + 1 lists. */
function splitAtSentinels(root, count) {
  const segments = Array.from({ length: count + 1 }, () => []);
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) nodes.push(node);
  let segment = 0;
  for (const node of nodes) {
    const parts = node.data.split(/([\u{f0000}-\u{ffffd}])/u);
    if (parts.length === 1) {
      segments[Math.min(segment, count)].push(node);
      continue;
    }
    const pieces = [];
    for (let index = 0; index < parts.length; index += 1) {
      if (index % 2 === 1) {
        segment = Math.max(segment, parts[index].codePointAt(0) - SENTINEL_BASE + 1);
      } else if (parts[index]) {
        const piece = document.createTextNode(parts[index]);
        pieces.push(piece);
        segments[Math.min(segment, count)].push(piece);
      }
    }
    node.replaceWith(...pieces);
  }
  return segments;
}
