"""The room's background (babble, a TV, a fan) and the person's own level: which candidate
turns are the person. Sans-I/O: 16 kHz samples in, verdicts out.

Silero scores any speech as speech whatever its level (five-talker babble at -65 dBFS RMS
reaches 0.5 on 69 % of its windows, a TV talker at -45 dBFS on 89 %), so server VAD alone
takes the room's chatter for a turn, and a turn over steady babble never ends. `RoomBackground`
follows the same 512-sample windows as `server.listening.silero_vad.SileroStreamingVad` and keeps:

- the background: the band levels (`BANDS_HZ`) of the last `HISTORY_MS` of windows heard
  outside turns and outside the assistant's playback (the echo is `server.listening.echo`'s
  business), learned once they are `SETTLE_MS` old (a candidate turn that started by then
  keeps its windows out), plus the windows before a candidate's start;
- the person's level: the `LOUD_PERCENTILE` level of the windows of the person's recent turns
  (`PERSON_HISTORY_MS`), `PERSON_PRIOR_DBFS` before the first one.

A candidate is the person (`is_background` False) when its loudest window reaches the
person's level less `NEAR_DB`, and, once a background is known, one of its windows holds
`ABOVE_DB` more energy than the background's `LOUD_PERCENTILE` band levels explain (energy
counted band by band: a voice stands out where a fan's rumble or a TV's treble does not).
Inside a turn, a window continues the person's speech when it holds `CONTINUE_DB` more; when
no background was learned yet (the microphone started while a reply played), the room heard
in the second before the turn, reply and all, stands in for it there.
A turn that ran into `TurnDetectionConfig.max_turn_ms` is taken for background, not for the
person (`turn_stopped(forced=True)`).

Levels are dB relative to full scale 1.0 (a full-scale sine's RMS is -3 dBFS); window levels
are RMS over 32 ms, as `VadWindow.level_dbfs`. Measured on `tests/room_sounds.py`'s babble
and TV at -45 dBFS RMS (`benchmarks/bench_rooms.py`): the babble's windows reach -39 dBFS,
the TV's -36 dBFS, while a person at -20 dBFS RMS reaches -11 dBFS and their 90th percentile
window is at -14 dBFS.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import numpy as np

from server.listening.silero_vad import SAMPLE_RATE_HZ, SILENCE_DBFS, WINDOW_MS, WINDOW_SAMPLES

BANDS_HZ = ((100, 300), (300, 700), (700, 1500), (1500, 3000), (3000, 5000), (5000, 8000))
"""Bands (Hz) whose energy is compared with the background's: the voice's fundamental, first
and second formants, fricatives."""

HISTORY_MS = 10_000
"""Background windows kept: the last 10 s heard outside turns."""

PERSON_HISTORY_MS = 10_000
"""Window levels of the person's turns kept: their last 10 s of turn audio."""

SETTLE_MS = 1_000
"""Age (ms) at which a window not in a turn becomes background: longer than a candidate turn
takes to start (`min_speech_ms` 250 ms plus its lookback), so a person's first words are never
learned as the room."""

LOUD_PERCENTILE = 90.0
"""How loud the background gets, and how loud the person speaks: this percentile of the
windows' levels (the background band by band)."""

ABOVE_DB = 12.0
"""Energy above what the background explains, over that background (dB), that one window of
a candidate must hold. Measured on `tests/room_sounds.py`'s backgrounds at -45 dBFS RMS (three
seeds, 25 s each, after 15 s learned; 8-window candidates): the loudest window of babble's
held at most 2.5 dB (99th percentile 1.5 dB), a TV talker's 5.3 dB (4.9 dB)."""

CONTINUE_DB = 8.0
"""The same excess (dB) that a window inside a turn must hold to continue it once a background
is known (the person's softer sounds included): below, it counts toward the turn's silence
like a window Silero scores as non-speech, so the room talking on does not hold the turn."""

