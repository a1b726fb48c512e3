"""Split a streamed reply into the pieces handed to TTS: the first clause early, then sentences.

Sans-I/O: a plain object fed with text deltas; it returns code-point spans into the reply's full
text (the concatenation of every delta fed so far).
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

FIRST_CLAUSE_MIN_WORDS = 3
"""Words before a clause mark that may end the first span early: shorter fragments ("Yes,")
sound clipped when synthesised alone (project design: first clause early, after >= 3 words)."""


class SpeechSegmenter:
    """Turn text deltas into (start, end) code-point spans of the reply's full text.

    The spans are contiguous, in order, and together cover the whole text once `flush()` has
    been called; each span includes the whitespace that follows it. The first span ends at the
    first clause boundary (",", ";", ":", a dash, or their CJK forms) after at least
    FIRST_CLAUSE_MIN_WORDS words, or at the first sentence end, whichever comes first, so that
    TTS can start early; every later span is a whole sentence. A sentence ends at . ! ? or an
    ellipsis followed by whitespace, at a CJK full stop, exclamation or question mark (no
    whitespace needed), or at a line break. A period after a known abbreviation ("Dr.", "Mr."),
    after an initialism ("e.g.", "U.S.A."), inside a number ("3.5", "$9.05"), or followed by a
    lower-case word ends no sentence; nor does punctuation right after whitespace or an opening
    quote ('"... 7, 6,"').

    A boundary is emitted only once the next non-whitespace character has arrived (or at
    `flush()`), so the trailing whitespace is complete and the spans do not depend on how the
    text was split into deltas. Rules follow the usual TTS sentence-splitting heuristics
    (punctuation plus an abbreviation list, as in Punkt-style splitters); no model is used.

    Args:
        first_clause: emit the first span early at a clause boundary (default True); when False
            every span is a whole sentence.
    """

    def __init__(self, *, first_clause: bool = True) -> None:
        self._text = ""
        self._start = 0
        self._clause = first_clause

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

    def _next_boundary(self) -> int | None:
        """Exclusive end of the next complete span after self._start, or None if not known yet."""
        text, start = self._text, self._start
        for match in _BOUNDARY.finditer(text, start):
            if match.end() == len(text):
                return None
            before = text[start : match.start()]
            if not before.strip():
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
        return None


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
