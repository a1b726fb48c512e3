"""Prosody of a short utterance: its voiced syllables, the gaps between them and its pitch.

Used to tell a listener's backchannel murmur ("uh-huh", "mm-hmm": two voiced syllables joined by
an aspirated /h/, rising or level pitch) from its negative twin ("uh-uh": two syllables split by
a glottal stop, falling pitch) and from other short words, because a small ASR model writes
"Uh-uh." for both (`server.listening.backchannel`). Plain numpy on PCM at any rate; an
utterance of a second costs well under 5 ms.

Method: 40 ms frames every 10 ms; a frame is voiced when its normalised autocorrelation peaks
above `VOICING_THRESHOLD` at a lag of 60-400 Hz (the classic autocorrelation pitch detector,
L. Rabiner, "On the use of autocorrelation analysis for pitch detection", IEEE Trans. ASSP 25,
1977) and its level is within `SPEECH_RANGE_DB` of the utterance's loudest frame. Voiced runs
split by less than `MERGE_GAP_MS`, or by a stretch as loud as a vowel (`DROPOUT_RANGE_DB`), are
one syllable nucleus; a gap between nuclei is
*aspirated* when its mean level stays within `ASPIRATION_RANGE_DB` of the loudest frame (an
/h/ or a fricative keeps sounding) and a *closure* otherwise (a glottal or oral stop).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from server.listening.room_floor import floor_dbfs

FRAME_MS = 40
"""Analysis window (ms): two periods of a 50 Hz voice."""
HOP_MS = 10
"""Frame step (ms)."""
VOICING_THRESHOLD = 0.45
"""Normalised autocorrelation peak above which a frame is voiced (Rabiner 1977 uses 0.3-0.5)."""
SPEECH_RANGE_DB = 35.0
"""Frames more than this below the loudest frame are silence."""
MERGE_GAP_MS = 30
"""Unvoiced runs shorter than this inside a voiced stretch (a pitch-tracker dropout) are
bridged."""
MIN_NUCLEUS_MS = 40
"""Voiced runs shorter than this are not counted as a syllable nucleus."""
DROPOUT_RANGE_DB = 10.0
"""An unvoiced stretch between voiced runs whose mean level stays within this of the loudest
frame is a pitch-tracker dropout inside one vowel (espeak-ng: 30-50 ms at -1 to -5 dB), not a
syllable boundary: the runs are one nucleus (an /h/ dips 12-25 dB)."""
ASPIRATION_RANGE_DB = 30.0
"""A gap whose mean level is within this of the loudest frame is aspirated (measured on
espeak-ng and Piper "uh-huh" / "uh-uh", see `tests/test_backchannel.py`)."""
MIN_F0_HZ = 60.0
MAX_F0_HZ = 400.0
ENVELOPE_EDGES_HZ = tuple(float(f) for f in np.geomspace(100.0, 4000.0, 13))
"""Edges of the 12 log-spaced bands (100-4000 Hz) of a nucleus's spectral envelope."""
ENVELOPE_FLOOR_DB = -40.0
"""Bands more than this below a nucleus's loudest band count as this (noise, not shape)."""
_SILENT_DB = -120.0
"""Level (dB) given to frames below `analyse`'s floor: silence."""
FINAL_MS = 120
"""The end of an utterance whose pitch, against the utterance's median, is its final rise
(a question's terminal rise: J. Pierrehumbert, "The phonology and phonetics of English
intonation", MIT thesis, 1980: the H-H% boundary)."""


@dataclass(frozen=True, slots=True)
class Gap:
    """The stretch between two syllable nuclei.

    Attributes:
        duration_ms: its length (ms).
        level_db: its mean level relative to the utterance's loudest frame (dB, <= 0).
        aspirated: it keeps sounding (an /h/, a fricative), not a closure.
    """

    duration_ms: int
    level_db: float
    aspirated: bool


