"""The text-to-speech interface every engine implements, and what engines share.

`SpeechSynthesizer` is the engine protocol; `SpeechChunk` is what `synthesize` yields (audio
plus word marks); `WordLocator` places an engine's words on the written units of the text. The
engines (`server.speech.piper_tts`, `espeak_tts`, `uniform_tts`) import this module; the
registry that names them is `server.speech.engines`, so no import circle exists. Each
`synthesize` call gets one written segment and yields chunks whose marks index that segment
and the chunk's own audio; a `StopSignal` set from another thread ends it early.
"""

from __future__ import annotations

import bisect
import contextlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from calibration.speakable import SpeakableText
from calibration.units import text_units
from calibration.word_marks import WordMark


@dataclass(frozen=True, slots=True)
class SpeechChunk:
    """A piece of synthesized audio and the written words spoken in it.

    Attributes:
        pcm: float32 mono samples in [-1, 1] at the synthesizer's `sample_rate_hz`.
        marks: word marks, char offsets relative to the text given to `synthesize()`, ms relative
            to this chunk's first sample; () when the engine gives no timings.
    """

    pcm: np.ndarray
    marks: tuple[WordMark, ...]


class StopSignal:
    """Tells one running synthesis, from any thread, that nobody will hear the rest.

    Set once, never cleared. An engine checks `is_set()` between the pieces it synthesizes and
    registers, around a long blocking call (Piper's ONNX run of a whole sentence), a hook with
    `interrupting` that makes the call return early; `set()` runs that hook on the setting
    thread, so the engine and its lock are free within milliseconds instead of after the
    sentence.
    """

    def __init__(self) -> None:
        """An unset signal."""
        self._lock = threading.Lock()
        self._set = False
        self._hooks: list[Callable[[], None]] = []

    def set(self) -> None:
        """Set the signal and run the registered interrupt hooks (only the first call does)."""
        with self._lock:
            if self._set:
                return
            self._set = True
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    def is_set(self) -> bool:
        """True once `set()` was called."""
        return self._set

    @contextlib.contextmanager
    def interrupting(self, hook: Callable[[], None]) -> Iterator[None]:
        """Run the block with `hook` registered: `set()` calls it while the block runs (it is
        called at once when the signal is already set). The hook may still run just after the
        block ends (a race with `set()`), so it must be harmless then."""
        with self._lock:
            already = self._set
            if not already:
                self._hooks.append(hook)
        if already:
            hook()
        try:
            yield
        finally:
            with self._lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)


class SpeechSynthesizer(Protocol):
    """A TTS engine. `synthesize` blocks and is thread-safe (each engine has its own lock)."""

    name: str
    sample_rate_hz: int

    def warm_up(self) -> None:
        """Load models and run one short synthesis so that the first reply is fast."""

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        """Yield the chunks of one written segment (nothing when it has nothing speakable).

        Once `stop` is set the engine yields nothing more and releases the voice within one
        piece of work (its documented granularity); the chunk being computed is dropped.
        """


def samples_to_ms(start: int, end: int, sample_rate_hz: int) -> tuple[int, int]:
    """Convert a sample span to (start_ms rounded down, end_ms rounded up)."""
    return start * 1000 // sample_rate_hz, -(-end * 1000 // sample_rate_hz)


_TOKEN = re.compile(r"\S+")


