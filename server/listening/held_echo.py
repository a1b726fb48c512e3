"""The microphone measured against the held echo path
(`server.listening.echo.EchoDetector.path`): the excess over its echo, what it explains, and how
far the microphone stands above its echo. Sans-I/O: numpy only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from server.listening.band_envelope import FRAME_MS
from server.listening.echo_path import (
    EXCESS_DB,
    EchoPath,
    aligned_at,
    echo_db,
    excess_db,
    explained_db,
    reverberant,
)
from server.listening.mic_timeline import MIN_FRAMES, MicTimeline, Stretch


@dataclass(frozen=True, slots=True, eq=False)
class EchoMatch:
    """The best match of a microphone stretch with the reply.

    Attributes:
        correlation: normalized correlation in [-1, 1] (0.0 when nothing could be compared).
        lag_ms: how long after its audio was estimated to play the microphone heard it, at
            that correlation (ms, within `LAG_RANGE_MS`; 0 when nothing could be compared).
        excess_db: per compared frame, how far the microphone rose above the echo (the
            reference at that lag, at the gain the echo has in the lead-in) plus the noise
            floor (dB, >= 0): what someone else in the room added (`echo_path.excess_db`).
        first_ms: stream position (ms) where the first compared frame's step begins; frame i
            covers [first_ms + 10 i, first_ms + 10 i + 10).
    """

    correlation: float
    lag_ms: int
    excess_db: np.ndarray = field(default_factory=lambda: np.zeros(0))
    first_ms: int = 0

    def unexplained_share(self, from_ms: int) -> float:
        """Share of the compared frames from `from_ms` on whose `excess_db` reaches
        `EXCESS_DB` (0.0 when there are none)."""
        excess = self.excess_db[max(0, (from_ms - self.first_ms) // FRAME_MS):]
        return float(np.mean(excess >= EXCESS_DB)) if excess.size else 0.0


class HeldEcho:
    """One session's microphone (`MicTimeline`) against the echo path its detector holds.

    Args:
        mic: the detector's microphone timeline.
        path: the held echo path now (`EchoDetector.path`; None while none is held).
    """

    def __init__(self, mic: MicTimeline, path: Callable[[], EchoPath | None]) -> None:
        self._mic = mic
        self._path = path

    def held_excess(self, from_ms: int, end_ms: int) -> EchoMatch | None:
        """The excess of the microphone from `from_ms` to `end_ms` over the held echo path (the
        reference with its reverberant tail at the path's lag, or the loudest over the lag
        range when the lag is unknown; at the path's gain) plus the noise floor, as an
        `EchoMatch` (correlation 0.0, the path's lag); None without a path, or with fewer than
        `MIN_FRAMES` tagged frames there."""
        held = self._stretch(from_ms, end_ms)
        if held is None:
            return None
        path, stretch, aligned = held
        excess = excess_db(stretch.mic, aligned, path.gain_db, stretch.floor)
        return EchoMatch(0.0, path.lag_ms or 0, excess, stretch.first_ms)

    def held_explained(self, from_ms: int, end_ms: int,
                       ) -> tuple[np.ndarray, np.ndarray, int] | None:
        """The microphone's band levels from `from_ms` to `end_ms` (ms on this stream) and the
        levels the held echo path and the noise explain there (`echo_path.explained_db`: the
        reverberant reference at the path's lag and gain, each frame the loudest within
        `EXCESS_SLACK_FRAMES`, plus the noise floor with its margin): (microphone, explained,
        first_ms), both (frames, bands) in dB, frame i ending at first_ms + 10 i + 10 ms. A
        band where the path heard no echo takes the lowest gain of the bands where it did (the
        echo is there, under the noise floor when the path was learned: taken for nothing, a
        -30 dB reverberant echo's 2-4 kHz band passed whole and Silero heard speech in it).
        None without a held path whose echo was heard (a lag), or with fewer than `MIN_FRAMES`
        tagged frames there."""
        held = self._stretch(from_ms, end_ms)
        if held is None or held[0].lag_ms is None:
            return None
        path, stretch, aligned = held
        gain = _heard_gain(path)
        return stretch.mic, explained_db(aligned, gain, stretch.floor), stretch.first_ms

    def over_echo_db(self, from_ms: int, end_ms: int) -> float | None:
        """How far (dB) the microphone's power in its frames ending in (`from_ms`, `end_ms`]
        (ms on this stream) stands above the power of the held echo path's echo there, all
        bands together (`echo_db`: the reference at the path's lag and gain, each frame the
        loudest within `EXCESS_SLACK_FRAMES`, an overestimate; a band where the path heard no
        echo at the lowest gain of the bands where it did, as `held_explained`): what the
        echo does not explain is the room's (`server.listening.room_background`). +inf where
        the echo is silent. None without a held path whose echo was heard (a lag), or with
        fewer than `MIN_FRAMES` tagged frames in the `MIN_FRAMES` before `end_ms`."""
        held = self._stretch(min(from_ms, end_ms - MIN_FRAMES * FRAME_MS), end_ms)
        if held is None or held[0].lag_ms is None:
            return None
        path, stretch, aligned = held
        gain = _heard_gain(path)
        frames = slice(max(self._mic.index(from_ms) - stretch.lo, 0), stretch.count)
        mic = float(np.sum(10.0 ** (stretch.mic[frames] / 10.0)))
        echo = float(np.sum(10.0 ** (echo_db(aligned, gain)[frames] / 10.0)))
        if echo <= 0.0:
            return float("inf")
        return 10.0 * np.log10(max(mic, 1e-30) / echo)

    def _stretch(self, from_ms: int, end_ms: int,
                      ) -> tuple[EchoPath, Stretch, np.ndarray] | None:
        """The held path, the microphone's stretch from `from_ms` to `end_ms` (ms on this
        stream) and the reference with its reverberant tail at the path's lag there (the
        loudest over the lag range when the lag is unknown); None without a path, or with
        fewer than `MIN_FRAMES` tagged frames there."""
        path = self._path()
        if path is None:
            return None
        stretch = self._mic.stretch(self._mic.index(from_ms), self._mic.index(end_ms), 0)
        if stretch is None:
            return None
        return path, stretch, aligned_at(reverberant(stretch.block), stretch.count,
                                         stretch.max_lag, path.lag_ms)


def _heard_gain(path: EchoPath) -> np.ndarray:
    """The path's echo gain per band (dB), a band where it heard no echo (-inf) at the lowest
    gain of the bands where it did (`HeldEcho.held_explained`). The path has a lag: some band
    heard the echo."""
    heard = np.isfinite(path.gain_db)
    return np.where(heard, path.gain_db, path.gain_db[heard].min())
