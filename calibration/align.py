"""ASR transcript -> heard prefix of the original reply: an edit-distance prefix matcher.

Source: REFERENCE.md section 5.2 (the Qwen3-Omni `asr_prefix` matcher: DP anchored at the start
of the original with a free suffix, refusal on ties, on edits to protected units, on fewer than 3
heard units and on an unanchored tail; the final recognised unit is withheld), improved as
REFERENCE.md section 8 items 2, 4 and 5 suggest, with the costs measured in DESIGN.md section 6
(a skipped original word costs 0.5) and rules measured with deterministic Piper speech and
faster-whisper tiny.en (`benchmarks/bench_calibration.py`):

- both texts are compared as spoken-form words (calibration.units), so ASR "twenty five" or "25"
  matches written "25" or "twenty-five", "nine dollars and five cents" matches "$9.05" and
  "doctor" matches "Dr."; contractions are compared expanded on both sides ("you're" = "you
  are", "don't" = "do not") and British "-tre" spellings as "-ter" ("litres" = "liters");
- a "°" of the original is spoken: "25 °C" compares as "twenty five degrees c" (Piper says
  "degrees" before the "C" unit starts, and the recogniser writes it);
- numbers the recogniser writes its own way: a transcript number with the same digits as a
  number of the original reads like that number ("9.15", "915" = "9:15"; "11-14" = "11/14";
  "1030" = "10:30"), and a currency word before a number reads as the amount ("dollar 30" =
  "$30", "euros 2.5" = "€2.50");
- ties are judged by where they put the cut: every optimal alignment is examined; when they all
  agree (a slip like "jacket" -> "jack it" can be aligned two ways at the same cost) or differ
  by one unit (the smaller cut is taken), the tie does not refuse;
- the final transcript unit may be a word cut in half: the caller decides whether it counts
  (REFERENCE withholds it; with word timings the policy keeps a word the recogniser heard);
  when it counts, a final word of 2 letters or more that is not sensitive matches ANY
  non-sensitive original word (tiny.en often mishears the last word of the audio: "in" ->
  "and", "wooden" -> "wind", "bare" -> "bearish"; it heard speech there, so the word had
  started), but such a loose match does not anchor the tail (measured on the benchmark corpus,
  1311 cuts, with the "°" and unit-of-measure rules: 94.5 % of the answered cuts inside, none
  past the started word; 91.9 % when the final word had to begin like the original one; a
  one-letter final word is a fragment, "15 p." for "15%", and matched loosely it claimed the
  next word); and when the alignment with it refuses, the transcript is aligned again without
  it (a fragment can neither tie nor unanchor the tail);
- long replies are never refused for their length, and a transcript of the END of the played
  audio is aligned without the start anchor inside a window around the expected position.

Pure computation (numpy for the DP rows); no I/O, no logging.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from calibration.number_words import cardinal_words, ordinal_words
from calibration.units import (
    TextUnit,
    currency_symbol,
    cut_after_units,
    is_protected,
    text_units,
)

# Costs, doubled so that they stay integers (REFERENCE 5.2 with DESIGN 6's deletion cost 0.5).
_DELETE = 1  # an original word the transcript skipped: 0.5
_INSERT = 2  # a transcript word that is not in the original: 1
_SUBSTITUTE = 2  # a transcript word in place of a different original word: 1

_TAIL_MATCHES = 3  # REFERENCE 5.2 step 10: tail_guard_units (1) + 2
_MIN_HEARD_UNITS = 3  # REFERENCE 5.2 step 3
_COLUMN_MARGIN = 8
_MAX_PATHS = 256  # optimal alignments examined; more count as ambiguous
_LOOSE_LETTERS = 2  # a final transcript word this long matches any plain word
_TIE_UNITS = 1  # optimal alignments whose cuts differ by at most this many units: take the least

# Words whose edit changes a quantity even when the written unit holds no digit ("fifteen"
# written out, CJK numerals); sensitive like digits and negations.
_NUMBER_WORDS = frozenset(
    {w for n in [*range(20), *range(20, 100, 10), 100, 1000, 10**6, 10**9]
     for w in (*cardinal_words(n), *ordinal_words(n))}
    | {"point", "minus", "half", "halves", "quarter", "quarters"}
    | set("〇零一二两三四五六七八九十百千万亿")
)

# Contractions, compared expanded on both sides. Only unambiguous forms: "'d" (had / would) and
# a possessive "'s" stay as written.
_CONTRACTED_WORDS: dict[str, tuple[str, ...]] = {
    "won't": ("will", "not"), "can't": ("can", "not"), "cannot": ("can", "not"),
    "shan't": ("shall", "not"), "let's": ("let", "us"),
    **{f"{word}'s": (word, "is") for word in (
        "it", "that", "there", "here", "what", "where", "who", "how", "he", "she")},
}
_CONTRACTED_SUFFIXES = (("n't", "not"), ("'re", "are"), ("'ll", "will"), ("'ve", "have"),
                        ("'m", "am"))
_BRITISH_TRE = re.compile(r"(?<=\w{2})tre(s?)$")
# Units of measure the recogniser writes abbreviated ("250ml") or in full ("250 millilitres"):
# both sides compare as the abbreviation. Only abbreviations of two letters or more ("m" may be
# metres, minutes or million).
_UNIT_WORDS = {f"{name}{plural}": short for short, name in (
    ("ml", "milliliter"), ("cl", "centiliter"), ("km", "kilometer"), ("cm", "centimeter"),
    ("mm", "millimeter"), ("kg", "kilogram"), ("mg", "milligram")) for plural in ("", "s")}

_DIGIT_JOINERS = frozenset("-/.:")  # "11-14", "9.15": two digit groups of one written number
_NUMBER_WITH_UNIT = re.compile(r"(\d[\d,.]*)([^\W\d_]{2,})")  # "250ml": a number, then a unit
_PLAIN_NUMBER = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class AlignResult:
    """Outcome of `align_prefix`.

    Attributes:
        char_end: exclusive code-point offset of the heard prefix of the original (always a
            `cut_after_units` boundary), or None when the matcher refused.
        reason: "accepted", or why it refused: "insufficient_text", "edit_distance",
            "ambiguous_endpoint", "ambiguous_path", "sensitive_edit", "deletion_gap",
            "unanchored_tail".
        heard_units: number of original units in the accepted prefix (0 when refused).
    """

    char_end: int | None
    reason: str
    heard_units: int


@dataclass(frozen=True, slots=True)
class _Words:
    """Comparison words of a text with, per word, its unit index and whether it is sensitive."""

    words: list[str]
    unit_of: list[int]
    sensitive: list[bool]
    first_word: list[int]  # first word index of each unit, plus the total word count


def _comparable(word: str) -> tuple[str, ...]:
    """The comparison words of one spoken word: contractions expanded, "-tre" as "-ter", a unit
    of measure as its abbreviation ("millilitres" as "ml")."""
    if word in _CONTRACTED_WORDS:
        return _CONTRACTED_WORDS[word]
    for suffix, expanded in _CONTRACTED_SUFFIXES:
        if word.endswith(suffix) and len(word) > len(suffix):
            return word[: -len(suffix)], expanded
    word = _BRITISH_TRE.sub(r"ter\1", word)
    return (_UNIT_WORDS.get(word, word),)


def _words(readings: Sequence[tuple[str, ...]]) -> _Words:
    """Comparison words of units given as their spoken readings, one reading per unit."""
    words: list[str] = []
    unit_of: list[int] = []
    sensitive: list[bool] = []
    first_word: list[int] = []
    for index, spoken in enumerate(readings):
        first_word.append(len(words))
        for word in (w for s in spoken for w in _comparable(s)):
            words.append(word)
            unit_of.append(index)
            sensitive.append(_is_sensitive(word))
    first_word.append(len(words))
    return _Words(words, unit_of, sensitive, first_word)


def _is_sensitive(word: str) -> bool:
    """True for a number word, a word with a digit or a negation: never edited."""
    return word in _NUMBER_WORDS or is_protected(word)


def _digits(norm: str) -> str:
    """The decimal digits of a unit's comparison form, in order ("" when it has none)."""
    return "".join(ch for ch in norm if ch.isdecimal())


