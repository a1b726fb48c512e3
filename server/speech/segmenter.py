"""Split a streamed reply into the pieces handed to TTS: a short first piece, then sentences, and
inside an over-long sentence clauses or, failing those, runs of words.

Sans-I/O: a plain object fed with text deltas; it returns code-point spans into the reply's full
text (the concatenation of every delta fed so far). Pieces end only between written tokens
(after whitespace, or between two CJK characters), so a piece boundary never splits a token and
the reply text (which word marks index) is not changed.
"""

from __future__ import annotations

import re

# Characters that may close a sentence or clause after its punctuation: quotes, brackets and
# markdown emphasis ("**Great job!** Well done." ends after the "**").
_CLOSERS = "\"'\u201d\u2019\u00bb)\\]}\u300d\u300f\u3011*_"
# Characters that open a quotation: a terminator right after one ('"... 7') ends no sentence.
_OPENERS = "\"'\u201c\u2018\u00ab([{\u300c\u300e\u3010"
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"

# One candidate boundary per match; the segment ends at match.end() (whitespace included).
_BOUNDARY = re.compile(
    rf"(?P<latin>[.!?\u2026]+)[{_CLOSERS}]*\s+"  # Latin sentence end: needs whitespace after
    rf"|[\u3002\uff01\uff1f]+[{_CLOSERS}]*\s*"  # CJK full stop, ! and ?: no whitespace needed
    r"|\s*\n\s*"  # a line break ends a sentence
    rf"|(?P<clause>[,;:][{_CLOSERS}]*\s+|[\uff0c\u3001\uff1b\uff1a]\s*|\u2014\s*|\s[-\u2013]\s+)"
)
# Words for the first-clause minimum: each CJK character counts as one word.
_WORD = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])\w)+")
# Lower-cased abbreviations (without their final period) that a period does not end a sentence
# after; initialisms such as "e.g." and "U.S.A." are recognised by their shape instead.
_ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "approx", "no", "nos",
        "fig", "vol", "ch", "p", "pp", "ca", "cf", "dept", "est", "inc", "ltd",
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    }
)
_INITIALISM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")

# Words a long piece may be split before: a clause starts there (coordinating and common
# subordinating conjunctions, relative pronouns).
_CONJUNCTIONS = (
    "and", "but", "or", "nor", "so", "yet", "because", "although", "though", "while",
    "whereas", "which", "who", "whose", "where", "when", "unless", "until", "since", "if",
)
_CONJUNCTION = re.compile(rf"(?<=\s)(?:{'|'.join(_CONJUNCTIONS)})(?=\s)", re.IGNORECASE)
_WHITESPACE = re.compile(r"\s+")
_ATOMS = (("<tool_call>", "</tool_call>"), ("<function_call>", "</function_call>"),
          ("\\(", "\\)"), ("\\[", "\\]"))
# A fenced code block's opening and closing lines (CommonMark: ``` or ~~~ at a line start).
_CODE_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)
_CJK_CHAR = re.compile(rf"[{_CJK}]")

FIRST_CLAUSE_MIN_WORDS = 3
"""Words before a clause mark that may end the first span early: shorter fragments ("Yes,")
sound clipped when synthesised alone (project design: first clause early, after >= 3 words).
Also the fewest words before a split inside an over-long sentence."""

FIRST_PIECE_MAX_WORDS = 12
"""Most words of the first piece of a reply when it is a whole first clause or sentence.
Piper's time to the first audio grows with the piece's length (it synthesizes a piece in one
ONNX run): measured on this 2-core machine under shared load with a warm deterministic voice,
best of 3, 3 / 5 / 8 / 12 words took 333 / 493 / 903 / 2361 ms for 0.95 / 1.71 / 2.51 / 3.73 s
of audio; DESIGN.md section 6 gives RTF about 0.05 on a quiet machine, so 12 words cost about
190 ms there. Not lower: a sentence cut out of its middle is spoken with a sentence's ending
where it was cut ("The museum opened in 1998" alone is heard by tiny.en as "The museum opened
in 1900, 1998", whole as written), which the listener hears and the ASR calibration mishears
(tests/test_asr_on_piper.py refused 14 of 23 cuts with 8)."""

FIRST_PIECE_SPLIT_WORDS = 6
"""Most words of a first piece that has to be cut out of its sentence (no clause mark or
sentence end within FIRST_PIECE_MAX_WORDS): its prosody is already broken there, so it is as
short as the usual opening clause (measured above: 6 words, about 2 s of audio, cost 613 ms
under load against 903 ms for 8; on a quiet machine RTF 0.05 makes that about 100 ms)."""