@dataclass(frozen=True, slots=True)
class Prosody:
    """What `analyse` found in an utterance.

    Attributes:
        duration_ms: from the first to the last frame within `SPEECH_RANGE_DB` of the loudest.
        voiced_ms: voiced frames in that span (ms).
        nuclei: voiced syllable nuclei, as (start ms, end ms) from the first sample.
        gaps: the gaps between consecutive nuclei.
        pitch_change_st: median pitch of the last nucleus minus that of the first, in
            semitones (0.0 with fewer than two nuclei).
        level_dbfs: level of the loudest frame (dBFS, RMS).
        sound_end_ms: end of the last frame within `SPEECH_RANGE_DB` of the loudest, ms from
            the first sample (0 when silent): after it the audio holds nothing audible.
        final_rise_st: median pitch of the last `FINAL_MS` of voiced frames of the last
            nucleus minus the median pitch of all nuclei, in semitones (0.0 without nuclei):
            a question's terminal rise is positive.
        final_lift_st: how far the pitch rises inside the last nucleus to its end: the median
            pitch of its last three voiced frames minus its lowest pitch (a running median of
            three frames), in semitones (>= 0 but for tracker noise; 0.0 without three voiced
            frames). A question's terminal rise lifts its last syllable (espeak-ng "sure?",
            falling then rising, +2.1 to +6.4); a statement's final stress can step up to a
            last syllable that falls to its end (Piper "thank you.", "interesting.": 0-0.1,
            with `final_rise_st` +2.3 to +4.5).
        syllable_change_db: how much the sound changes from one nucleus to the next: the
            largest, over consecutive nuclei, mean absolute difference (dB) of their spectral
            envelopes (power in the `ENVELOPE_EDGES_HZ` bands over the nucleus, relative to its
            loudest band, floored at `ENVELOPE_FLOOR_DB`); 0.0 with fewer than two nuclei. A
            murmur repeats one sound ("mm-hmm", "uh-huh", "ha ha": 1-5 dB on espeak-ng and
            Piper), words change it ("okay", "I hope", "let me": 6-16 dB).
    """

    duration_ms: int
    voiced_ms: int
    nuclei: tuple[tuple[int, int], ...]
    gaps: tuple[Gap, ...]
    pitch_change_st: float
    level_dbfs: float
    sound_end_ms: int = 0
    final_rise_st: float = 0.0
    syllable_change_db: float = 0.0
    final_lift_st: float = 0.0

    @property
    def voiced_share(self) -> float:
        """Voiced part of the speech span (0-1)."""
        return self.voiced_ms / self.duration_ms if self.duration_ms else 0.0


def frame_autocorrelation(window: np.ndarray) -> tuple[np.ndarray, float, np.ndarray | None]:
    """One analysis frame (1-D float samples in [-1, 1]): the frame with its mean removed, its
    level (dBFS, RMS; -120 when silent) and that centred frame's autocorrelation at lags 0 to
    len - 1 (by FFT, zero-padded to twice its length so that no lag wraps; None when the frame
    is silent)."""
    centred = window - window.mean()
    energy = float(np.dot(centred, centred))
    level_dbfs = 10.0 * np.log10(energy / centred.size + 1e-12)
    if energy <= 0.0:
        return centred, level_dbfs, None
    spectrum = np.fft.rfft(centred, 2 * centred.size)
    return centred, level_dbfs, np.fft.irfft(spectrum * np.conj(spectrum))[:centred.size]


