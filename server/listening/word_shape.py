"""The shape of a short word's sound: its vowel beats and what sounds after its last vowel.

`server.listening.backchannel_fit` checks an acknowledgment the ASR wrote against these
(issue 24): "okay", "I see", "perfect" have two vowels; "yeah" ends on its vowel, "yep" on a
stop's closure and release, "enough" (which tiny.en can read "Yeah.") on a fricative. The
voiced nuclei of `server.listening.prosody` miss some of them: Piper's vowels often fall below
its voicing threshold (normalised autocorrelation 0.35-0.45) so that its "okay" and "I see" at
some paces are one nucleus, and a stop's release after its closure counts as a voiceless
tail as long as a fricative.

Method: the frames of `prosody` (40 ms every 10 ms), each with its level, its voicing (the
autocorrelation peak at a lag of 60-400 Hz) and its zero-crossing rate (crossings per sample
pair: a vowel's energy is below 1.5 kHz, a voiceless fricative's /s/, /f/, /sh/ above 2.5 kHz;
L. Rabiner and M. Sambur, "An algorithm for determining the endpoints of isolated utterances",
Bell System Technical Journal 54, 1975, use the zero-crossing rate to find fricatives).
A *vowel frame* is periodic (`MIN_VOWEL_VOICING`), low in zero crossings
(`MAX_VOWEL_ZERO_CROSSINGS`) and within `VOWEL_RANGE_DB` of the loudest frame; vowel frames
in a row are one *beat* unless the level dips by `BEAT_DIP_DB` inside them, runs split only by a
dropout (no dip) are joined, and a beat lasts `MIN_BEAT_MS` or more. After the last beat, a
*fricative frame* is audible with `MIN_FRICATIVE_ZERO_CROSSINGS` or more; a *release* is a
level rise of `RELEASE_RISE_DB` or more after the tail's quietest frame (a stop's closure, then
its burst).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from server.listening.prosody import (
    FRAME_MS,
    HOP_MS,
    MAX_F0_HZ,
    MIN_F0_HZ,
    SPEECH_RANGE_DB,
    frame_autocorrelation,
)
from server.listening.room_floor import floor_dbfs

MIN_VOWEL_VOICING = 0.3
"""Normalised autocorrelation peak (60-400 Hz) of a vowel frame: below `prosody`'s voicing
threshold (0.45), which Piper's vowels miss (0.35-0.45 in its "okay" and "I see")."""
MAX_VOWEL_ZERO_CROSSINGS = 0.3
"""Zero crossings per sample below which a frame can be a vowel. Measured on Piper and
espeak-ng: vowels 0.05-0.2, /s/ and /f/ 0.35-0.65."""
VOWEL_RANGE_DB = 25.0
"""Vowel frames are within this of the loudest frame (dB)."""
BEAT_DIP_DB = 6.0
"""A level dip (dB) below the louder part before it and the rise after it that splits vowel
frames into two beats (a consonant between two vowels: Piper's "okay" at length scale 0.8
dips 30 dB in a closure of 30 ms, shorter than `prosody.MERGE_GAP_MS`)."""
MIN_BEAT_MS = 40
"""Shortest beat (ms of vowel frames in a row, counted as frame steps)."""
MIN_FRICATIVE_ZERO_CROSSINGS = 0.3
"""Zero crossings per sample from which an audible frame after the last beat is a fricative
(espeak-ng's /f/ of "enough": 0.38-0.47)."""
RELEASE_RISE_DB = 3.0
"""Level rise (dB) after the quietest frame of the tail that makes the sound after it a stop's
release ("yep": a closure 30 dB down, then a burst 5 dB up from it)."""


@dataclass(frozen=True, slots=True)
class WordShape:
    """What `measure` found.

    Attributes:
        beats: the vowel beats, as (start ms, end ms) from the first sample.
        tail_ms: audible sound (within `prosody.SPEECH_RANGE_DB` of the loudest frame) after
            the end of the last beat, ms; a stop's closure and release count up to the
            closure's quietest frame (0 without beats).
        fricative_ms: fricative frames after the end of the last beat and before a stop's
            closure, ms (frame steps; a stop's release can be as noisy: espeak-ng's /d/ of
            "agreed" 20 ms).
    """

    beats: tuple[tuple[int, int], ...]
    tail_ms: int
    fricative_ms: int


