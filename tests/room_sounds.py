"""Background speech for room tests and benchmarks: babble of several voices and a TV talker.

Every function returns 1-D float32 PCM at `speech_fixtures.RATE_HZ` (16 kHz). Levels here are
*RMS* levels in dBFS over the whole signal (a room's background is measured so; the issue's
"babble at -45 dBFS"); `at_rms_dbfs` scales any signal so.
Talkers are espeak-ng voices (`speech_fixtures.ESPEAK_VOICES`) and Piper, each reading its own
text from its own start, looped to the duration.
"""

from __future__ import annotations

import functools

import numpy as np

from tests import speech_fixtures as fx

PASSAGES = (
    "The committee met on Tuesday to review the budget for the new library, and after a long "
    "discussion they agreed to postpone the vote until next month.",
    "My sister moved to the coast last year. She says the weather is mild, the rent is high, "
    "and the fish market on Saturday mornings is worth the trip.",
    "Preheat the oven, slice the onions thinly, and let them cook slowly in butter until they "
    "turn golden. Then add the stock and a pinch of thyme.",
    "The train was delayed by twenty minutes because of a signal failure near the bridge, so "
    "most of the passengers missed their connections in the city.",
    "We walked along the river until sunset, talking about old friends, summer jobs, and the "
    "strange dog that used to follow us home from school.",
    "In tonight's news, the city council approved a plan to repair the roads in the northern "
    "district, and the weather service expects rain over the weekend.",
)
"""One text per talker (more than a five-talker babble needs)."""

TALKERS = (("espeak", "en-us"), ("espeak", "en-gb-x-rp"), ("piper", None),
           ("espeak", "en-us+f3"), ("espeak", "en-029"), ("espeak", "en"))
"""(engine, voice) of each talker, in the order a babble takes them."""


@functools.cache
def _talker(index: int) -> np.ndarray:
    """Talker `index`'s passage at peak 0 dBFS (read-only, shared)."""
    engine, voice = TALKERS[index % len(TALKERS)]
    pcm = fx.at_peak_dbfs(fx.speech(PASSAGES[index % len(PASSAGES)], engine, voice), 0.0)
    pcm.setflags(write=False)
    return pcm