def analyse(pcm: np.ndarray, sample_rate_hz: int, room_dbfs: float | None = None) -> Prosody:
    """Measure the prosody of `pcm` (1-D float in [-1, 1] at `sample_rate_hz`).

    `room_dbfs`: the room's loud level (dBFS, server VAD's room background) under and around
    a short utterance, None when unknown. Frames below `room_floor.floor_dbfs` of it are
    silence for the nuclei and the speech span: the room's voices (babble, a TV) would
    otherwise be syllables of the person's utterance and its pitch their terminal rise. A gap
    between nuclei is aspirated only when it holds more than the room (`_gap`): an /h/
    stands above it, a closure filled with the room does not.

    Returns an empty `Prosody` (all zero, level -inf) for audio shorter than one frame or
    silent.
    """
    frame = sample_rate_hz * FRAME_MS // 1000
    hop = sample_rate_hz * HOP_MS // 1000
    pcm = np.asarray(pcm, dtype=np.float64)
    if pcm.size < frame:
        return Prosody(0, 0, (), (), 0.0, float("-inf"))
    starts = range(0, pcm.size - frame + 1, hop)
    levels = np.empty(len(starts))
    f0 = np.zeros(len(starts))
    lag_lo, lag_hi = int(sample_rate_hz / MAX_F0_HZ), int(sample_rate_hz / MIN_F0_HZ)
    for index, start in enumerate(starts):
        _, levels[index], autocorr = frame_autocorrelation(pcm[start:start + frame])
        if autocorr is None:
            continue
        lag = lag_lo + int(np.argmax(autocorr[lag_lo:lag_hi]))
        if autocorr[lag] / autocorr[0] > VOICING_THRESHOLD:
            f0[index] = sample_rate_hz / lag
    heard = levels.copy()
    floor = floor_dbfs(room_dbfs)
    if floor is not None:
        below = levels < floor
        levels[below], f0[below] = _SILENT_DB, 0.0
    peak = float(levels.max())
    if peak <= -100.0:
        return Prosody(0, 0, (), (), 0.0, float("-inf"))
    loud = np.flatnonzero(levels >= peak - SPEECH_RANGE_DB)
    first, last = int(loud[0]), int(loud[-1])
    voiced = (f0 > 0) & (levels >= peak - SPEECH_RANGE_DB)
    runs = _runs(voiced[first:last + 1], first)
    nuclei = [run for run in _bridge_dropouts(runs, levels, peak)
              if (run[1] - run[0]) * HOP_MS >= MIN_NUCLEUS_MS]
    gaps = tuple(_gap(heard, peak, before[1], after[0], room_dbfs)
                 for before, after in itertools.pairwise(nuclei))
    change = rise = lift = 0.0
    if len(nuclei) >= 2:
        change = 12.0 * float(np.log2(_median_f0(f0, nuclei[-1]) / _median_f0(f0, nuclei[0])))
    if nuclei:
        pitched = np.concatenate([f0[a:b][f0[a:b] > 0] for a, b in nuclei])
        ending = f0[nuclei[-1][0]:nuclei[-1][1]]
        final = ending[ending > 0][-(FINAL_MS // HOP_MS):]
        rise = float(np.median(_octave_folded(12.0 * np.log2(final / np.median(pitched)))))
        lift = _lift_st(ending[ending > 0])
    return Prosody(
        duration_ms=(last - first + 1) * HOP_MS + FRAME_MS - HOP_MS,
        voiced_ms=int(voiced.sum()) * HOP_MS,
        nuclei=tuple((a * HOP_MS, b * HOP_MS + FRAME_MS - HOP_MS) for a, b in nuclei),
        gaps=gaps, pitch_change_st=change, level_dbfs=peak,
        sound_end_ms=last * HOP_MS + FRAME_MS, final_rise_st=rise,
        syllable_change_db=_syllable_change_db(pcm, sample_rate_hz, nuclei, frame, hop),
        final_lift_st=lift,
    )


def _lift_st(track: np.ndarray) -> float:
    """`Prosody.final_lift_st` of one nucleus's voiced pitch `track` (Hz, in time order)."""
    if track.size < 3:
        return 0.0
    semitones = _octave_folded(12.0 * np.log2(track / np.median(track)))
    smoothed = np.median(np.lib.stride_tricks.sliding_window_view(semitones, 3), axis=1)
    return float(np.median(semitones[-3:]) - smoothed.min())


def _envelope_db(pcm: np.ndarray, sample_rate_hz: int, run: tuple[int, int], frame: int,
                 hop: int) -> np.ndarray:
    """Spectral envelope of the frames [start, end) of `run`: band powers (`ENVELOPE_EDGES_HZ`)
    of the Hann-windowed frames summed, in dB relative to the loudest band, floored at
    `ENVELOPE_FLOOR_DB`; shape (12,)."""
    frequencies = np.fft.rfftfreq(frame, 1.0 / sample_rate_hz)
    band = np.searchsorted(ENVELOPE_EDGES_HZ, frequencies, side="right") - 1
    inside = (band >= 0) & (band < len(ENVELOPE_EDGES_HZ) - 1)
    window = np.hanning(frame)
    power = np.zeros(len(ENVELOPE_EDGES_HZ) - 1)
    for index in range(run[0], run[1]):
        samples = pcm[index * hop:index * hop + frame]
        spectrum = np.abs(np.fft.rfft((samples - samples.mean()) * window)) ** 2
        power += np.bincount(band[inside], spectrum[inside], minlength=power.size)
    level = 10.0 * np.log10(power + 1e-20)
    return np.maximum(level - level.max(), ENVELOPE_FLOOR_DB)


def _syllable_change_db(pcm: np.ndarray, sample_rate_hz: int, nuclei: list[tuple[int, int]],
                        frame: int, hop: int) -> float:
    """`Prosody.syllable_change_db` of the frame runs `nuclei`."""
    envelopes = [_envelope_db(pcm, sample_rate_hz, run, frame, hop) for run in nuclei]
    return max((float(np.mean(np.abs(after - before)))
                for before, after in itertools.pairwise(envelopes)), default=0.0)


def _runs(flags: np.ndarray, offset: int) -> list[tuple[int, int]]:
    """[start, end) frame runs of True in `flags` (shifted by `offset`), bridging False runs
    shorter than `MERGE_GAP_MS`."""
    runs: list[tuple[int, int]] = []
    for index in np.flatnonzero(flags):
        at = int(index) + offset
        if runs and (at - runs[-1][1]) * HOP_MS < MERGE_GAP_MS:
            runs[-1] = (runs[-1][0], at + 1)
        else:
            runs.append((at, at + 1))
    return runs


def _bridge_dropouts(runs: list[tuple[int, int]], levels: np.ndarray,
                     peak: float) -> list[tuple[int, int]]:
    """`runs` with those split only by a loud unvoiced stretch (`DROPOUT_RANGE_DB`) joined."""
    joined: list[tuple[int, int]] = []
    for run in runs:
        if joined and float(np.mean(levels[joined[-1][1]:run[0]])) >= peak - DROPOUT_RANGE_DB:
            joined[-1] = (joined[-1][0], run[1])
        else:
            joined.append(run)
    return joined


def _gap(levels: np.ndarray, peak: float, start: int, end: int,
         room_dbfs: float | None = None) -> Gap:
    """The gap of frames [start, end) between two nuclei (`levels`: the frames' levels as
    heard, the room's included), aspirated when its mean level is within
    `ASPIRATION_RANGE_DB` of `peak` and above the room's loud level `room_dbfs` (if known).
    Measured over babble at -45 dBFS RMS (room -42 dBFS): espeak-ng's /h/ of "mm-hmm" and
    "uh-huh" is at -33 to -38 dBFS alone, -31 to -37 with the babble."""
    mean = float(np.mean(levels[start:end])) if end > start else peak
    level = mean - peak
    above_room = room_dbfs is None or mean >= room_dbfs
    return Gap((end - start) * HOP_MS, level, level >= -ASPIRATION_RANGE_DB and above_room)


def _octave_folded(semitones: np.ndarray) -> np.ndarray:
    """`semitones` less the whole octaves in each, in [-6, 6]: an autocorrelation tracker's
    octave errors (a lag of two periods, or half of one) move a frame's pitch by 12
    semitones, a terminal rise by less than an octave."""
    return semitones - 12.0 * np.round(semitones / 12.0)


def _median_f0(f0: np.ndarray, run: tuple[int, int]) -> float:
    voiced = f0[run[0]:run[1]]
    return float(np.median(voiced[voiced > 0]))