def measure(pcm: np.ndarray, sample_rate_hz: int, room_dbfs: float | None = None) -> WordShape:
    """The `WordShape` of `pcm` (1-D float in [-1, 1] at `sample_rate_hz`; a short utterance).

    `room_dbfs`: the room's loud level (dBFS), None when unknown: frames below
    `room_floor.floor_dbfs` of it are silence, as in `prosody.analyse`. Silent audio or
    audio shorter than a frame has no beats.
    """
    levels, voicing, crossings = _frames(np.asarray(pcm, dtype=np.float64), sample_rate_hz)
    if levels.size == 0:
        return WordShape((), 0, 0)
    floor = floor_dbfs(room_dbfs)
    if floor is not None:
        levels = np.where(levels < floor, -120.0, levels)
    peak = float(levels.max())
    if peak <= -100.0:
        return WordShape((), 0, 0)
    vowel = ((voicing >= MIN_VOWEL_VOICING) & (crossings < MAX_VOWEL_ZERO_CROSSINGS)
             & (levels >= peak - VOWEL_RANGE_DB))
    beats = [run for run in _beats(vowel, levels) if (run[1] - run[0]) * HOP_MS >= MIN_BEAT_MS]
    if not beats:
        return WordShape((), 0, 0)
    audible = np.flatnonzero(levels >= peak - SPEECH_RANGE_DB)
    end, last = beats[-1][1], int(audible[-1]) + 1
    tail = levels[end:last]
    counted = last - end
    if tail.size:
        quietest = int(np.argmin(tail))
        if tail[quietest:].max() >= tail[quietest] + RELEASE_RISE_DB:
            counted = quietest
    before = slice(end, end + counted)
    fricative = int(np.count_nonzero((crossings[before] >= MIN_FRICATIVE_ZERO_CROSSINGS)
                                     & (levels[before] >= peak - SPEECH_RANGE_DB)))
    spans = tuple((a * HOP_MS, b * HOP_MS + FRAME_MS - HOP_MS) for a, b in beats)
    return WordShape(spans, max(counted, 0) * HOP_MS, fricative * HOP_MS)


def _frames(pcm: np.ndarray, rate: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per frame (`FRAME_MS` every `HOP_MS`): level (dBFS, RMS), voicing (normalised
    autocorrelation peak at a lag of `MIN_F0_HZ`-`MAX_F0_HZ`) and zero crossings per sample."""
    frame, hop = rate * FRAME_MS // 1000, rate * HOP_MS // 1000
    count = max(0, (pcm.size - frame) // hop + 1)
    levels, voicing, crossings = np.zeros(count), np.zeros(count), np.zeros(count)
    lag_lo, lag_hi = int(rate / MAX_F0_HZ), int(rate / MIN_F0_HZ)
    for index in range(count):
        window, levels[index], autocorr = frame_autocorrelation(
            pcm[index * hop:index * hop + frame])
        if autocorr is None:
            continue
        voicing[index] = float(autocorr[lag_lo:lag_hi].max() / autocorr[0])
        crossings[index] = float(np.mean(np.signbit(window[1:]) != np.signbit(window[:-1])))
    return levels, voicing, crossings


def _beats(vowel: np.ndarray, levels: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) frame runs of `vowel` frames: runs split by non-vowel frames whose level
    does not dip `BEAT_DIP_DB` below both runs are joined (a voicing dropout inside one
    vowel), and a run whose level dips `BEAT_DIP_DB` and rises as much again is split at the
    dip."""
    raw: list[tuple[int, int]] = []
    for index in np.flatnonzero(vowel):
        at = int(index)
        if raw and at == raw[-1][1]:
            raw[-1] = (raw[-1][0], at + 1)
        else:
            raw.append((at, at + 1))
    runs: list[tuple[int, int]] = []
    for run in raw:
        if runs and float(levels[runs[-1][1]:run[0]].min()) > min(
                float(levels[runs[-1][0]:runs[-1][1]].max()),
                float(levels[run[0]:run[1]].max())) - BEAT_DIP_DB:
            runs[-1] = (runs[-1][0], run[1])
        else:
            runs.append(run)
    split: list[tuple[int, int]] = []
    for start, end in runs:
        top, low = float(levels[start]), None
        for at in range(start, end):
            level = float(levels[at])
            if low is None:
                top = max(top, level)
                if level <= top - BEAT_DIP_DB:
                    low = at
            elif level < levels[low]:
                low = at
            elif level >= levels[low] + BEAT_DIP_DB:
                split.append((start, low))
                start, top, low = low, level, None
        split.append((start, end))
    return split