class WordLocator:
    """Places an engine's words on the written units of the original text of a segment.

    Engine words are located by their start offset in the speakable text (espeak-ng WORD events),
    mapped back to the original text and snapped to `calibration.units.text_units` of it, so a
    mark always covers whole written tokens ("$9.05", "Dr.", "3/4") and never emoji or markup.
    A unit is *spoken* when some of its characters are in the speakable text (a URL's scheme and
    path are not).
    """

    def __init__(self, speakable: SpeakableText) -> None:
        """Compute the written units of `speakable.original` and which of them are spoken."""
        self._speakable = speakable
        self._units = text_units(speakable.original)
        self._unit_starts = [unit.start for unit in self._units]
        kept = bytearray(len(speakable.original))
        for start, end in speakable.sources:
            kept[start:end] = b"\x01" * (end - start)
        self._spoken = [any(kept[unit.start : unit.end]) for unit in self._units]
        tokens = [match.end() for match in _TOKEN.finditer(speakable.original)]
        self._token = [bisect.bisect_right(tokens, unit.start) for unit in self._units]

    def word_units(self, speakable_starts: Sequence[int]) -> list[tuple[int, int]]:
        """Return, per engine word (start offsets into the speakable text, in spoken order), the
        inclusive range (first, last) of unit indices it speaks.

        A word starting between units belongs to the unit before it (a spoken symbol inside a
        token); first indices never decrease; a start past the end of the text counts as its
        last character. Measured espeak-ng 1.52 behaviours handled here:
        - it reports the word after "APIs" at the position of its "s": when a spoken unit with
          letters got no word while the unit before it got several, it takes over the extra ones;
        - it glues unstressed words to the word before ("with the" is one word, as in Piper): a
          word's range extends over the following spoken units that got no word of their own.
        A word's range also extends over the following units of its written token (a run
        without whitespace) that are not spoken: the path of a URL whose host was spoken ("org"
        of "https://docs.python.org/3/library" covers "3" and "library"), so a token whose
        spoken form was heard to its end is heard whole.
        Empty when the text has no units.
        """
        if not self._units:
            return []
        located: list[int] = []
        for start in speakable_starts:
            original = self._speakable.sources[min(start, len(self._speakable.sources) - 1)][0]
            index = max(bisect.bisect_right(self._unit_starts, original) - 1, 0)
            located.append(max(index, located[-1]) if located else index)
        located = self._repair_skipped(located)
        ranges: list[tuple[int, int]] = []
        for position, first in enumerate(located):
            following = (
                located[position + 1] if position + 1 < len(located) else len(self._units)
            )
            last = first
            while following != first and last + 1 < following and (
                    self._spoken[last + 1] or self._token[last + 1] == self._token[last]):
                last += 1
            ranges.append((first, last))
        return ranges

    def _repair_skipped(self, located: list[int]) -> list[int]:
        """Hand the trailing extra words of a unit to the spoken letter units it skipped over."""
        repaired = list(located)
        run_start = 0
        for position in range(1, len(repaired)):
            if repaired[position] == repaired[run_start]:
                continue
            skipped = [
                unit
                for unit in range(repaired[run_start] + 1, repaired[position])
                if self._spoken[unit] and any(ch.isalpha() for ch in self._unit_text(unit))
            ]
            movable = min(len(skipped), position - run_start - 1)
            for offset, unit in enumerate(skipped[:movable]):
                repaired[position - movable + offset] = unit
            run_start = position
        return repaired

    def exact_marks(
        self, word_units: Sequence[tuple[int, int]], sample_spans: Sequence[tuple[int, int]],
        sample_rate_hz: int,
    ) -> tuple[WordMark, ...]:
        """Marks from paired lists: word i (units `word_units[i]`) sounds at `sample_spans[i]`.

        Consecutive words on one unit merge into one mark (first start, last end). () when the
        text has no units.

        Raises:
            ValueError: the two lists differ in length.
        """
        return self.timed_marks(word_units, sample_spans, [False] * len(sample_spans),
                                sample_rate_hz)

    def timed_marks(
        self, word_units: Sequence[tuple[int, int]], sample_spans: Sequence[tuple[int, int]],
        estimated: Sequence[bool], sample_rate_hz: int,
    ) -> tuple[WordMark, ...]:
        """Like `exact_marks`, with `estimated[i]` telling whether word i's span is an estimate;
        a mark is estimated when any of its words is. () when the text has no units.

        Raises:
            ValueError: the three lists differ in length.
        """
        if not self._units:
            return ()
        if not len(word_units) == len(sample_spans) == len(estimated):
            raise ValueError("every engine word needs exactly one sample span")
        groups: list[tuple[int, int, int, int, bool]] = []
        for (first, last), (start, end), guess in zip(
            word_units, sample_spans, estimated, strict=True
        ):
            if groups and groups[-1][0] == first:
                previous = groups[-1]
                groups[-1] = (first, max(last, previous[1]), previous[2], end, previous[4] or guess)
            else:
                groups.append((first, last, start, end, guess))
        return self._marks(groups, sample_rate_hz)

    def proportional_marks(
        self, word_units: Sequence[tuple[int, int]], start_sample: int, end_sample: int,
        sample_rate_hz: int,
    ) -> tuple[WordMark, ...]:
        """Estimated marks: the spoken units covered by `word_units` share the sample span
        [start_sample, end_sample) in proportion to their spoken-word counts. () when there is
        nothing to place."""
        if not self._units or not word_units or end_sample <= start_sample:
            return ()
        chosen = [
            unit
            for unit in range(word_units[0][0], max(last for _, last in word_units) + 1)
            if self._spoken[unit]
        ]
        weights = [max(len(self._units[unit].spoken), 1) for unit in chosen]
        total = sum(weights)
        span = end_sample - start_sample
        groups: list[tuple[int, int, int, int, bool]] = []
        done = 0
        for unit, weight in zip(chosen, weights, strict=True):
            start = start_sample + span * done // total
            done += weight
            groups.append((unit, unit, start, start_sample + span * done // total, True))
        return self._marks(groups, sample_rate_hz)

    def _unit_text(self, index: int) -> str:
        unit = self._units[index]
        return self._speakable.original[unit.start : unit.end]

    def _marks(
        self, groups: Sequence[tuple[int, int, int, int, bool]], sample_rate_hz: int
    ) -> tuple[WordMark, ...]:
        """(first unit, last unit, start sample, end sample, estimated) groups to marks. End
        rounds up (never claims a partly rendered word); a start that would fall before the
        previous end (a shared boundary sample) is moved to that end, so marks never overlap."""
        marks: list[WordMark] = []
        for first, last, start, end, estimated in groups:
            start_ms, end_ms = samples_to_ms(start, end, sample_rate_hz)
            if marks:
                start_ms = max(start_ms, marks[-1].end_ms)
            marks.append(
                WordMark(
                    self._units[first].start, self._units[last].end, start_ms,
                    max(end_ms, start_ms), estimated,
                )
            )
        return tuple(marks)
