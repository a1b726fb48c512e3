"""ASR transcript -> heard prefix of the original reply: an edit-distance prefix matcher.

Source: REFERENCE.md section 5.2 (the Qwen3-Omni `asr_prefix` matcher: DP anchored at the start
of the original with a free suffix, refusal on ties, on edits to protected units, on fewer than 3
heard units and on an unanchored tail; the final recognised unit is withheld), improved as
REFERENCE.md section 8 items 2, 4 and 5 suggest and with the costs measured in DESIGN.md
section 6 (a skipped original word costs 0.5):

- both texts are compared as spoken-form words (calibration.units), so ASR "twenty five" or "25"
  matches written "25" or "twenty-five", "nine dollars and five cents" matches "$9.05" and
  "doctor" matches "Dr.";
- long replies are never refused for their length (see `align_prefix`).

Pure computation (numpy for the DP rows); no I/O, no logging.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from calibration.units import (
    TextUnit,
    cardinal_words,
    cut_after_units,
    ordinal_words,
    text_units,
)

# Costs, doubled so that they stay integers (REFERENCE 5.2 with DESIGN 6's deletion cost 0.5).
_DELETE = 1  # an original word the transcript skipped: 0.5
_INSERT = 2  # a transcript word that is not in the original: 1
_SUBSTITUTE = 2  # a transcript word in place of a different original word: 1
_INF = 1 << 40

_TAIL_MATCHES = 3  # REFERENCE 5.2 step 10: tail_guard_units (1) + 2
_MIN_HEARD_UNITS = 3  # REFERENCE 5.2 step 3
_COLUMN_MARGIN = 8

# Words whose edit changes a quantity even when the written unit holds no digit ("fifteen"
# written out, CJK numerals); treated like protected units.
_NUMBER_WORDS = frozenset(
    {w for n in [*range(20), *range(20, 100, 10), 100, 1000, 10**6, 10**9]
     for w in (*cardinal_words(n), *ordinal_words(n))}
    | {"point", "minus", "half", "halves", "quarter", "quarters"}
    | set("〇零一二两三四五六七八九十百千万亿")
)


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
    """Spoken-form words of a text with, per word, its unit index and whether it is sensitive."""

    words: list[str]
    unit_of: list[int]
    sensitive: list[bool]
    first_word: list[int]  # first word index of each unit, plus the total word count


def _words(units: list[TextUnit]) -> _Words:
    words: list[str] = []
    unit_of: list[int] = []
    sensitive: list[bool] = []
    first_word: list[int] = []
    for index, unit in enumerate(units):
        first_word.append(len(words))
        for word in unit.spoken:
            words.append(word)
            unit_of.append(index)
            sensitive.append(unit.protected or word in _NUMBER_WORDS)
    first_word.append(len(words))
    return _Words(words, unit_of, sensitive, first_word)


def _refuse(reason: str) -> AlignResult:
    return AlignResult(None, reason, 0)


def _cost_matrix(heard: list[str], source: list[str], anchored: bool) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    """DP matrix D[i, j] (doubled costs) of heard[:i] against source[:j], and the match table."""
    codes: dict[str, int] = {}
    h = np.fromiter((codes.setdefault(w, len(codes)) for w in heard), np.int64, len(heard))
    s = np.fromiter((codes.setdefault(w, len(codes)) for w in source), np.int64, len(source))
    equal = h[:, None] == s[None, :]
    m, n = len(heard), len(source)
    steps = np.arange(n + 1, dtype=np.int64) * _DELETE
    dp = np.empty((m + 1, n + 1), dtype=np.int64)
    dp[0] = steps if anchored else 0
    for i in range(1, m + 1):
        row = dp[i - 1] + _INSERT
        np.minimum(row[1:], dp[i - 1, :-1] + np.where(equal[i - 1], 0, _SUBSTITUTE),
                   out=row[1:])
        dp[i] = np.minimum.accumulate(row - steps) + steps  # left moves: deletions
    return dp, equal


def _walk(dp: np.ndarray, equal: np.ndarray, end: int, anchored: bool, heard: _Words,
          h_offset: int, source: _Words, s_offset: int) -> tuple[str, list[tuple[int, int]]]:
    """Backtrack the unique optimal path from (m, end); returns (reason, matches).

    reason is "" when the path is unique and clean. matches are (heard word, source word) index
    pairs (absolute, in path order from the end).
    """
    i, j = dp.shape[0] - 1, end
    matches: list[tuple[int, int]] = []
    tail = 0
    in_tail = True
    deleted_units: set[int] = set()
    while i > 0 or (anchored and j > 0):
        cur = int(dp[i, j])
        moves = []
        if i > 0 and j > 0 and int(dp[i - 1, j - 1]) + (0 if equal[i - 1, j - 1]
                                                        else _SUBSTITUTE) == cur:
            moves.append("diagonal")
        if i > 0 and int(dp[i - 1, j]) + _INSERT == cur:
            moves.append("insert")
        if j > 0 and int(dp[i, j - 1]) + _DELETE == cur:
            moves.append("delete")
        if len(moves) != 1:
            return "ambiguous_path", matches
        move = moves[0]
        hw, sw = h_offset + i - 1, s_offset + j - 1
        if move == "diagonal" and equal[i - 1, j - 1]:
            matches.append((hw, sw))
            tail += in_tail
            deleted_units.clear()
            i, j = i - 1, j - 1
            continue
        in_tail = False
        if move == "delete":
            if source.sensitive[sw]:
                return "sensitive_edit", matches
            deleted_units.add(source.unit_of[sw])
            if len(deleted_units) > 1:
                return "deletion_gap", matches
            j -= 1
            continue
        deleted_units.clear()
        if heard.sensitive[hw] or (move == "diagonal" and source.sensitive[sw]):
            return "sensitive_edit", matches
        i, j = (i - 1, j - 1) if move == "diagonal" else (i - 1, j)
    if tail < _TAIL_MATCHES:
        return "unanchored_tail", matches
    return "", matches


def align_prefix(
    original: str,
    transcript: str,
    *,
    expected_unit: int | None = None,
    max_error_rate: float = 0.2,
    window_units: int = 512,
) -> AlignResult:
    """Find the prefix of `original` that an ASR `transcript` of the played audio proves heard.

    Both texts become spoken-form words (`TextUnit.spoken`); the transcript's m words are aligned
    to the original's words by edit distance (match 0, substitution 1, insertion of a transcript
    word 1, deletion of an original word 0.5), anchored at the start of the original (leading
    deletions are paid) with a free suffix (the unheard rest). Refusals (char_end None):

    - insufficient_text: the transcript has fewer than 3 units, or the original has none;
    - edit_distance: best cost > floor(max_error_rate * m);
    - ambiguous_endpoint: more than one endpoint attains the best cost;
    - ambiguous_path: a tie between moves anywhere on the optimal path;
    - sensitive_edit: an edit (not a match) touches a word of a protected unit on either side
      (digits, negations) or a number word; spoken-form equivalents ("25" vs "twenty five") match
      and are not edits;
    - deletion_gap: consecutive deleted original words span more than one unit;
    - unanchored_tail: the last 3 transcript words are not exact, contiguous matches.

    Accepted: the last transcript unit is withheld (ASR may complete a word that was cut); an
    original unit counts as heard only when all its spoken words were matched; the result is
    `cut_after_units(original, units, k)` for the last heard unit k - 1 (reason "accepted",
    heard_units k, possibly 0).

    Long texts: with the start anchored, a path ending at original word j deletes at least j - m
    words (0.5 each), so only the first m + 2 * floor(max_error_rate * m) (+8) original words
    can end an accepted alignment (at most ceil(1.5 m) + 8 for rates up to 0.25); only those
    columns are computed, so a long original is never refused for its length. When the
    transcript itself has more than `window_units` words (it covers long played audio), only its
    last `window_units` words are aligned, against the original words around `expected_unit`
    (the caller's estimate of the heard unit count, e.g. from played/total audio; default: as
    many original words as the transcript has) from 2 * window_units words before it to
    window_units words after it, with a free start inside that window and the same refusals;
    everything before the aligned window is taken as heard.

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
        return _refuse("insufficient_text")
    source = _words(source_units)
    heard = _words(heard_units)
    total = len(heard.words)
    anchored = total <= window_units
    h_lo = 0 if anchored else total - window_units
    m = total - h_lo
    budget = 2 * math.floor(max_error_rate * m)
    if anchored:
        s_lo, s_hi = 0, min(len(source.words), m + budget + _COLUMN_MARGIN)
    else:
        centre = total if expected_unit is None else source.first_word[
            min(expected_unit, len(source_units))]
        s_lo = max(0, centre - 2 * window_units)
        s_hi = min(len(source.words), centre + window_units)
    dp, equal = _cost_matrix(heard.words[h_lo:], source.words[s_lo:s_hi], anchored)
    last = dp[-1, 1:]
    best = int(last.min())
    if best > budget:
        return _refuse("edit_distance")
    ends = np.flatnonzero(last == best)
    if ends.size != 1:
        return _refuse("ambiguous_endpoint")
    reason, matches = _walk(dp, equal, int(ends[0]) + 1, anchored, heard, h_lo, source, s_lo)
    if reason:
        return _refuse(reason)
    withheld = heard.unit_of[-1]
    matched = {sw for hw, sw in matches if heard.unit_of[hw] != withheld}
    if not matched:
        return AlignResult(0, "accepted", 0)
    unit = source.unit_of[max(matched)]
    complete = all(w in matched for w in range(source.first_word[unit],
                                                source.first_word[unit + 1]))
    count = unit + 1 if complete else unit
    return AlignResult(cut_after_units(original, source_units, count), "accepted", count)