NEAR_DB = 20.0
"""How far below the person's level (dB) a candidate's loudest window may stay (a design
margin, not fitted: room for a murmur or a quiet "wait" said well below full voice; a TV at
-45 dBFS RMS stays 22 dB below a person at -20 dBFS RMS, loudest window to 90th percentile)."""

PERSON_PRIOR_DBFS = -12.0
"""The person's level before their first turn (dBFS, `LOUD_PERCENTILE` window level): a voice
of about -20 dBFS RMS (measured: Piper at -20 dBFS RMS has its 90th percentile window at -14
dBFS, its loudest at -11). With `NEAR_DB`, a candidate's loudest window then needs -32 dBFS:
a voice of about -40 dBFS RMS or more, above a TV talker at -45 dBFS RMS (loudest window
-36 dBFS)."""


def band_levels(windows: np.ndarray) -> np.ndarray:
    """Band powers (dBFS, `BANDS_HZ`) of (n, `WINDOW_SAMPLES`) windows at 16 kHz: (n, bands).

    Power per band is the sum of the Hann-windowed periodogram bins in it, scaled so that the
    bands of white noise add up to its mean square. Digital silence gives `SILENCE_DBFS`."""
    taper = np.hanning(WINDOW_SAMPLES)
    spectrum = np.abs(np.fft.rfft(windows * taper, axis=1)) ** 2
    spectrum *= 2.0 / (WINDOW_SAMPLES * np.sum(taper ** 2))
    freqs = np.fft.rfftfreq(WINDOW_SAMPLES, 1.0 / SAMPLE_RATE_HZ)
    powers = np.stack([spectrum[:, (freqs >= low) & (freqs < high)].sum(axis=1)
                       for low, high in BANDS_HZ], axis=1)
    return 10.0 * np.log10(np.maximum(powers, 10.0 ** (SILENCE_DBFS / 10.0)))


@dataclass(slots=True)
class _Window:
    end_ms: int
    level_dbfs: float
    bands_db: np.ndarray
    playing: bool
    in_turn: bool | None = None


_HISTORY_WINDOWS = HISTORY_MS // WINDOW_MS
_PERSON_WINDOWS = PERSON_HISTORY_MS // WINDOW_MS


@dataclass(slots=True)
class _Turn:
    """The windows of the turn in progress (its last `HISTORY_MS`), and the band levels of the
    windows heard before it that were not yet learned (playback included)."""

    levels: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=_PERSON_WINDOWS))
    bands: collections.deque[np.ndarray] = field(
        default_factory=lambda: collections.deque(maxlen=_HISTORY_WINDOWS))
    before: list[np.ndarray] = field(default_factory=list)


