"""Align a TTS's phoneme words to the written words of the same text, degrading locally.

Piper (`piper_tts`) says a text as phoneme words with exact sample spans, but its words do not
always pair one to one with the written words espeak-ng reports (WORD events with their
phonemes, `espeak_tts`): espeak-ng's clause split glues two words into one phoneme word
("cat cat" -> one phoneme word every ~150 words), and a symbol may be read differently ("-" as
"dash"). A word-level sequence alignment on the phonemes (edit distance with merge and split
steps, as in the forced-alignment literature's word-level DTW) anchors on the words that match
and estimates only the words between two anchors, so one mismatch costs only the words around
it instead of the whole sentence.

Sans-I/O: plain functions over phoneme strings and sample spans.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

_IGNORED = frozenset("\u02c8\u02cc\u02b2 ")
"""Left out of phoneme comparisons: primary / secondary stress and the linking palatalisation
mark espeak-ng adds between words (U+02B2), which differ with the context of a word."""

MATCH_MAX_DISTANCE = 0.5
"""Largest normalised edit distance (edits / longer length) at which an aligned pair is taken as
the same word and its timing as exact; context changes a word's reduced vowels, not its
consonant frame, so the same word stays well below this."""

BAND_WORDS = 12
"""Half-width of the alignment band around the diagonal, in words (beyond the length
difference): a mismatch shifts the two lists by a word or two, never by a dozen."""

_STEP_PENALTY = 0.05
"""Extra cost of a merge or split step over a one-to-one pair of the same total distance."""


@dataclass(frozen=True, slots=True)
class PhonemeWord:
    """One spoken word of a TTS run: its phonemes with their sample spans.

    Attributes:
        phonemes: (phoneme, start sample, end sample) per phoneme, in order, contiguous.
    """

    phonemes: tuple[tuple[str, int, int], ...]

    @property
    def start(self) -> int:
        """First sample of the word."""
        return self.phonemes[0][1]

    @property
    def end(self) -> int:
        """Sample after the word's last sample."""
        return self.phonemes[-1][2]

    @property
    def text(self) -> str:
        """The phonemes joined."""
        return "".join(phoneme for phoneme, _, _ in self.phonemes)


@dataclass(frozen=True, slots=True)
class WordTiming:
    """Where one written word sounds: samples [start, end) of the TTS run; `exact` when taken
    from the word's own phonemes, False when interpolated between exact neighbours."""

    start: int
    end: int
    exact: bool


def comparison_form(phonemes: str) -> str:
    """NFD phonemes without stress marks, linking marks and spaces (see `_IGNORED`)."""
    return "".join(ch for ch in unicodedata.normalize("NFD", phonemes) if ch not in _IGNORED)


@functools.lru_cache(maxsize=4096)
def distance(first: str, second: str) -> float:
    """Levenshtein distance of two comparison forms divided by the longer length (0..1); 1
    when exactly one of them is empty, 0 when both are."""
    if not first or not second:
        return float(bool(first or second))
    previous = list(range(len(second) + 1))
    for i, a in enumerate(first, 1):
        current = [i]
        for j, b in enumerate(second, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1] / max(len(first), len(second))


def align_words(
    written: Sequence[str], spoken: Sequence[PhonemeWord], *, free_end: bool = False
) -> tuple[list[WordTiming], int]:
    """Time the written words (their phonemes, e.g. espeak-ng's) on the spoken phoneme words.

    Steps of the alignment (cost): a pair (distance), two written words in one spoken word or
    one written word over two spoken words (distance of the joined forms + a small penalty), a
    written word with no spoken word (1; 0 when it has no phonemes: a silent symbol) and a
    spoken word with no written word (1: a symbol read aloud only by the TTS, e.g. "dash").
    With `free_end`, written words after the last spoken one may stay unaligned at no cost
    (the rest of the text belongs to the next TTS chunk).

    Returns (timings of the aligned written words, how many were aligned: all unless
    `free_end`). A pair or split within MATCH_MAX_DISTANCE is exact; a merge is exact when the
    spoken word's phonemes split into the two written forms exactly (the boundary phoneme is
    known), else both are estimated; a silent written word is exact and empty; every other
    written word is interpolated (estimated) between its exact neighbours by phoneme length.
    Empty `spoken` gives estimated empty timings at sample 0.
    """
    forms = [comparison_form(word) for word in written]
    said = [comparison_form(word.text) for word in spoken]
    count, steps = _best_path(forms, said, free_end=free_end)
    timings: list[WordTiming | None] = [None] * count
    for kind, i, j in steps:
        if kind == "pair" and distance(forms[i], said[j]) <= MATCH_MAX_DISTANCE:
            timings[i] = WordTiming(spoken[j].start, spoken[j].end, True)
        elif kind == "split" and distance(forms[i], said[j] + said[j + 1]) <= MATCH_MAX_DISTANCE:
            timings[i] = WordTiming(spoken[j].start, spoken[j + 1].end, True)
        elif kind == "merge":
            boundary = _split_point(spoken[j], forms[i], forms[i + 1])
            if boundary is not None:
                timings[i] = WordTiming(spoken[j].start, boundary, True)
                timings[i + 1] = WordTiming(boundary, spoken[j].end, True)
    return _interpolate(timings, forms, spoken), count


