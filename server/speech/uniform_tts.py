"""Uniform-timing test TTS: exact, deterministic word timings for tests and the cases file.

Timing rule (contracts.md, interruption_cases.md): every unit of `calibration.units.text_units`
lasts 400 ms per spoken word, a CJK / kana / Hangul unit 250 ms (`unit_duration_ms`); punctuation,
emoji and markup are not units and take no time; no pauses, no leading silence. The audio is a
quiet sine tone per unit (amplitude 0.1, pitch stepping per unit) so that a browser can hear it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np

from calibration.units import text_units, unit_duration_ms
from calibration.word_marks import WordMark
from server.speech.synthesizer import SpeechChunk, StopSignal

SAMPLE_RATE_HZ = 24000
_AMPLITUDE = 0.1
_BASE_PITCH_HZ = 300.0
_PITCH_STEP_HZ = 40.0
_PITCH_STEPS = 8
_FADE_SAMPLES = SAMPLE_RATE_HZ * 5 // 1000


def unit_tone(index: int, samples: int) -> np.ndarray:
    """The tone of the index-th unit: `samples` float32 samples at 24 kHz, a sine of
    300 + 40 * (index mod 8) Hz at amplitude 0.1 with 5 ms linear fades (no clicks).

    Read-only and shared: there are 8 pitches and few durations (400 ms per spoken word, 250 ms
    per CJK unit), so each tone is computed once and a busy server spends next to nothing on
    this voice."""
    return _tone(index % _PITCH_STEPS, samples)


@functools.lru_cache(maxsize=64)
def _tone(step: int, samples: int) -> np.ndarray:
    """`unit_tone` of a unit at pitch step `step` (0-7), computed."""
    t = np.arange(samples, dtype=np.float64) / SAMPLE_RATE_HZ
    pitch = _BASE_PITCH_HZ + _PITCH_STEP_HZ * step
    tone = _AMPLITUDE * np.sin(2.0 * np.pi * pitch * t)
    fade = min(_FADE_SAMPLES, samples // 2)
    if fade:
        ramp = np.linspace(0.0, 1.0, fade, endpoint=False)
        tone[:fade] *= ramp
        tone[samples - fade :] *= ramp[::-1]
    tone = tone.astype(np.float32)
    tone.flags.writeable = False
    return tone


class UniformSynthesizer:
    """`SpeechSynthesizer` "uniform" (exact integer marks) or "uniform-nomarks" (same audio,
    marks=()); 24000 Hz, one chunk per `synthesize` call, nothing for a text without units."""

    sample_rate_hz = SAMPLE_RATE_HZ

    def __init__(self, with_marks: bool = True) -> None:
        """`with_marks`: give word marks ("uniform") or not ("uniform-nomarks")."""
        self._with_marks = with_marks
        self.name = "uniform" if with_marks else "uniform-nomarks"

    def warm_up(self) -> None:
        """Nothing to load: the engine is arithmetic."""

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        """Yield one chunk for `text` (nothing when it has no units, e.g. "👍", or when `stop`
        is already set: the tones are computed in well under a millisecond per word).

        Unit i starts where unit i-1 ends (first at 0 ms); marks cover each unit's span of
        `text` with exact integer ms.
        """
        units = text_units(text)
        if not units or (stop is not None and stop.is_set()):
            return
        pieces: list[np.ndarray] = []
        marks: list[WordMark] = []
        start_ms = 0
        for index, unit in enumerate(units):
            duration_ms = unit_duration_ms(unit)
            pieces.append(unit_tone(index, duration_ms * SAMPLE_RATE_HZ // 1000))
            marks.append(WordMark(unit.start, unit.end, start_ms, start_ms + duration_ms))
            start_ms += duration_ms
        yield SpeechChunk(
            pcm=np.concatenate(pieces), marks=tuple(marks) if self._with_marks else ()
        )
