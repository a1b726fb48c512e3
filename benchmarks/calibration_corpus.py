"""The calibration corpus of `bench_calibration`: its replies spoken by Piper as the server
speaks them, and the playback cuts judged against Piper's own word marks.

`load_corpus` parses `benchmarks/calibration_corpus.txt`; `synthesize` segments, synthesises,
resamples to 24 kHz and places the word marks on the reply timeline; `corpus_cuts` makes a cut
every 250 ms with its ground truth (fully played and started cuts, code points).
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration import units
from calibration.word_marks import WordMark
from server.speech.resampling import resample
from server.speech.segmenter import SpeechSegmenter
from server.speech.synthesizer import SpeechSynthesizer

CORPUS_PATH = Path(__file__).with_name("calibration_corpus.txt")
RATE_HZ = 24_000
"""Output rate of the server (and of the PCM its calibration records)."""
CUT_STEP_MS = 250
LONG_WORDS = 512
"""Replies with more words than this are "long" (REFERENCE.md 8 item 2: the reference's limit)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One corpus reply: id, category (prose, numbers, ..., long) and written text."""

    id: str
    category: str
    text: str


def load_corpus(path: Path = CORPUS_PATH) -> list[Reply]:
    """Parse the corpus file (format in its header comment).

    Raises:
        ValueError: a header line without " | " or a reply without text.
    """
    replies: list[Reply] = []
    header: str | None = None
    lines: list[str] = []

    def close() -> None:
        if header is None:
            return
        name, sep, category = header.partition(" | ")
        text = "\n".join(lines).strip()
        if not sep or not text:
            raise ValueError(f"bad corpus entry {header!r}")
        replies.append(Reply(name.strip(), category.strip(), text))

    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("=== "):
            close()
            header, lines = line[4:], []
        elif header is not None:
            lines.append(line)
    close()
    return replies


@dataclass(frozen=True, slots=True)
class SpokenReply:
    """A reply synthesised like the server does it.

    Attributes:
        reply: the written reply.
        pcm_f32le: the whole reply's audio, float32 LE mono at RATE_HZ, from sample 0.
        marks: word marks on the reply timeline (char offsets into the text, ms).
        segments: (char end, audio end ms) of every TTS segment, in order.
        total_ms: the complete audio duration (floor ms).
    """

    reply: Reply
    pcm_f32le: bytes
    marks: tuple[WordMark, ...]
    segments: tuple[tuple[int, int], ...]
    total_ms: int

    @property
    def long(self) -> bool:
        """More than LONG_WORDS whitespace-separated words."""
        return len(self.reply.text.split()) > LONG_WORDS


def synthesize(synthesizer: SpeechSynthesizer, reply: Reply) -> SpokenReply:
    """Segment, synthesise, resample to RATE_HZ and place marks as `server.speaking` does."""
    text = reply.text
    segmenter = SpeechSegmenter()
    pieces: list[np.ndarray] = []
    marks: list[WordMark] = []
    segments: list[tuple[int, int]] = []
    samples = 0
    for start, end in segmenter.feed(text) + segmenter.flush():
        for chunk in synthesizer.synthesize(text[start:end]):
            pcm = resample(chunk.pcm, synthesizer.sample_rate_hz, RATE_HZ)
            offset_ms = samples * 1000 // RATE_HZ
            marks.extend(mark.shifted(start, offset_ms) for mark in chunk.marks)
            pieces.append(pcm)
            samples += len(pcm)
        segments.append((end, samples * 1000 // RATE_HZ))
    audio = np.concatenate(pieces).astype("<f4")
    return SpokenReply(reply, audio.tobytes(), tuple(marks), tuple(segments),
                       samples * 1000 // RATE_HZ)


@dataclass(frozen=True, slots=True)
class Cut:
    """One playback cut of one reply and its ground truth (code points)."""

    spoken: SpokenReply
    played_ms: int
    fully: int
    started: int


def heard_bounds(text: str, marks: Sequence[WordMark], played_ms: int) -> tuple[int, int]:
    """(fully played cut, started cut) for `played_ms`, from the marks in text order."""
    ordered = sorted(marks, key=lambda mark: mark.char_start)
    fully = started = 0
    for mark in ordered:
        if mark.end_ms > played_ms:
            break
        fully = mark.char_end
    for mark in ordered:
        if mark.start_ms >= played_ms:
            break
        started = mark.char_end
    return units.snap_down(text, fully), units.snap_down(text, started)


def corpus_cuts(spoken: Sequence[SpokenReply]) -> tuple[list[Cut], int]:
    """All judged cuts every CUT_STEP_MS of every reply, and the number left out.

    A cut is left out when an `estimated` (proportional, not TTS-aligned) mark has started by
    then: its bounds would come from a guess, not from the TTS's own timings.
    """
    cuts: list[Cut] = []
    skipped = 0
    for item in spoken:
        estimated_starts = [mark.start_ms for mark in item.marks if mark.estimated]
        for played in range(CUT_STEP_MS, item.total_ms, CUT_STEP_MS):
            if any(start < played for start in estimated_starts):
                skipped += 1
                continue
            fully, started = heard_bounds(item.reply.text, item.marks, played)
            cuts.append(Cut(item, played, fully, started))
    return cuts, skipped


def asr_subsample(cuts: Sequence[Cut], stride: int, long_cuts: int) -> list[Cut]:
    """Every `stride`-th cut of short replies and `long_cuts` evenly spaced cuts of long ones."""
    chosen: list[Cut] = []
    by_reply: dict[str, list[Cut]] = {}
    for cut in cuts:
        by_reply.setdefault(cut.spoken.reply.id, []).append(cut)
    for reply_cuts in by_reply.values():
        if reply_cuts[0].spoken.long:
            step = len(reply_cuts) / long_cuts
            chosen.extend(reply_cuts[int(i * step)] for i in range(min(long_cuts,
                                                                       len(reply_cuts))))
        else:
            chosen.extend(reply_cuts[stride - 1 :: stride])
    return chosen


@functools.cache
def text_units(text: str) -> tuple[units.TextUnit, ...]:
    """`calibration.units.text_units`, computed once per reply text."""
    return tuple(units.text_units(text))


@functools.cache
def unit_ends(text: str) -> tuple[int, ...]:
    """Exclusive end (code points) of every unit of `text`, in order."""
    return tuple(unit.end for unit in text_units(text))


def unit_count(cut: Cut, end: int) -> int:
    """Units of the cut's reply that end at or before code point `end`."""
    return bisect_right(unit_ends(cut.spoken.reply.text), end)