def _best_path(
    forms: Sequence[str], said: Sequence[str], *, free_end: bool
) -> tuple[int, list[tuple[str, int, int]]]:
    """Minimum-cost alignment (see `align_words`): (written words aligned, steps in order),
    each step (kind, written index, spoken index) for kinds "pair", "split", "merge"."""
    n, m = len(forms), len(said)
    band = BAND_WORDS + abs(n - m)
    infinity = float("inf")
    cost = [[infinity] * (m + 1) for _ in range(n + 1)]
    back: list[list[tuple[int, int, str] | None]] = [[None] * (m + 1) for _ in range(n + 1)]
    cost[0][0] = 0.0

    def relax(i: int, j: int, ni: int, nj: int, step: float, kind: str) -> None:
        if ni <= n and nj <= m and cost[i][j] + step < cost[ni][nj]:
            cost[ni][nj] = cost[i][j] + step
            back[ni][nj] = (i, j, kind)

    for i in range(n + 1):
        center = i * m // max(n, 1)
        for j in range(max(0, center - band), min(m, center + band) + 1):
            if cost[i][j] == infinity:
                continue
            if i < n:
                relax(i, j, i + 1, j, float(bool(forms[i])), "skip")
            if j < m:
                relax(i, j, i, j + 1, 1.0, "extra")
            if i < n and j < m:
                relax(i, j, i + 1, j + 1, distance(forms[i], said[j]), "pair")
            if i + 1 < n and j < m:
                joined = distance(forms[i] + forms[i + 1], said[j])
                relax(i, j, i + 2, j + 1, joined + _STEP_PENALTY, "merge")
            if i < n and j + 1 < m:
                joined = distance(forms[i], said[j] + said[j + 1])
                relax(i, j, i + 1, j + 2, joined + _STEP_PENALTY, "split")
    end = n
    if free_end:
        end = min(range(n + 1), key=lambda i: (cost[i][m], -i))
    steps: list[tuple[str, int, int]] = []
    i, j = end, m
    while (i, j) != (0, 0):
        pointer = back[i][j]
        if pointer is None:
            break
        i, j, kind = pointer
        steps.append((kind, i, j))
    steps.reverse()
    return end, steps


def _split_point(word: PhonemeWord, first: str, second: str) -> int | None:
    """Sample at which `word` says `first` then `second` (comparison forms), or None when its
    phonemes are not exactly those two words."""
    for index in range(1, len(word.phonemes)):
        head = comparison_form("".join(p for p, _, _ in word.phonemes[:index]))
        if head == first:
            tail = comparison_form("".join(p for p, _, _ in word.phonemes[index:]))
            return word.phonemes[index][1] if tail == second else None
        if len(head) > len(first):
            return None
    return None


def _interpolate(
    timings: Sequence[WordTiming | None], forms: Sequence[str], spoken: Sequence[PhonemeWord]
) -> list[WordTiming]:
    """Fill the untimed words: a silent one gets an exact empty span where it stands, a run of
    spoken ones shares the samples between its timed neighbours (or the first / last spoken
    sample) in proportion to phoneme length, estimated."""
    start_of_speech = spoken[0].start if spoken else 0
    end_of_speech = spoken[-1].end if spoken else 0
    result: list[WordTiming] = []
    index = 0
    while index < len(timings):
        timing = timings[index]
        if timing is not None:
            result.append(timing)
            index += 1
            continue
        stop = index
        while stop < len(timings) and timings[stop] is None:
            stop += 1
        low = result[-1].end if result else start_of_speech
        following = timings[stop] if stop < len(timings) else None
        high = max(low, following.start if following is not None else end_of_speech)
        weights = [len(forms[k]) for k in range(index, stop)]
        total = sum(weights)
        done = 0
        for weight in weights:
            begin = low + (high - low) * done // max(total, 1)
            done += weight
            end = low + (high - low) * done // max(total, 1)
            result.append(WordTiming(begin, end, weight == 0 and bool(spoken)))
        index = stop
    return result
