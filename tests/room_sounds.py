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

from server.speech.resampling import resample
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


def horn(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """A car horn outside: two harmonic tones a third apart (a random 380-460 Hz and 1.25 times
    that, eight harmonics falling 6 dB per octave), 300-700 ms with 20 ms edges, peak `dbfs`."""
    duration_ms = float(rng.uniform(300.0, 700.0))
    t_s = np.arange(round(duration_ms * fx.RATE_HZ / 1000)) / fx.RATE_HZ
    low_hz = float(rng.uniform(380.0, 460.0))
    wave = sum(np.sin(2 * np.pi * f0 * k * t_s) / k
               for f0 in (low_hz, 1.25 * low_hz) for k in range(1, 9) if f0 * k < 7500)
    edges = np.minimum(1.0, np.minimum(t_s, t_s[-1] - t_s) * 1000.0 / 20.0)
    return fx.at_peak_dbfs((wave * edges).astype(np.float32), dbfs)


def typing(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """Typing on a keyboard: 5-9 key clicks (2-6 kHz bursts decaying in 4 ms, each at its own
    level within 6 dB) 90-220 ms apart, peak `dbfs`."""
    parts = []
    for _ in range(int(rng.integers(5, 10))):
        click = _decaying(rng, 30.0, 2000.0, 6000.0, 4.0) * 10.0 ** (-rng.uniform(0, 6) / 20)
        parts += [click, np.zeros(round(rng.uniform(60, 190) * fx.RATE_HZ / 1000), np.float32)]
    return fx.at_peak_dbfs(np.concatenate(parts), dbfs)


def dog_bark(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """A dog barking twice or three times: 120-180 ms barks 200-350 ms apart, each a harmonic
    sound whose 450-700 Hz fundamental falls by a fifth, with a noisy breath on it and a 5 ms
    attack, peak `dbfs`."""
    parts = []
    for _ in range(int(rng.integers(2, 4))):
        duration_ms = float(rng.uniform(120.0, 180.0))
        samples = round(duration_ms * fx.RATE_HZ / 1000)
        f0 = float(rng.uniform(450.0, 700.0)) * np.linspace(1.0, 0.67, samples)
        phase = 2 * np.pi * np.cumsum(f0) / fx.RATE_HZ
        voiced = sum(np.sin(k * phase) / k for k in range(1, 10))
        breath = _decaying(rng, duration_ms, 500.0, 5000.0, duration_ms)
        t_ms = np.arange(samples) * 1000.0 / fx.RATE_HZ
        envelope = np.minimum(1.0, t_ms / 5.0) * np.exp(-t_ms / (duration_ms / 2))
        bark = (voiced / 3.0 + 0.5 * breath) * envelope
        gap = np.zeros(round(rng.uniform(200, 350) * fx.RATE_HZ / 1000), np.float32)
        parts += [bark.astype(np.float32), gap]
    return fx.at_peak_dbfs(np.concatenate(parts), dbfs)


TRANSIENTS = {
    "cough": lambda rng, dbfs: fx.cough(rng, 180, dbfs),
    "clap": clap,
    "knock": knock,
    "dropped cup": dropped_cup,
}
"""Short loud non-speech sounds by name: maker(rng, peak dBFS) -> 16 kHz PCM."""

ROOM_SOUNDS = {**TRANSIENTS, "horn": horn, "typing": typing, "dog bark": dog_bark}
"""Every room sound by name (the transients and the longer ones: a horn, typing, a dog):
maker(rng, peak dBFS) -> 16 kHz PCM."""


def knuckles(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """Two to four raps of knuckles on a table, 90-200 ms apart: each a 180-320 Hz resonance
    decaying in 25 ms under a 0.8-5 kHz click decaying in 2 ms, peak `dbfs`."""
    parts = []
    t_s = np.arange(round(0.12 * fx.RATE_HZ)) / fx.RATE_HZ
    for _ in range(int(rng.integers(2, 5))):
        ring = np.sin(2 * np.pi * float(rng.uniform(180.0, 320.0)) * t_s) * np.exp(-t_s / 0.025)
        click = _decaying(rng, 120.0, 800.0, 5000.0, 2.0)
        parts += [(ring + 0.5 * click).astype(np.float32),
                  np.zeros(round(rng.uniform(90, 200) * fx.RATE_HZ / 1000), np.float32)]
    return fx.at_peak_dbfs(np.concatenate(parts), dbfs)


def keyboard(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """A mechanical keyboard: 6-11 keys 50-160 ms apart, each a 300-1200 Hz thock decaying in
    6 ms with a 3-7 kHz click decaying in 2 ms, at its own level within 8 dB, peak `dbfs`."""
    parts = []
    for _ in range(int(rng.integers(6, 12))):
        key = _decaying(rng, 40.0, 300.0, 1200.0, 6.0) + 0.6 * _decaying(rng, 40.0, 3000.0,
                                                                         7000.0, 2.0)
        parts += [(key * 10.0 ** (-rng.uniform(0, 8) / 20)).astype(np.float32),
                  np.zeros(round(rng.uniform(50, 160) * fx.RATE_HZ / 1000), np.float32)]
    return fx.at_peak_dbfs(np.concatenate(parts), dbfs)


def footsteps(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """Four footsteps 350-550 ms apart: 60-600 Hz thuds decaying in 15 ms, each at its own level
    within 4 dB, peak `dbfs`."""
    parts = []
    for _ in range(4):
        parts += [_decaying(rng, 80.0, 60.0, 600.0, 15.0) * 10.0 ** (-rng.uniform(0, 4) / 20),
                  np.zeros(round(rng.uniform(350, 550) * fx.RATE_HZ / 1000), np.float32)]
    return fx.at_peak_dbfs(np.concatenate(parts), dbfs)


def table_slap(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """A hand slapped on a table: a 0.1-3 kHz burst decaying in 12 ms (150 ms long), peak
    `dbfs`."""
    return fx.at_peak_dbfs(_decaying(rng, 150.0, 100.0, 3000.0, 12.0), dbfs)


def phone_ring(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """A phone ringing twice (400 ms on, 200 ms off): two tones 10 % apart (a random 400-480 Hz
    and 1.1 times that) switched on and off 20 times a second, 5 ms edges, peak `dbfs`."""
    low_hz = float(rng.uniform(400.0, 480.0))
    t_s = np.arange(round(0.4 * fx.RATE_HZ)) / fx.RATE_HZ
    chopped = 0.5 + 0.5 * np.sign(np.sin(2 * np.pi * 20.0 * t_s))
    edges = np.minimum(1.0, np.minimum(t_s, t_s[-1] - t_s) * 1000.0 / 5.0)
    burst = ((np.sin(2 * np.pi * low_hz * t_s) + np.sin(2 * np.pi * 1.1 * low_hz * t_s))
             * chopped * edges).astype(np.float32)
    return fx.at_peak_dbfs(np.concatenate((burst, np.zeros(round(0.2 * fx.RATE_HZ),
                                                             np.float32), burst)), dbfs)


def big_dog(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """A bigger dog barking once to three times, 150-400 ms apart: 180-300 ms barks, each 15
    harmonics (falling 0.7 power of their number) of a 160-320 Hz fundamental gliding from 1.1 to
    0.8 times it, roughened at 35 Hz, over a 300-4000 Hz breath; an 8 ms attack and a decay of
    time constant 0.4 of the bark's length, peak `dbfs`."""
    parts = []
    for _ in range(int(rng.integers(1, 4))):
        duration_ms = float(rng.uniform(180.0, 300.0))
        t_s = np.arange(round(duration_ms * fx.RATE_HZ / 1000)) / fx.RATE_HZ
        f0 = float(rng.uniform(160.0, 320.0)) * np.linspace(1.1, 0.8, t_s.size)
        phase = 2 * np.pi * np.cumsum(f0) / fx.RATE_HZ
        voiced = sum(np.sin(k * phase) / k ** 0.7 for k in range(1, 16))
        rough = 1 + 0.5 * np.sin(2 * np.pi * 35.0 * t_s)
        envelope = np.minimum(1.0, t_s * 1000 / 8) * np.exp(-t_s * 1000 / (duration_ms / 2.5))
        breath = _decaying(rng, duration_ms, 300.0, 4000.0, duration_ms / 2)
        parts += [((voiced / 4 * rough + 0.4 * breath) * envelope).astype(np.float32),
                  np.zeros(round(rng.uniform(150, 400) * fx.RATE_HZ / 1000), np.float32)]
    return fx.at_peak_dbfs(np.concatenate(parts), dbfs)


def door_slam(rng: np.random.Generator, dbfs: float) -> np.ndarray:
    """A door slammed: a 40-400 Hz thud decaying in 60 ms with the door's 70-120 Hz body decaying
    in 80 ms, and three 1.5-6 kHz rattles (decaying in 5 ms) in its first 400 ms, 500 ms long,
    peak `dbfs`."""
    samples = round(0.5 * fx.RATE_HZ)
    thud = _decaying(rng, 300.0, 40.0, 400.0, 60.0)
    t_s = np.arange(thud.size) / fx.RATE_HZ
    body = np.sin(2 * np.pi * float(rng.uniform(70.0, 120.0)) * t_s) * np.exp(-t_s * 1000 / 80)
    rattle = np.zeros(samples, np.float32)
    for _ in range(3):
        at = round(rng.uniform(0.05, 0.4) * fx.RATE_HZ)
        click = _decaying(rng, 25.0, 1500.0, 6000.0, 5.0) * 0.3
        rattle[at:at + click.size] += click[:samples - at]
    out = np.zeros(samples, np.float32)
    out[:thud.size] += thud + 0.8 * body
    return fx.at_peak_dbfs(out + rattle, dbfs)


HELD_OUT_SOUNDS = {"knuckles": knuckles, "keyboard": keyboard, "footsteps": footsteps,
                   "table slap": table_slap, "phone ring": phone_ring}
"""Room sounds made otherwise than `ROOM_SOUNDS` (other struck sounds, clicks and a ring), for
checks of rules tuned on those: maker(rng, peak dBFS) -> 16 kHz PCM."""

HELD_OUT_DECAYS = {"big dog": big_dog, "door slam": door_slam, "dog bark": dog_bark}
"""Sounds excited once that decay over 60-90 ms (a bigger dog, a slammed door, and the table's
dog at other levels and echoes), for checks of rules tuned on table 4's dog: maker(rng, peak
dBFS) -> 16 kHz PCM."""

# --- non-stationary rooms: music with a sung line, talk radio, a street --------------------

LYRICS = ("oh my darling come away with me tonight under silver skies we ride",
          "hold me closer baby all the summer long the river sings our song",
          "never let me go again the morning light is calling out your name")
"""The sung line of `music`, one per seed (cycled)."""

SINGERS = (("espeak", "en-us+f3"), ("espeak", "en-gb-x-rp"), ("piper", None))
"""(engine, voice) of `music`'s singer, one per seed (cycled)."""


def _note(freq_hz: float, duration_ms: float, harmonics: int, decay_ms: float) -> np.ndarray:
    """A plucked or struck note: `harmonics` partials at 1/k amplitude, 5 ms attack,
    exponential decay of time constant `decay_ms`, `duration_ms` long, peak about 1."""
    t_s = np.arange(round(duration_ms * fx.RATE_HZ / 1000)) / fx.RATE_HZ
    wave = sum(np.sin(2 * np.pi * freq_hz * k * t_s) / k for k in range(1, harmonics + 1)
               if freq_hz * k < fx.RATE_HZ / 2)
    envelope = np.minimum(t_s / 0.005, 1.0) * np.exp(-t_s * 1000.0 / decay_ms)
    return (wave * envelope).astype(np.float32)


def _add(mix: np.ndarray, sound: np.ndarray, at: int) -> None:
    """Add `sound` into `mix` from sample `at` (cut at its end)."""
    if at < mix.size:
        mix[at:at + sound.size] += sound[:mix.size - at]


def _band(rng: np.random.Generator, samples: int, low_hz: float, high_hz: float
          ) -> np.ndarray:
    """White noise limited to `low_hz`-`high_hz`, unit RMS."""
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    freqs = np.fft.rfftfreq(samples, 1.0 / fx.RATE_HZ)
    noise = np.fft.irfft(spectrum * ((freqs >= low_hz) & (freqs <= high_hz)), samples)
    return (noise / max(float(np.sqrt(np.mean(noise ** 2))), 1e-12)).astype(np.float32)


def sung_line(seed: int) -> np.ndarray:
    """A sung line (peak 0 dBFS): `LYRICS`' words by `SINGERS`' voice, each word resampled
    to a note of a seeded melody (-5..+7 semitones), so its pitch moves as a tune does."""
    engine, voice = SINGERS[seed % len(SINGERS)]
    rng = np.random.default_rng(seed + 500)
    notes = []
    for word in LYRICS[seed % len(LYRICS)].split():
        ratio = 2.0 ** (float(rng.integers(-5, 8)) / 12.0)
        spoken = fx.speech(word, engine, voice)
        notes.append(resample(spoken, round(fx.RATE_HZ * ratio), fx.RATE_HZ))
        notes.append(fx.silence(float(rng.choice([0.0, 60.0, 250.0]))))
    return fx.at_peak_dbfs(np.concatenate(notes), 0.0)


def instrumental(duration_ms: float, seed: int = 0) -> np.ndarray:
    """A pop song's band (no singer), `duration_ms` long, unit RMS: chords of harmonic notes
    (four bars of a seeded key and tempo, 90-130 beats/min), a bass line and drums (a kick,
    a snare and hi-hats: noise bursts), looped."""
    rng = np.random.default_rng(seed)
    samples = round(duration_ms * fx.RATE_HZ / 1000)
    beat = round(fx.RATE_HZ * 60.0 / float(rng.uniform(90.0, 130.0)))
    bar = 4 * beat
    root_hz = 110.0 * 2.0 ** (float(rng.integers(0, 12)) / 12.0)
    progression = ((0, 4, 7), (9, 12, 16), (5, 9, 12), (7, 11, 14))
    loop = np.zeros(4 * bar, dtype=np.float32)
    kick_t = np.arange(round(0.15 * fx.RATE_HZ)) / fx.RATE_HZ
    kick = (np.sin(2 * np.pi * (50.0 * kick_t + 10.5 * (1 - np.exp(-kick_t / 0.03))))
            * np.exp(-kick_t / 0.05)).astype(np.float32)
    snare_decay = np.exp(-np.arange(round(0.12 * fx.RATE_HZ)) / (0.035 * fx.RATE_HZ))
    for index, chord in enumerate(progression):
        start = index * bar
        for semitones in chord:
            _add(loop, 0.25 * _note(root_hz * 2.0 ** (semitones / 12.0 + 1),
                                    bar * 1000.0 / fx.RATE_HZ, 8, 900.0), start)
        for step in range(4):
            _add(loop, 0.5 * _note(root_hz * 2.0 ** (chord[0] / 12.0 - 1),
                                   beat * 1000.0 / fx.RATE_HZ, 5, 200.0), start + step * beat)
            hit = kick if step % 2 == 0 else (
                0.4 * _band(rng, snare_decay.size, 800, 6000) * snare_decay).astype(np.float32)
            _add(loop, hit, start + step * beat)
            for half in (0, beat // 2):
                _add(loop, 0.15 * _band(rng, round(0.03 * fx.RATE_HZ), 6000, 7900),
                     start + step * beat + half)
    band = _looped(loop, samples, int(rng.integers(0, loop.size)))
    return at_rms_dbfs(band, 0.0)


def music(duration_ms: float, dbfs: float, seed: int = 0) -> np.ndarray:
    """A pop song with a singer, `duration_ms` long, RMS `dbfs`: `instrumental` and a sung
    line (`sung_line`, looped with a seeded 0.5-1.5 s breath) at the band's RMS."""
    rng = np.random.default_rng(seed + 900)
    samples = round(duration_ms * fx.RATE_HZ / 1000)
    line = np.concatenate((sung_line(seed), fx.silence(float(rng.uniform(500, 1500)))))
    voice = _looped(line, samples, 0)
    mix = instrumental(duration_ms, seed) + voice / 10.0 ** (rms_dbfs(voice) / 20.0)
    return at_rms_dbfs(mix.astype(np.float32), dbfs)


def _compressed(pcm: np.ndarray, ratio: float = 4.0, window_ms: float = 20.0) -> np.ndarray:
    """`pcm` through a broadcast compressor: its level over `window_ms` (RMS, smoothed) above
    its median is divided by `ratio` (a radio station's dense loudness)."""
    width = max(round(window_ms * fx.RATE_HZ / 1000), 1)
    power = np.convolve(pcm.astype(np.float64) ** 2, np.ones(width) / width, mode="same")
    level_db = 10.0 * np.log10(np.maximum(power, 1e-10))
    median_db = float(np.median(level_db[level_db > -80.0])) if np.any(level_db > -80.0) else 0.0
    gain_db = -np.maximum(level_db - median_db, 0.0) * (1.0 - 1.0 / ratio)
    return (pcm * 10.0 ** (gain_db / 20.0)).astype(np.float32)


def radio(duration_ms: float, dbfs: float, seed: int = 0) -> np.ndarray:
    """Talk radio, `duration_ms` long, RMS `dbfs`: two hosts taking turns (each a passage of
    its own voice, 150-500 ms between them), band-limited to 120-5000 Hz and compressed
    (`_compressed`), looped, over a bed (`instrumental`, 18 dB under the talk)."""
    rng = np.random.default_rng(seed + 300)
    hosts = (3 + seed % 3, seed % 3 if seed % 3 != 2 else 1)
    turns = []
    for index in hosts:
        turns += [_talker(index), fx.silence(float(rng.uniform(150.0, 500.0)))]
    samples = round(duration_ms * fx.RATE_HZ / 1000)
    talk = np.concatenate(turns)
    spectrum = np.fft.rfft(talk)
    freqs = np.fft.rfftfreq(talk.size, 1.0 / fx.RATE_HZ)
    talk = _compressed(np.fft.irfft(spectrum * ((freqs >= 120) & (freqs <= 5000)), talk.size))
    talk = _looped(talk.astype(np.float32), samples, int(rng.integers(0, talk.size)))
    bed = instrumental(duration_ms, seed + 7) * 10.0 ** (-18.0 / 20.0)
    return at_rms_dbfs(at_rms_dbfs(talk, 0.0) + bed, dbfs)


def street(duration_ms: float, dbfs: float, seed: int = 0) -> np.ndarray:
    """A street, `duration_ms` long, RMS `dbfs`: traffic rumble (noise low-passed at 400 Hz,
    with tyre hiss at 1-4 kHz, swelling 10-15 dB as a car passes every 2-6 s, each swell
    1-3 s wide), car horns (two-tone 420 / 520 Hz with harmonics, 200-700 ms, one every
    3-9 s) and footsteps (40 ms thumps with a heel click, every 450-600 ms in runs of 4-10)."""
    rng = np.random.default_rng(seed + 700)
    samples = round(duration_ms * fx.RATE_HZ / 1000)
    t_s = np.arange(samples) / fx.RATE_HZ
    swell_db = np.full(samples, -12.0)
    at_s = float(rng.uniform(0.0, 2.0))
    while at_s < t_s[-1] + 3.0:
        width_s, peak_db = float(rng.uniform(1.0, 3.0)), float(rng.uniform(-3.0, 3.0))
        swell_db = np.maximum(swell_db, peak_db - 12.0 * ((t_s - at_s) / width_s) ** 2)
        at_s += float(rng.uniform(2.0, 6.0))
    swell = 10.0 ** (swell_db / 20.0)
    mix = (_band(rng, samples, 30, 400) + 0.3 * _band(rng, samples, 1000, 4000)) * swell
    at_s = float(rng.uniform(0.5, 4.0))
    while at_s < t_s[-1]:
        length_ms = float(rng.uniform(200.0, 700.0))
        horn = _note(420.0, length_ms, 10, 5000.0) + _note(520.0, length_ms, 10, 5000.0)
        horn *= np.minimum(np.linspace(length_ms / 20.0, 0.0, horn.size), 1.0)
        _add(mix, 1.5 * horn, round(at_s * fx.RATE_HZ))
        at_s += float(rng.uniform(3.0, 9.0))
    at_s = float(rng.uniform(0.0, 2.0))
    while at_s < t_s[-1]:
        for _ in range(int(rng.integers(4, 11))):
            step = 0.8 * _decaying(rng, 40.0, 60.0, 500.0, 10.0)
            step[:80] += 0.2 * _band(rng, 80, 2000, 6000)
            _add(mix, step, round(at_s * fx.RATE_HZ))
            at_s += float(rng.uniform(0.45, 0.6))
        at_s += float(rng.uniform(1.0, 4.0))
    return at_rms_dbfs(mix.astype(np.float32), dbfs)