def _looped(pcm: np.ndarray, samples: int, offset: int) -> np.ndarray:
    """`samples` of `pcm` repeated, starting `offset` samples into it."""
    reps = -(-(samples + offset) // pcm.size)
    return np.tile(pcm, reps)[offset:offset + samples]


def rms_dbfs(pcm: np.ndarray) -> float:
    """RMS level of `pcm` in dBFS (-inf for silence)."""
    power = float(np.mean(np.square(pcm, dtype=np.float64))) if pcm.size else 0.0
    return 10.0 * np.log10(power) if power > 0.0 else float("-inf")


def at_rms_dbfs(pcm: np.ndarray, dbfs: float) -> np.ndarray:
    """`pcm` scaled so that its RMS level is `dbfs` dBFS. Raises ValueError for silence."""
    level = rms_dbfs(pcm)
    if not np.isfinite(level):
        raise ValueError("cannot scale silence to a level")
    return (pcm * 10.0 ** ((dbfs - level) / 20.0)).astype(np.float32)


def babble(duration_ms: float, dbfs: float, talkers: int = 5, seed: int = 0) -> np.ndarray:
    """`talkers` voices talking at once (each its own passage from a seeded offset, at equal
    RMS), `duration_ms` long, RMS `dbfs`."""
    samples = round(duration_ms * fx.RATE_HZ / 1000)
    rng = np.random.default_rng(seed)
    mix = np.zeros(samples, dtype=np.float64)
    for index in range(talkers):
        voice = _talker(index)
        part = _looped(voice, samples, int(rng.integers(0, voice.size)))
        mix += part / 10.0 ** (rms_dbfs(voice) / 20.0)
    return at_rms_dbfs(mix.astype(np.float32), dbfs)


def tv_talker(duration_ms: float, dbfs: float, seed: int = 0) -> np.ndarray:
    """One talker reading on and on (a news reader on a TV), `duration_ms` long, RMS `dbfs`:
    the passages of several voices one after another with their own pauses, looped."""
    samples = round(duration_ms * fx.RATE_HZ / 1000)
    reading = np.concatenate([np.concatenate((_talker(index), fx.silence(400)))
                              for index in (5, 0, 2)])
    offset = int(np.random.default_rng(seed).integers(0, reading.size))
    return at_rms_dbfs(_looped(reading, samples, offset), dbfs)


CHROMIUM_AGC_DB = ((0, 10.0), (500, 13.0), (1000, 16.5), (2000, 18.5), (2600, 19.5),
                   (3600, 21.0), (4600, 22.5))
"""(ms from the microphone's first sample, gain dB): the gain Chromium's auto gain control
applied to a TV talker at -45 dBFS RMS on its fake microphone, as the demo page asks for it
(`autoGainControl: true`, web/microphone.js); measured by comparing what the server received
with the file, 500 ms spans of the file's louder half (median), 2026-12-05 on Debian's
Chromium. After 4.6 s it stays at +21 to +23.5 dB."""


def with_agc(pcm_16k: np.ndarray, rise: float = 1.0) -> np.ndarray:
    """`pcm_16k` with `CHROMIUM_AGC_DB`'s gain applied, its rise after the first point times
    `rise`, interpolated linearly in dB between its points and held after the last one."""
    times_ms = np.arange(pcm_16k.size) * 1000.0 / fx.RATE_HZ
    first_db = CHROMIUM_AGC_DB[0][1]
    gain_db = np.interp(times_ms, [t for t, _ in CHROMIUM_AGC_DB],
                        [first_db + (g - first_db) * rise for _, g in CHROMIUM_AGC_DB])
    return (pcm_16k * 10.0 ** (gain_db / 20.0)).astype(np.float32)


def _decaying(rng: np.random.Generator, duration_ms: float, low_hz: float, high_hz: float,
              decay_ms: float) -> np.ndarray:
    """Band-limited noise (`low_hz`-`high_hz`) with a 1 ms attack and an exponential decay of
    time constant `decay_ms`, `duration_ms` long, peak 1.0."""
    samples = round(duration_ms * fx.RATE_HZ / 1000)
    t_ms = np.arange(samples) * 1000.0 / fx.RATE_HZ
    envelope = np.clip(t_ms, 0.0, 1.0) * np.exp(-np.maximum(t_ms - 1.0, 0.0) / decay_ms)
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    freqs = np.fft.rfftfreq(samples, 1.0 / fx.RATE_HZ)
    noise = np.fft.irfft(spectrum * ((freqs >= low_hz) & (freqs <= high_hz)), samples)
    shaped = noise * envelope
    return (shaped / np.max(np.abs(shaped))).astype(np.float32)


def clap(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """A hand clap: a 1-4 kHz noise burst decaying in 15 ms (80 ms long), peak `dbfs`."""
    return fx.at_peak_dbfs(_decaying(rng, 80.0, 1000.0, 4000.0, 15.0), dbfs)


def knock(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """Three knocks on a door, 180 ms apart: 150-900 Hz thumps decaying in 20 ms, peak `dbfs`."""
    thump = _decaying(rng, 100.0, 150.0, 900.0, 20.0)
    gap = np.zeros(round(80 * fx.RATE_HZ / 1000), np.float32)
    return fx.at_peak_dbfs(np.concatenate((thump, gap, thump, gap, thump)), dbfs)


def dropped_cup(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """A cup dropped on a table: a broadband crack, then the cup's ring (inharmonic partials at
    2.1, 3.4 and 5.2 kHz) decaying in 90 ms (400 ms long), peak `dbfs`."""
    crack = _decaying(rng, 400.0, 200.0, 7000.0, 8.0)
    t_s = np.arange(crack.size) / fx.RATE_HZ
    ring = sum(np.sin(2 * np.pi * hz * t_s + rng.uniform(0, 2 * np.pi))
               for hz in (2100, 3400, 5200))
    ring = ring * np.exp(-t_s * 1000.0 / 90.0) / 3.0
    return fx.at_peak_dbfs((crack + 0.6 * ring).astype(np.float32), dbfs)


TRANSIENTS = {
    "cough": lambda rng, dbfs: fx.cough(rng, 180, dbfs),
    "clap": clap,
    "knock": knock,
    "dropped cup": dropped_cup,
}
"""Short loud non-speech sounds by name: maker(rng, peak dBFS) -> 16 kHz PCM."""