MAX_PIECE_WORDS = 16
"""Most words of any later piece (about 5 s of Piper audio, measured above: 16 words gave
4.73 s). A longer sentence is split at its last clause mark, else before its last conjunction,
else after its 16th word. Bounds Piper's memory and time per ONNX run whatever the reply's
length (one 600-word sentence took 64.6 s and 3.7 GB as one run, issue 12)."""


class SpeechSegmenter:
    """Turn text deltas into (start, end) code-point spans of the reply's full text.

    The spans are contiguous, in order, and together cover the whole text once `flush()` has
    been called; each span includes the whitespace that follows it. The first span ends at the
    first clause boundary (",", ";", ":", a dash, or their CJK forms) after at least
    FIRST_CLAUSE_MIN_WORDS words, or at the first sentence end, whichever comes first, so that
    TTS can start early; every later span is a whole sentence. A span never holds more than
    FIRST_PIECE_MAX_WORDS (first span) or MAX_PIECE_WORDS (later spans) words (letter/digit
    runs; a CJK character is one word) unless one written token alone has more: an over-long
    first span ends before its first conjunction ("and", "because", "which"...) after at least
    FIRST_CLAUSE_MIN_WORDS and at most FIRST_PIECE_SPLIT_WORDS words, else after its
    FIRST_PIECE_SPLIT_WORDS-th word; an over-long later
    span ends at its last clause boundary, else before its last conjunction (both after at least
    FIRST_CLAUSE_MIN_WORDS words), else after its last word within the limit. A sentence ends
    at . ! ? or an ellipsis followed by whitespace, at a CJK full stop, exclamation or question
    mark (no whitespace needed), or at a line break. A period after a known abbreviation
    ("Dr.", "Mr."), after an initialism ("e.g.", "U.S.A."), inside a number ("3.5", "$9.05"), or
    followed by a lower-case word ends no sentence; nor does punctuation right after whitespace
    or an opening quote ('"... 7, 6,"').

    A fenced code block (``` or ~~~ lines) is one span, from its opening fence to the
    whitespace after its closing fence, whatever its lines and length: it is spoken as one
    phrase (`calibration.speakable`).

    A boundary is emitted only once the next non-whitespace character has arrived (or at
    `flush()`), so the trailing whitespace is complete and the spans do not depend on how the
    text was split into deltas. Rules follow the usual TTS sentence-splitting heuristics
    (punctuation plus an abbreviation list, as in Punkt-style splitters); no model is used.

    Args:
        first_clause: emit the first span early at a clause boundary (default True); when False
            the first span is a sentence too (or a piece of one, see `split_long`).
        split_long: split over-long spans as above (default True); when False no span is split
            for its length (whole sentences, e.g. for a responder streaming sentence by sentence).
    """

    def __init__(self, *, first_clause: bool = True, split_long: bool = True) -> None:
        self._text = ""
        self._start = 0
        self._clause = first_clause
        self._split_long = split_long

    def feed(self, delta: str) -> list[tuple[int, int]]:
        """Add a text delta; return the spans (code points, end exclusive) completed by it."""
        self._text += delta
        spans: list[tuple[int, int]] = []
        while (end := self._next_boundary()) is not None:
            spans.append((self._start, end))
            self._start = end
            self._clause = False
        return spans

    def flush(self) -> list[tuple[int, int]]:
        """End of the reply: return the span of the text not yet emitted ([] when none)."""
        if self._start == len(self._text):
            return []
        span = (self._start, len(self._text))
        self._start = len(self._text)
        self._clause = False
        return [span]

    def flush_words(self) -> list[tuple[int, int]]:
        """The reply paused mid-sentence: return the span of the complete words not yet emitted
        (up to the end of the last whitespace run after them; [] when there is none), so that
        a span still ends only between written tokens. The next span starts there."""
        if _code_block_end(self._text, self._start) is not None:
            return []
        ends = _word_ends(self._text + " ", self._start, len(self._text))
        if not ends or not _WORD.search(self._text, self._start, ends[-1]):
            return []
        span = (self._start, ends[-1])
        self._start = ends[-1]
        self._clause = False
        return [span]

    def _next_boundary(self) -> int | None:
        """Exclusive end of the next complete span after self._start, or None if not known yet."""
        text, start = self._text, self._start
        block_end = _code_block_end(text, start)
        if block_end is not None:
            return block_end if block_end >= 0 else None
        first = self._clause
        limit = FIRST_PIECE_MAX_WORDS if first else MAX_PIECE_WORDS
        overflow = _word_start(text, start, limit) if self._split_long else None
        # Scan only up to the words beyond the limit: a boundary after them does not matter, and
        # a run-on reply is not rescanned to its end for every piece.
        for match in _BOUNDARY.finditer(text, start, len(text) if overflow is None else overflow):
            if match.end() == len(text):
                return None
            before = text[start : match.start()]
            if not before.strip() or _inside_atom(before):
                continue
            if "\n" in match.group(0):
                return match.end()
            if match.group("clause") is not None:
                if self._clause and len(_WORD.findall(before)) >= FIRST_CLAUSE_MIN_WORDS:
                    return match.end()
                continue
            if match.group("latin") is not None and not _ends_sentence(text, start, match):
                continue
            return match.end()
        if overflow is None:
            return None
        return _split(text, start, overflow, first=first)


