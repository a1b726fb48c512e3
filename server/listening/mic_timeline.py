"""The microphone as the echo detector sees it: band levels on the stream's timeline, each
10 ms frame tagged with the reply position that was playing when it was captured.

`MicTimeline` keeps the 16 kHz microphone's band envelope (`server.listening.band_envelope`:
every 10 ms, the energy of the last 30 ms per band, in dB) for a bounded time, with the
playing reply's `EchoReference`, and answers three questions the echo detector
(`server.listening.echo.EchoDetector`) asks of it:

- which reference frame the loudspeaker played while each microphone frame was captured
  (`playing_frames`: the tags are estimates; playback never runs faster than real time, never
  goes back, and a position that stands still is a loudspeaker fallen silent);
- the microphone's noise floor per band (`noise_floor`, minimum statistics);
- a stretch of microphone frames beside the reference as played at every lag searched
  (`stretch` -> `Stretch`), for the lag search and the excess over the echo
  (`server.listening.echo_path`).

Frame k of the stream ends at 10 k + 10 ms; the kept frames are those from `first` on. Sans-I/O:
plain objects and numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from server.listening.band_envelope import (
    BAND_EDGES_HZ,
    FRAME_MS,
    SILENCE_DB,
    BandEnvelope,
    EchoReference,
)
from server.listening.echo_path import EXCESS_SLACK_FRAMES, NOISE_MARGIN_DB

LAG_RANGE_MS = (-200, 1200)
"""Delays searched (ms) of the microphone behind the moment its audio was estimated to play (by
the position the session estimated for each append's capture): the estimate
(`ReplyPlayback.position_ms`) misses the client's output and capture latency, the network
(the ACK's age and the append's) and the room, so the microphone is normally behind it; ahead
of it by up to 200 ms when an ACK was late. Behind it by up to 1.2 s: a Bluetooth or USB
loudspeaker plays 100 ms to about 1 s late, and the estimate adds its own error (a speaker
700 ms late was found 720-740 ms late over loopback). With 800 ms, an echo 800 ms late started a
turn offline with exact positions. The search's cost grows with the range: the echo detector's
CPU per second of microphone audio, a candidate judged every 40 ms, 12.9-13.4 ms at 800 ms and
15.5-16.2 ms at 1.2 s (`benchmarks/bench_echo_cpu.py`, the min of 5 runs, four times each,
interleaved, load 1.6-3.3)."""

MIN_FRAMES = 20
"""Fewer tagged frames than this (200 ms) are never called echo."""

MIC_RATE_HZ = 16_000
"""Rate of the microphone stream `EchoDetector` takes (the VAD's)."""

NOISE_HISTORY_MS = 4000
"""Microphone levels kept for the noise floor estimate (ms): long enough that speech, even
dense speech, leaves pauses and closures in it."""

NOISE_PERCENTILE = 5.0
"""The microphone's noise floor in each band: this percentile of its levels over
`NOISE_HISTORY_MS` (a minimum-statistics estimate, after R. Martin, "Noise power spectral
density estimation based on optimal smoothing and minimum statistics", IEEE Trans. Speech and
Audio Processing 9(5), 2001, without the bias compensation: the margin below covers it)."""

NOISE_MIN_MS = 250
"""Least microphone audio (ms) the noise floor is estimated from; before it, `SILENCE_DB`. The
page streams its microphone from the session's start and a first reply may play within
250 ms: its echo's first words are judged before a second was heard. Measured (a -30 dB Piper
echo 150-400 ms late, over -60 / -50 dBFS RMS pink noise, microphone from the reply's start):
while the floor waited for a full second, the echo correlated 0.52-0.89 there (0.99-1.0 after
it), and over the protocol it started a turn in 1 of 12 runs on a loaded machine (CI)."""

STALL_FRAMES = 5
"""Frames (50 ms) a reply position must stand still for the loudspeaker to count as silent
(`MicTimeline.playing_frames`): a client that played all it had waits for more, and a paused
reply stops, while the session's estimate stays at the audio sent (the pause's position). The
estimate's own jitter holds a position for shorter: its corrections (an ACK, an append arriving
late) are tens of ms, and the echo detector's offline tests move it +-20 ms per append."""


class MicTimeline:
    """The microphone's band levels, each frame tagged with the reply position playing then.

    Args:
        keep_ms: how much of the latest audio is kept (ms); older frames are forgotten (from
            then on `first` counts them).

    Feed the 16 kHz microphone stream in order (`feed`); frame indices below are into the
    kept frames (`index` maps a stream position to one), frame i of them ends at
    (first + i) x 10 + 10 ms of the stream.
    """

    def __init__(self, keep_ms: int) -> None:
        self._keep_frames = keep_ms // FRAME_MS
        self._envelope = BandEnvelope(MIC_RATE_HZ)
        self._levels = np.zeros((0, len(BAND_EDGES_HZ) - 1))
        self._offsets = np.zeros(0)
        self._first = 0
        self._received = 0
        self._reference: EchoReference | None = None
        self._played_ms = -np.inf

    @property
    def first(self) -> int:
        """Stream frame index of the first kept frame (frames forgotten before it)."""
        return self._first

    @property
    def levels(self) -> np.ndarray:
        """The kept frames' band levels (frames, bands; dB)."""
        return self._levels

    @property
    def end(self) -> int:
        """Stream frame index after the last kept frame (frames analysed so far)."""
        return self._first + len(self._levels)

    def index(self, ms: int) -> int:
        """The kept-frame index of the frame whose step starts at stream position `ms` (floor;
        negative before the kept frames)."""
        return ms // FRAME_MS - self._first

    def feed(self, pcm_16k: np.ndarray, playback_ms: int | None,
             reference: EchoReference | None) -> None:
        """Append microphone samples (1-D float at 16 kHz).

        Args:
            pcm_16k: the new samples.
            playback_ms: reply position (ms) playing when the last of these samples arrived,
                or None when no reply plays; earlier samples map to earlier positions.
            reference: the envelope of that reply (None: nothing to compare with; these
                frames are untagged, the earlier ones stay comparable with the previous
                reference: a stretch reaching back into the echo's tail is still judged).
                Frames fed with another reference before are forgotten as comparable.
        """
        samples = np.asarray(pcm_16k, dtype=np.float32).reshape(-1)
        if reference is not None and reference is not self._reference:
            self._offsets[:] = np.nan
            self._reference = reference
            self._played_ms = -np.inf
        if reference is not None and playback_ms is not None:
            self._played_ms = max(self._played_ms, playback_ms)
        end_ms = (self._received + samples.size) * 1000 / MIC_RATE_HZ
        self._received += samples.size
        rows = self._envelope.feed(samples)
        count = len(rows)
        if count == 0:
            return
        offset = np.nan if playback_ms is None or reference is None else playback_ms - end_ms
        self._levels = np.concatenate((self._levels, rows))
        self._offsets = np.concatenate((self._offsets, np.full(count, offset)))
        excess = len(self._levels) - self._keep_frames
        if excess > 0:
            self._levels = self._levels[excess:]
            self._offsets = self._offsets[excess:]
            self._first += excess

    def stretch(self, lo: int, hi: int, extra: int, played_only: bool = False,
                ) -> Stretch | None:
        """The kept frames [lo, hi) and the `extra` frames after them, with the reference
        played for every lag of `LAG_RANGE_MS` (`Stretch`); None when fewer than `MIN_FRAMES`
        of [lo, hi) are kept and tagged. With `played_only`, the reply after the latest
        position fed (plus `EXCESS_SLACK_FRAMES`) reads as silence: it was sent but not played
        (a paused reply)."""
        reference = self._reference
        lo, hi = max(lo, 0), min(hi, len(self._levels))
        if reference is None or hi - lo < MIN_FRAMES:
            return None
        offsets = self._offsets[lo:hi]
        if int(np.count_nonzero(~np.isnan(offsets))) < MIN_FRAMES:
            return None
        extra = max(min(extra, len(self._levels) - hi), 0)
        min_lag, max_lag = (lag // FRAME_MS for lag in LAG_RANGE_MS)
        playing = self.playing_frames(lo - max_lag, hi + extra - min_lag)
        if played_only:
            played = int(self._played_ms // FRAME_MS) + EXCESS_SLACK_FRAMES
            playing[playing > played] = -1
        return Stretch(lo, (self._first + lo) * FRAME_MS, hi - lo, max_lag,
                       self._levels[lo:hi + extra], reference.rows(playing),
                       self.noise_floor() + NOISE_MARGIN_DB)

    def playing_frames(self, start: int, stop: int) -> np.ndarray:
        """The reference frame the loudspeaker played while each kept frame start .. stop - 1
        was captured (indices may reach outside the kept frames), -1 where it played nothing.

        From the frames' tags (reply position minus stream time), linearly interpolated over
        untagged frames and carried on at real time beyond the first and last tagged ones.
        Playback never runs faster than real time, so the true offset (position minus time)
        never grows: each frame takes the largest offset tagged from it on (a later ACK that
        found the client further on than estimated moves the frames before it on too; with
        ACKs every 500 ms, the estimate before the first one was 140 ms behind the client's
        start and the echo there started a turn). Nor does playback go back: the positions
        are a running maximum (which also undoes the real-time assumption within an append
        whose position stood still). A position held for `STALL_FRAMES` or longer is a
        loudspeaker fallen silent (the client played all it had and waits for more, or the
        reply is paused)."""
        offsets = self._offsets
        tagged = np.flatnonzero(~np.isnan(offsets))
        frames = np.arange(min(start, 0), max(stop, len(offsets)))
        filled = np.interp(frames, tagged, offsets[tagged])
        latest = np.maximum.accumulate(filled[::-1])[::-1]
        positions = frames + self._first + latest / FRAME_MS
        playing = np.maximum.accumulate(np.round(positions).astype(np.int64))
        playing[STALL_FRAMES:][playing[STALL_FRAMES:] == playing[:-STALL_FRAMES]] = -1
        return playing[start - frames[0]:stop - frames[0]]

    def noise_floor(self) -> np.ndarray:
        """The microphone's noise floor per band (dB): the `NOISE_PERCENTILE` percentile of
        the levels of the last `NOISE_HISTORY_MS`; `SILENCE_DB` before `NOISE_MIN_MS` was
        heard."""
        recent = self._levels[-(NOISE_HISTORY_MS // FRAME_MS):]
        if len(recent) < NOISE_MIN_MS // FRAME_MS:
            return np.full(len(BAND_EDGES_HZ) - 1, SILENCE_DB)
        return np.percentile(recent, NOISE_PERCENTILE, axis=0)


@dataclass(frozen=True, slots=True, eq=False)
class Stretch:
    """Microphone frames and the reference played for every lag (`MicTimeline.stretch`).

    Attributes:
        lo: index of the first frame in the kept levels.
        first_ms: stream position (ms) where that frame's step begins.
        count: frames compared (the rest of `mic` are extra frames judged at the same lag).
        max_lag: the lag (frames) of `block`'s window 0: window i is at lag max_lag - i.
        mic: the microphone's levels (count + extra, bands; dB).
        block: the reference's levels as played, for every lag (count + extra + lags - 1,
            bands; dB).
        floor: the noise floor plus `NOISE_MARGIN_DB` per band (dB).
    """

    lo: int
    first_ms: int
    count: int
    max_lag: int
    mic: np.ndarray
    block: np.ndarray
    floor: np.ndarray

