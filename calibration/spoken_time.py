"""Where each written unit sits in time when the TTS gave no word marks (the ratio estimate).

Only the complete audio duration is known, so the estimate spreads it over a model of how long
each unit is spoken and claims a unit only when it ended under every model a margin in ms
before the cut. Two models, because voices differ:

- **word model**: every spoken word takes the same time, a CJK / kana / Hangul unit 0.625 of it
  (the uniform timing rule of the interruption cases file: 400 ms / 250 ms, no pauses), once
  on the written units (as the uniform test voice reads them, URLs whole) and once on their
  spoken form (`spoken_words`: the speakable text the server sends to Piper and espeak-ng,
  `calibration.speakable`, where a code block is one short phrase and tool-call JSON nothing);
- **speech model**: a spoken word of the spoken form takes WORD_BEATS plus one beat per letter
  (`units.TextUnit.spoken`: "$9.05" -> nine dollars and five cents, "+" -> plus), a CJK unit
  CJK_BEATS, and a pause follows a sentence end, a clause mark or a line end (`*_PAUSE_BEATS`).
  Written units the engines do not say (a URL's scheme, "www." and path, markup, JSON, the
  lines of a code block after its phrase) take no time.

Source of the speech model's constants: a least-squares fit of the time from each word's start
to the next word's start on Piper's own word marks of benchmarks/calibration_corpus.txt (about
3200 words of 42 replies, the URL reply left out; joe voice, deterministic): 50.7 ms per spoken
word + 51.5 ms per spoken letter, and pauses of 283 ms after a sentence end, 308 ms after a
clause mark, 171 ms at a line end (RMS error 101 ms per word; by syllables instead of letters
117 ms). The word models keep the public cases exact on the uniform test voice; on Piper the
speech model decides. A cut is an estimate and says so (method "ratio"). Nothing here does
I/O.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache

from calibration import units
from calibration.speakable import make_speakable
from calibration.units import TextUnit

RATIO_MARGIN_MS = 200
"""Speech model: time left out at the cut (ms), before RATIO_DRIFT_PERCENT."""

RATIO_DRIFT_PERCENT = 6
"""Speech model: share (per cent) of the distance from played_ms to the nearer end of the audio,
min(played_ms, complete - played_ms), left out on top of RATIO_MARGIN_MS: the model's error in
time grows with the distance from both ends of the reply, where the complete duration pins it.
Measured on the corpus of benchmarks/bench_calibration.py (every 250 ms of 43 Piper replies,
3839 cuts, marks removed; the word model with its own margin as here): with (margin ms, drift %)
= (0, 0) / (100, 5) / (100, 6) / (150, 6) / (200, 6) / (250, 6), 696 / 13 / 1 / 0 / 0 / 0 cuts
claimed a word that had not started, losing 0.72 / 3.89 / 4.70 / 4.84 / 4.99 / 5.15 fully
played words per cut; 200 keeps a headroom of 50 ms. The largest lag of a real word start
behind the model, 2.5 s, is 113 s into a 178 s reply (its speaker is about 6 % slower than the
model over the first 11 s, which the rest of the reply makes up)."""

WORD_MODEL_MARGIN_MS = 90
"""Time the word model leaves out at the cut (ms). At most 100: the public interruption case F19
("2 + 2 = 4. Anything else?", no marks, uniform voice, cut at 1700 ms) must keep "2 + 2 =", whose
last word ends at 1600 ms."""

WORD_BEATS = 1
"""Speech model: beats of one spoken word besides its letters (50.7 ms / 51.5 ms per letter)."""
LETTER_NAME_BEATS = 3
"""Speech model: least letter beats of a spoken word: a spelled letter ("SQL" -> s q l, "U.S.")
is said as its name ("ess"), not as one sound."""
CJK_BEATS = 4
"""Speech model: beats of one CJK / kana / Hangul unit (a syllable, 250 ms in the timing rule)."""
SENTENCE_PAUSE_BEATS = 6
"""Speech model: beats of the pause after a sentence end (283 ms / 51.5 ms)."""
CLAUSE_PAUSE_BEATS = 6
"""Speech model: beats of the pause after a comma, colon, semicolon or dash (308 ms / 51.5 ms)."""
LINE_PAUSE_BEATS = 3
"""Speech model: beats of the pause at a line end (a list item without a full stop; 171 ms)."""

WORD_MODEL_WORD = 8
"""Word model: eighths of one spoken word."""
WORD_MODEL_CJK = 5
"""Word model: eighths of one CJK / kana / Hangul unit (250 ms / 400 ms = 0.625)."""

_SENTENCE_END = re.compile(r"[\u3002\uff01\uff1f]|[.!?][\s\"')\]*_]")
_CLAUSE_MARK = re.compile(r"[,;:\u2013\u2014\u3001\uff0c\uff1b\uff1a]|\s-\s")


def _pause_beats(gap: str) -> int:
    """Speech model pause (beats) for the text between two units (a "." between two units with
    nothing else, as in "example.com", ends no sentence)."""
    if _SENTENCE_END.search(gap):
        return SENTENCE_PAUSE_BEATS
    if "\n" in gap:
        return LINE_PAUSE_BEATS
    if _CLAUSE_MARK.search(gap):
        return CLAUSE_PAUSE_BEATS
    return 0


def _speech_beats(unit: TextUnit, spoken: tuple[str, ...]) -> int:
    """Speech model length (beats) of one unit whose spoken words are `spoken`."""
    if unit.cjk:
        return CJK_BEATS
    return sum(WORD_BEATS + max(len(word), LETTER_NAME_BEATS) for word in spoken)


def _timeline(weights: list[int], pauses: list[int]) -> tuple[tuple[int, int], ...]:
    """(start, end) of each unit when unit i lasts weights[i] and pauses[i] follows it; a unit of
    weight 0 (said with a neighbour, like a URL's path) sits at the start of the next unit that
    takes time, so it counts only together with that one."""
    spans: list[tuple[int, int]] = []
    waiting: list[int] = []
    now = 0
    for weight, pause in zip(weights, pauses, strict=True):
        if weight == 0:
            waiting.append(len(spans))
        else:
            for index in waiting:
                spans[index] = (now, now)
            waiting.clear()
        spans.append((now, now + weight))
        now += weight + pause
    for index in waiting:
        spans[index] = (now, now)
    return tuple(spans)


def spoken_words(text: str) -> tuple[tuple[str, ...], ...]:
    """The words Piper and espeak-ng say for each unit of `units.text_units(text)`, in
    comparison form: those of the unit's part of the speakable text (`speakable.make_speakable`,
    what the server sends to the engines), () for a unit that is not spoken (tool-call JSON, a
    table's pipes, a URL's path). A phrase that stands for a span of units ("a python code block
    of 8 lines, shown on the page.", "a formula", "a hash") belongs to the first unit of that
    span; the span's other units are not spoken. Characters copied from between units
    (punctuation, spaces) belong to none. A unit spoken as written keeps its own
    `TextUnit.spoken` ("$9.05" -> nine dollars and five cents)."""
    text_units = units.text_units(text)
    speakable = make_speakable(text)
    ends = [unit.end for unit in text_units]
    pieces: list[list[str]] = [[] for _ in text_units]
    identical = [True] * len(text_units)
    for char, (source, source_end) in zip(speakable.text, speakable.sources, strict=True):
        index = bisect_right(ends, source)
        if index < len(text_units) and text_units[index].start < source_end:
            pieces[index].append(char)
            identical[index] &= text[source] == char
    words: list[tuple[str, ...]] = []
    for unit, piece, same in zip(text_units, pieces, identical, strict=True):
        spoken = "".join(piece)
        if same and spoken == text[unit.start : unit.end]:
            words.append(unit.spoken)
        else:
            words.append(tuple(word for part in units.text_units(spoken) for word in part.spoken))
    return tuple(words)


@lru_cache(maxsize=64)
def unit_times(text: str) -> tuple[tuple[tuple[int, int], ...], ...]:
    """(start, end) of every unit of `units.text_units(text)` on each model's own scale (eighths
    of a word, or beats; the last end is the model's total), in this order: the word model
    reading the written units (as the uniform test voice does, URLs whole), the word model
    reading the spoken form (`spoken_words`: the speakable text Piper and espeak-ng read), and
    the speech model (spoken form)."""
    text_units = units.text_units(text)
    spoken = spoken_words(text)
    silent = [not words for words in spoken]
    written = [WORD_MODEL_CJK if unit.cjk else WORD_MODEL_WORD * len(unit.spoken)
               for unit in text_units]
    said = [0 if quiet else WORD_MODEL_CJK if unit.cjk else WORD_MODEL_WORD * len(words)
            for unit, words, quiet in zip(text_units, spoken, silent, strict=True)]
    pauses = [0 if index + 1 == len(text_units) or silent[index + 1]
              else _pause_beats(text[unit.end : text_units[index + 1].start])
              for index, unit in enumerate(text_units)]
    return (
        _timeline(written, [0] * len(written)),
        _timeline(said, [0] * len(said)),
        _timeline([0 if quiet else _speech_beats(unit, words)
                   for unit, words, quiet in zip(text_units, spoken, silent, strict=True)],
                  pauses),
    )


def heard_units(text: str, played_ms: int, complete_ms: int) -> int:
    """Units of `units.text_units(text)` the ratio estimate counts as heard at `played_ms` of
    `complete_ms` ms of audio (both > 0 expected; 0 when not).

    A unit counts when, scaled to `complete_ms`, both word models end it by played_ms -
    WORD_MODEL_MARGIN_MS and the speech model by played_ms - RATIO_MARGIN_MS -
    RATIO_DRIFT_PERCENT of min(played_ms, complete_ms - played_ms) (`unit_times`); so does
    every unit before it. played_ms beyond complete_ms counts as complete_ms. The final unit is
    always withheld (the reply was not fully heard, else it would not be calibrated;
    REFERENCE.md 5.3 step 5).
    """
    text_units = units.text_units(text)
    if not text_units or played_ms <= 0 or complete_ms <= 0:
        return 0
    played_ms = min(played_ms, complete_ms)
    count = len(text_units) - 1
    nearer = min(played_ms, complete_ms - played_ms)
    word_budget = played_ms - WORD_MODEL_MARGIN_MS
    budgets = (word_budget, word_budget,
               played_ms - RATIO_MARGIN_MS - RATIO_DRIFT_PERCENT * nearer / 100)
    for times, budget in zip(unit_times(text), budgets, strict=True):
        total = times[-1][1]
        if total == 0:
            continue
        ends = [end * complete_ms / total for _, end in times]
        count = min(count, bisect_right(ends, budget))
    return max(count, 0)


def expected_units(text: str, end_ms: int, complete_ms: int) -> int:
    """Central estimate of the units spoken by `end_ms` of `complete_ms` (the speech model, no
    margin): a window hint for the ASR aligner, not a cut."""
    times = unit_times(text)[-1]
    if not times or complete_ms <= 0 or times[-1][1] == 0:
        return 0
    ends = [end * complete_ms / times[-1][1] for _, end in times]
    return bisect_right(ends, end_ms)