def _inside_atom(text: str) -> bool:
    """Whether `text` (a span's text up to a candidate boundary) ends inside a span that is
    spoken as one phrase or not at all (`calibration.speakable`): an open JSON object (one
    `{"` seen, more `{` than `}`) or `<tool_call>`, LaTeX `\\(`, `\\[` or `$$` not yet
    closed. A boundary there would cut the span in two pieces that are each read as
    symbols."""
    if '{"' in text and text.count("{") > text.count("}"):
        return True
    return any(text.count(opener) > text.count(closer) for opener, closer in _ATOMS) or (
        text.count("$$") % 2 == 1)


def _code_block_end(text: str, start: int) -> int | None:
    """For a span starting at `start`: None when it does not start with a code fence; else the
    end of the span that holds the whole fenced block (after its closing fence line and the
    whitespace after it), or -1 while that end is not known yet (the block or the whitespace
    after it is still being written)."""
    opening = _CODE_FENCE.match(text, start)
    if opening is None:
        return None
    line_end = text.find("\n", opening.end())
    closing = None
    if line_end >= 0:
        closing = next((match for match in _CODE_FENCE.finditer(text, line_end + 1)
                        if match.group(1) == opening.group(1)), None)
    closing_end = text.find("\n", closing.end()) if closing is not None else -1
    if closing_end < 0:
        return -1
    end = _WHITESPACE.match(text, closing_end).end()  # type: ignore[union-attr]
    return end if end < len(text) else -1


def _word_start(text: str, start: int, words: int) -> int | None:
    """Offset of the first word after the first `words` words of text[start:] (None: none yet)."""
    for count, match in enumerate(_WORD.finditer(text, start)):
        if count == words:
            return match.start()
    return None


def _split(text: str, start: int, overflow: int, *, first: bool) -> int | None:
    """End of an over-long span that starts at `start` and whose words beyond the limit begin at
    `overflow` (see `SpeechSegmenter`), never inside an atom (`_inside_atom`); None when one
    token or atom runs past the limit and its end has not arrived yet."""

    def long_enough(end: int) -> bool:
        return (len(_WORD.findall(text, start, end)) >= FIRST_CLAUSE_MIN_WORDS
                and not _inside_atom(text[start:end]))

    if not first:
        clauses = [
            match.end()
            for match in _BOUNDARY.finditer(text, start, overflow)
            if match.group("clause") is not None and long_enough(match.start())
        ]
        if clauses:
            return clauses[-1]
    if first:
        overflow = _word_start(text, start, FIRST_PIECE_SPLIT_WORDS) or overflow
    conjunctions = [
        match.start()
        for match in _CONJUNCTION.finditer(text, start, overflow)
        if long_enough(match.start())
    ]
    if conjunctions:
        return conjunctions[0] if first else conjunctions[-1]
    words = [end for end in _word_ends(text, start, overflow)
             if not _inside_atom(text[start:end])]
    if words:
        return words[-1]
    later = [end for end in _word_ends(text, overflow, len(text))
             if not _inside_atom(text[start:end])]
    return later[0] if later and later[0] < len(text) else None


def _word_ends(text: str, start: int, stop: int) -> list[int]:
    """Offsets in (start, stop) (stop < len(text)) or at stop where a span may end: after a
    whitespace run, or between two CJK characters."""
    ends = [
        match.end()
        for match in _WHITESPACE.finditer(text, start, stop)
        if match.start() > start and match.end() < len(text)
    ]
    ends += [
        match.end()
        for match in _CJK_CHAR.finditer(text, start, stop)
        if match.end() < len(text) and _CJK_CHAR.match(text, match.end())
    ]
    return sorted(end for end in ends if start < end <= stop)


def _ends_sentence(text: str, start: int, match: re.Match[str]) -> bool:
    """Whether a Latin terminator run (group "latin" of `match`) really ends a sentence."""
    if text[match.start() - 1].isspace() or text[match.end()].islower():
        return False
    token = text[start : match.start()].split()[-1].lstrip(_OPENERS)
    if not token:
        return False
    if match.group("latin") != ".":
        return True
    return token.lower() not in _ABBREVIATIONS and not _INITIALISM.fullmatch(token)