def _number_readings(source_units: Sequence[TextUnit]) -> dict[str, tuple[str, ...]]:
    """Digits -> spoken reading of the original's numbers whose digits have one reading only."""
    readings: dict[str, set[tuple[str, ...]]] = {}
    for unit in source_units:
        if key := _digits(unit.norm):
            readings.setdefault(key, set()).add(unit.spoken)
    return {key: next(iter(found)) for key, found in readings.items() if len(found) == 1}


def _heard_readings(transcript: str, heard_units: Sequence[TextUnit],
                    numbers: dict[str, tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Spoken readings of the transcript's units, with the recogniser's number formats resolved.

    A currency word before a plain number becomes one amount ("dollar 30" -> "$30"); two digit
    groups joined by one of "-/.:" become one number when the original has a number with those
    digits ("11-14" -> "11/14"); a number with the same digits as a number of the original reads
    like it ("915" -> "9:15"), and a unit of measure glued to it stays ("250ml" -> "250" read
    like the original's "250", then "ml"). A letter written right after "°" is dropped: the
    recogniser writes "25°C" as soon as it hears "twenty five degrees". Everything else keeps
    its own spoken form.
    """
    readings: list[tuple[str, ...]] = []
    index = 0
    while index < len(heard_units):
        unit = heard_units[index]
        spoken, key = unit.spoken, _digits(unit.norm)
        if transcript[unit.start - 1:unit.start] == "°" and len(unit.norm) == 1:
            index += 1
            continue
        if index + 1 < len(heard_units):
            after = heard_units[index + 1]
            between = transcript[unit.end:after.start]
            written = transcript[after.start:after.end]
            symbol = currency_symbol(unit.norm)
            if symbol and between.isspace() and _PLAIN_NUMBER.fullmatch(written):
                amount = text_units(symbol + written)
                if len(amount) == 1:
                    spoken, key = amount[0].spoken, _digits(written)
                    index += 1
            elif key and between in _DIGIT_JOINERS and key + _digits(after.norm) in numbers:
                key += _digits(after.norm)
                index += 1
        if key in numbers:
            number = _NUMBER_WITH_UNIT.fullmatch(unit.norm)
            unit_words = spoken[len(text_units(number[1])[0].spoken):] if number else ()
            spoken = (*numbers[key], *unit_words)
        readings.append(spoken)
        index += 1
    return readings


def _cost_matrix(heard: _Words, source: list[str], anchored: bool,
                 loose_from: int) -> tuple[np.ndarray, np.ndarray]:
    """DP matrix D[i, j] (doubled costs) of heard.words[:i] against source[:j], and the match
    table; heard words from index `loose_from` on (the transcript's final unit) with at least
    _LOOSE_LETTERS letters, neither sensitive, also match any non-sensitive source word."""
    codes: dict[str, int] = {}
    words = heard.words
    h = np.fromiter((codes.setdefault(w, len(codes)) for w in words), np.int64, len(words))
    s = np.fromiter((codes.setdefault(w, len(codes)) for w in source), np.int64, len(source))
    equal = h[:, None] == s[None, :]
    plain = np.fromiter((not _is_sensitive(w) for w in source), bool, len(source))
    for i in range(loose_from, len(words)):
        if not heard.sensitive[i] and len(words[i]) >= _LOOSE_LETTERS:
            equal[i] |= plain
    m, n = len(words), len(source)
    steps = np.arange(n + 1, dtype=np.int64) * _DELETE
    dp = np.empty((m + 1, n + 1), dtype=np.int64)
    dp[0] = steps if anchored else 0
    for i in range(1, m + 1):
        row = dp[i - 1] + _INSERT
        np.minimum(row[1:], dp[i - 1, :-1] + np.where(equal[i - 1], 0, _SUBSTITUTE),
                   out=row[1:])
        dp[i] = np.minimum.accumulate(row - steps) + steps  # left moves: deletions
    return dp, equal


_Path = list[tuple[str, int, int]]  # (move, heard word, source word) from the end backwards


def _optimal_paths(dp: np.ndarray, equal: np.ndarray, ends: Sequence[int],
                   anchored: bool) -> list[_Path] | None:
    """Every optimal alignment ending in a column of `ends`; None when there are more than
    _MAX_PATHS. Moves: "match", "substitute", "insert" (a heard word), "delete" (a source
    word); word indices are relative to the matrix."""
    paths: list[_Path] = []
    stack: list[tuple[int, int, tuple | None]] = [(dp.shape[0] - 1, end, None)
                                                  for end in reversed(ends)]
    while stack:
        i, j, trail = stack.pop()
        if i == 0 and (j == 0 or not anchored):
            path: _Path = []
            while trail is not None:
                path.append(trail[0])
                trail = trail[1]
            paths.append(path[::-1])
            if len(paths) > _MAX_PATHS:
                return None
            continue
        cur = int(dp[i, j])
        steps = []
        if i > 0 and j > 0:
            same = bool(equal[i - 1, j - 1])
            if int(dp[i - 1, j - 1]) + (0 if same else _SUBSTITUTE) == cur:
                steps.append(("match" if same else "substitute", i - 1, j - 1))
        if i > 0 and int(dp[i - 1, j]) + _INSERT == cur:
            steps.append(("insert", i - 1, j))
        if j > 0 and int(dp[i, j - 1]) + _DELETE == cur:
            steps.append(("delete", i, j - 1))
        for move, ni, nj in reversed(steps):
            stack.append((ni, nj, ((move, i - 1, j - 1), trail)))
    return paths


def _judge(path: _Path, heard: _Words, source: _Words, s_lo: int, final_from: int,
           final_counts: bool) -> tuple[str, int]:
    """(refusal reason or "", heard unit count) of one alignment (moves from the end).

    Refusals: an edit touching a sensitive word on either side; consecutive skipped original
    words spanning more than one unit; fewer than 3 exact matches before the first edit,
    counted from the end (REFERENCE 5.2 steps 9-10; a loose match of the final unit, see
    `_cost_matrix`, is not an edit but is not counted either). An original unit counts as heard only
    when all its words were matched by counted heard words. Heard words from `final_from` on
    are the transcript's final unit: a withheld one (`final_counts` False) anchors the tail but
    counts for nothing; a kept one counts toward one original unit only, the one its first
    matched word is in (a final "that's" may be "that" cut in half: it proves "that", not the
    "is" after it).
    """
    matched: set[int] = set()
    final: list[int] = []  # original words matched by the final unit, from the end
    tail, in_tail = 0, True
    deleted_units: set[int] = set()
    for move, hw, relative in path:
        sw = s_lo + relative
        if move == "match":
            if hw < final_from:
                matched.add(sw)
            else:
                final.append(sw)
            tail += in_tail and heard.words[hw] == source.words[sw]
            deleted_units.clear()
            continue
        in_tail = False
        if move == "delete":
            if source.sensitive[sw]:
                return "sensitive_edit", 0
            deleted_units.add(source.unit_of[sw])
            if len(deleted_units) > 1:
                return "deletion_gap", 0
            continue
        deleted_units.clear()
        if heard.sensitive[hw] or (move == "substitute" and source.sensitive[sw]):
            return "sensitive_edit", 0
    if tail < _TAIL_MATCHES:
        return "unanchored_tail", 0
    if final_counts and final:
        matched.update(w for w in final if source.unit_of[w] == source.unit_of[final[-1]])
    if not matched:
        return "", 0
    unit = source.unit_of[max(matched)]
    complete = all(w in matched for w in range(source.first_word[unit],
                                                source.first_word[unit + 1]))
    return "", unit + 1 if complete else unit


def _match(heard: _Words, source: _Words, columns: tuple[int, int], anchored: bool,
           max_error_rate: float, final_from: int, final_counts: bool) -> tuple[str, int]:
    """Align `heard` to source words [columns); (refusal reason or "accepted", unit count).

    Heard words from `final_from` on are the transcript's final unit: when it counts it also
    matches loosely (`_cost_matrix`); see `_judge`.
    """
    s_lo, s_hi = columns
    m = len(heard.words)
    if m == 0 or s_hi <= s_lo:
        return "insufficient_text", 0
    budget = 2 * math.floor(max_error_rate * m)
    dp, equal = _cost_matrix(heard, source.words[s_lo:s_hi], anchored,
                             final_from if final_counts else len(heard.words))
    last = dp[-1, 1:]
    best = int(last.min())
    if best > budget:
        return "edit_distance", 0
    ends = [int(end) + 1 for end in np.flatnonzero(last == best)]
    paths = _optimal_paths(dp, equal, ends, anchored)
    if paths is None:
        return "ambiguous_path", 0
    counts = set()
    for path in paths:
        reason, count = _judge(path, heard, source, s_lo, final_from, final_counts)
        if reason:
            return reason, 0
        counts.add(count)
    if max(counts) - min(counts) > _TIE_UNITS:
        return ("ambiguous_endpoint" if len(ends) > 1 else "ambiguous_path"), 0
    return "accepted", min(counts)


def align_prefix(
    original: str,
    transcript: str,
    *,
    expected_unit: int | None = None,
    from_start: bool = True,
    withhold_last: bool = True,
    max_error_rate: float = 0.2,
    window_units: int = 512,
) -> AlignResult:
    """Find the prefix of `original` that an ASR `transcript` of the played audio proves heard.

    Both texts become comparison words (spoken forms of `TextUnit.spoken`, contractions
    expanded; the transcript's number formats resolved, see the module doc); the transcript's
    m words are aligned to the original's words by edit distance (match 0, substitution 1,
    insertion of a transcript word 1, deletion of an original word 0.5), anchored at the start
    of the original (leading deletions are paid) with a free suffix (the unheard rest).

    The final transcript unit (it may be a word cut in half, or one the recogniser completed):
    with `withhold_last` (REFERENCE 5.2 step 11) it is aligned but never counted; without it,
    it also counts, toward one original unit only (a final "that's" proves "that", not the "is"
    after it), and a final word of 2 letters or more matches whatever original word it is
    aligned to (a misheard last word: speech was heard there), unless either is a number word,
    has a digit or is a negation; such a loose match does not count toward the 3 exact tail
    matches.
    When that alignment refuses, the transcript is aligned again without its final unit (so a
    fragment can neither tie nor unanchor the tail). Refusals (char_end None, the reason of the
    last alignment tried):

    - insufficient_text: the transcript has fewer than 3 units, or the original has none;
    - edit_distance: best cost > floor(max_error_rate * m);
    - ambiguous_endpoint / ambiguous_path: optimal alignments (ending in different / the same
      original word) whose cuts differ by more than one unit, or more than 256 of them; cuts
      that differ by one unit give the smaller one;
    - sensitive_edit: an edit (not a match) on any optimal alignment touches a number word, a
      word with a digit or a negation, on either side;
    - deletion_gap: consecutive deleted original words span more than one unit;
    - unanchored_tail: fewer than 3 exact matches at the end before the first edit.

    Accepted: an original unit counts as heard only when all its words were matched; the
    result is `cut_after_units(original, units, k)` for the last heard unit k - 1 (reason
    "accepted", heard_units k, possibly 0).

    Long texts: with the start anchored, a path ending at original word j deletes at least j - m
    words (0.5 each), so only the first m + 2 * floor(max_error_rate * m) (+8) original words
    can end an accepted alignment; only those columns are computed, so a long original is never
    refused for its length. A transcript that does not start at the start of the reply
    (`from_start` False: the caller transcribed only the end of the played audio) or that has
    more than `window_units` words (only its last `window_units` words are used) is aligned
    with a free start against the original words around `expected_unit` (the caller's estimate
    of the number of units heard by the end of the transcript's audio; default: as many
    original words as the transcript has, or the whole original when not `from_start`), from
    2 * window_units words before it to window_units words after it, with the same refusals;
    everything before the aligned part is taken as heard.

    Raises ValueError for max_error_rate outside [0, 1), window_units < 8 or a negative
    expected_unit.
    """
    if not 0 <= max_error_rate < 1:
        raise ValueError(f"max_error_rate {max_error_rate} outside [0, 1)")
    if window_units < 8:
        raise ValueError(f"window_units {window_units} < 8")
    if expected_unit is not None and expected_unit < 0:
        raise ValueError(f"expected_unit {expected_unit} < 0")
    source_units = text_units(original)
    heard_units = text_units(transcript)
    if len(heard_units) < _MIN_HEARD_UNITS or not source_units:
        return AlignResult(None, "insufficient_text", 0)
    source = _words([("degrees", *unit.spoken) if original[unit.start - 1:unit.start] == "°"
                     else unit.spoken for unit in source_units])
    readings = _heard_readings(transcript, heard_units, _number_readings(source_units))
    # with the final unit, then (when that refuses) without it: a fragment can then neither
    # tie nor unanchor the tail
    for attempt in (readings, readings[:-1]):
        heard = _words(attempt)
        final_from = heard.first_word[-2] if attempt is readings else len(heard.words)
        reason, count = _align_words(source, heard, final_from, not withhold_last,
                                     len(source_units), from_start, expected_unit,
                                     max_error_rate, window_units)
        if reason == "accepted":
            return AlignResult(cut_after_units(original, source_units, count), reason, count)
    return AlignResult(None, reason, 0)


def _align_words(source: _Words, heard: _Words, final_from: int, final_counts: bool,
                 unit_count: int, from_start: bool, expected_unit: int | None,
                 max_error_rate: float, window_units: int) -> tuple[str, int]:
    """Choose the anchored or windowed alignment of `align_prefix` and run it (heard words
    from `final_from` on are the transcript's final unit, see `_judge`)."""
    n, total = len(source.words), len(heard.words)
    if from_start and total <= window_units:
        budget = 2 * math.floor(max_error_rate * total)
        return _match(heard, source, (0, min(n, total + budget + _COLUMN_MARGIN)), True,
                      max_error_rate, final_from, final_counts)
    if total > window_units:
        first = heard.unit_of[total - window_units]
        if heard.first_word[first] < total - window_units:
            first += 1  # whole units only
        final_from -= heard.first_word[first]
        heard = _Words(heard.words[heard.first_word[first]:],
                       [u - first for u in heard.unit_of[heard.first_word[first]:]],
                       heard.sensitive[heard.first_word[first]:],
                       [w - heard.first_word[first] for w in heard.first_word[first:]])
    if expected_unit is not None:
        centre = source.first_word[min(expected_unit, unit_count)]
        columns = (max(0, centre - 2 * window_units), min(n, centre + window_units))
    elif from_start:
        columns = (max(0, total - 2 * window_units), min(n, total + window_units))
    else:
        columns = (0, n)
    return _match(heard, source, columns, False, max_error_rate, final_from, final_counts)