class RoomBackground:
    """The room's background and the person's level over one 16 kHz input stream.

    Feed the stream in order (`feed`, any piece size: windows are cut as Silero cuts them,
    so `end_ms` matches `VadWindow.end_ms`); say when the turn detector takes each window
    (`advance`) and where turns start and stop (`turn_started`, `turn_stopped`); ask
    `is_background` about a candidate. A window is classified (the person's, or the room's
    once `SETTLE_MS` old) only as the turn detector reaches it, so a large append is learned
    as 40 ms appends are. Positions are ms from the first sample fed. Not thread-safe (one
    caller per instance).
    """

    def __init__(self) -> None:
        self._pending = np.zeros(0, dtype=np.float32)
        self._windows = 0
        self._recent: collections.deque[_Window] = collections.deque()
        self._background: collections.deque[np.ndarray] = collections.deque(
            maxlen=_HISTORY_WINDOWS)
        self._person: collections.deque[float] = collections.deque(maxlen=_PERSON_WINDOWS)
        self._turn: _Turn | None = None

    @property
    def person_dbfs(self) -> float:
        """The person's level (dBFS): `LOUD_PERCENTILE` of their recent turns' window levels,
        `PERSON_PRIOR_DBFS` before their first turn."""
        if not self._person:
            return PERSON_PRIOR_DBFS
        return float(np.percentile(self._person, LOUD_PERCENTILE))

    def feed(self, pcm_16k: np.ndarray, playing: bool) -> None:
        """Append 16 kHz float samples; `playing`: the assistant's reply (or its echo tail)
        may be in them, so their windows are never learned as background.

        Raises:
            ValueError: the input is not 1-D.
        """
        samples = np.asarray(pcm_16k, dtype=np.float32)
        if samples.ndim != 1:
            raise ValueError("pcm_16k must be a 1-D array")
        buffer = np.concatenate((self._pending, samples)) if self._pending.size else samples
        count = buffer.size // WINDOW_SAMPLES
        self._pending = buffer[count * WINDOW_SAMPLES:].copy()
        if count == 0:
            return
        frames = buffer[:count * WINDOW_SAMPLES].reshape(count, WINDOW_SAMPLES)
        powers = np.mean(np.square(frames, dtype=np.float64), axis=1)
        levels = 10.0 * np.log10(np.maximum(powers, 10.0 ** (SILENCE_DBFS / 10.0)))
        for level, bands in zip(levels, band_levels(frames), strict=True):
            self._windows += 1
            self._recent.append(_Window(self._windows * WINDOW_MS, float(level), bands, playing))

    def advance(self, end_ms: int) -> None:
        """The turn detector takes the windows up to the one ending at `end_ms` (ms): they
        belong to the turn in progress, if any; windows `SETTLE_MS` older outside turns and
        playback become background."""
        for window in self._recent:
            if window.end_ms > end_ms:
                break
            if window.in_turn is None:
                window.in_turn = self._turn is not None
                if self._turn is not None:
                    self._turn.levels.append(window.level_dbfs)
                    self._turn.bands.append(window.bands_db)
        while self._recent and self._recent[0].end_ms <= end_ms - SETTLE_MS:
            window = self._recent.popleft()
            if not window.in_turn and not window.playing:
                self._background.append(window.bands_db)

    def turn_started(self, start_ms: int) -> None:
        """A turn started at `start_ms` (its speech start, ms): its windows from there on are
        the person's, never background."""
        self._turn = _Turn()
        for window in self._recent:
            if window.end_ms <= start_ms and window.in_turn is False:
                self._turn.before.append(window.bands_db)
            elif window.end_ms > start_ms and window.in_turn is not None:
                window.in_turn = True
                self._turn.levels.append(window.level_dbfs)
                self._turn.bands.append(window.bands_db)

    def turn_stopped(self, forced: bool = False) -> None:
        """The turn ended: its window levels become the person's level, or, when `forced` (it
        ran into the longest turn: speech that never paused), its windows become background."""
        turn, self._turn = self._turn, None
        if turn is None:
            return
        if forced:
            self._background.extend(turn.bands)
        else:
            self._person.extend(turn.levels)

    def is_background(self, start_ms: int, end_ms: int) -> bool:
        """True when the speech whose windows end in (`start_ms`, `end_ms`] (ms) is the room
        rather than the person: its loudest window stays more than `NEAR_DB` below the
        person's level, or no window of it holds `ABOVE_DB` more energy than the background's
        loud band levels explain. While a turn is in progress only the second rule holds,
        with `CONTINUE_DB`. False when none of its windows were fed."""
        candidate = [w for w in self._recent if start_ms < w.end_ms <= end_ms]
        if not candidate:
            return False
        in_turn = self._turn is not None
        if not in_turn and max(w.level_dbfs for w in candidate) < self.person_dbfs - NEAR_DB:
            return True
        background = list(self._background) + [
            w.bands_db for w in self._recent
            if w.end_ms <= start_ms and not w.in_turn and not w.playing]
        if not background and self._turn is not None:
            background = self._turn.before
        if not background:
            return False
        loud = 10.0 ** (np.percentile(np.stack(background), LOUD_PERCENTILE, axis=0) / 10.0)
        powers = 10.0 ** (np.stack([w.bands_db for w in candidate]) / 10.0)
        excess = np.maximum(powers - loud, 0.0).sum(axis=1).max()
        margin_db = CONTINUE_DB if in_turn else ABOVE_DB
        return bool(excess < loud.sum() * 10.0 ** (margin_db / 10.0))
