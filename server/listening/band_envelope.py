"""Band envelopes: a sound's level in a few speech bands every 10 ms, and a reply's envelope by
position in the reply.

`BandEnvelope` turns a stream of samples (any rate) into frames of band levels (dB re full
scale); `EchoReference` holds those of one reply's audio, recorded by the I/O layer as the audio
is queued for sending, for the echo detector (`server.listening.echo`) to compare with the
microphone's. Sans-I/O: plain objects and numpy.
"""

from __future__ import annotations

import itertools

import numpy as np

FRAME_MS = 10
"""Envelope frame step (ms)."""

ANALYSIS_MS = 30
"""Samples analysed for one envelope frame (ms, Hann window): longer than the step and than a
pitch period, so that the levels do not depend on where a frame cuts the voice's periods.
Measured: with non-overlapping 10 ms frames, an echo 5 ms off the 10 ms lag grid correlated only
0.60 (0.99 on the grid)."""

BAND_EDGES_HZ = (100.0, 400.0, 1000.0, 2000.0, 4000.0, 7000.0)
"""Edges of the envelope bands (Hz): five bands over the speech range below the 8 kHz Nyquist
frequency of the 16 kHz microphone stream."""

SILENCE_DB = -120.0
"""Band level of digital silence (dB re full scale)."""


class BandEnvelope:
    """Streaming band envelope: samples at `rate_hz` in, (frames, bands) levels in dB out.

    Every `FRAME_MS` of input gives one row, from the `ANALYSIS_MS` of samples ending there
    (zeros before the first sample) under a Hann window: for each band [lo, hi) of
    `BAND_EDGES_HZ`, 10 log10 of the band's share of the windowed mean square (twice the power
    spectrum summed over the band's FFT bins, over the window length times the sum of the
    squared window: a full-scale sine in the band reads -3 dB, its RMS level), at least
    `SILENCE_DB`. Samples of an unfinished frame wait for the next call.

    Raises:
        ValueError: `rate_hz` gives a frame shorter than 20 samples (below 2 kHz).
    """

    def __init__(self, rate_hz: int) -> None:
        self.frame_samples = rate_hz * FRAME_MS // 1000
        if self.frame_samples < 20:
            raise ValueError("rate_hz must be at least 2000")
        self._window_samples = rate_hz * ANALYSIS_MS // 1000
        self._window = np.hanning(self._window_samples + 2)[1:-1]
        freqs = np.fft.rfftfreq(self._window_samples, 1.0 / rate_hz)
        self._band_bins = [(int(np.searchsorted(freqs, lo)), int(np.searchsorted(freqs, hi)))
                           for lo, hi in itertools.pairwise(BAND_EDGES_HZ)]
        self._scale = 2.0 / (self._window_samples * float(np.sum(self._window ** 2)))
        self._history = np.zeros(self._window_samples - self.frame_samples, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)

    def feed(self, pcm: np.ndarray) -> np.ndarray:
        """Append 1-D float samples in [-1, 1]; return the (n, bands) levels of the newly
        completed frames (n may be 0)."""
        samples = np.asarray(pcm, dtype=np.float32).reshape(-1)
        buffer = np.concatenate((self._pending, samples)) if self._pending.size else samples
        count = buffer.size // self.frame_samples
        self._pending = buffer[count * self.frame_samples:].copy()
        if count == 0:
            return np.zeros((0, len(self._band_bins)))
        stream = np.concatenate((self._history, buffer[: count * self.frame_samples]))
        self._history = stream[stream.size - self._history.size:].copy()
        windows = np.lib.stride_tricks.sliding_window_view(
            stream, self._window_samples)[:: self.frame_samples]
        power = np.abs(np.fft.rfft(windows * self._window, axis=1)) ** 2
        # Band sums by slicing, not a matrix product: numpy's BLAS would keep its worker
        # threads spinning after every call (measured: +0.6 of a core at 25 sessions).
        bands = np.stack([power[:, lo:hi].sum(axis=1) for lo, hi in self._band_bins], axis=1)
        return np.maximum(10.0 * np.log10(np.maximum(bands * self._scale, 1e-30)), SILENCE_DB)


class EchoReference:
    """The band envelope of one reply's audio, by position in the reply.

    Append the reply's audio in order (`append`); frame i ends at reply position
    10 i + 10 ms (`BandEnvelope`). Positions outside what was appended read as silence.

    Args:
        rate_hz: sample rate of the reply audio (the session's output rate, 24000).
    """

    def __init__(self, rate_hz: int) -> None:
        self._envelope = BandEnvelope(rate_hz)
        self._frames: list[np.ndarray] = []
        self._count = 0
        self._levels = np.zeros((0, len(BAND_EDGES_HZ) - 1))

    def append(self, pcm: np.ndarray) -> None:
        """Add the next samples of the reply (1-D float in [-1, 1] at `rate_hz`)."""
        self.add_levels(self.envelope(pcm))

    def envelope(self, pcm: np.ndarray) -> np.ndarray:
        """The (frames, bands) levels of the reply's next samples (1-D float in [-1, 1] at
        `rate_hz`), for `add_levels`: the computing half of `append` (a few ms per second of
        audio), which may run on a worker thread. Call it in reply order, one call at a time;
        it touches only the streaming envelope, nothing `levels` or `add_levels` use."""
        return self._envelope.feed(pcm)

    def add_levels(self, rows: np.ndarray) -> None:
        """Add the levels `envelope` computed for the reply's next samples, in reply order."""
        if len(rows):
            self._frames.append(rows)
            self._count += len(rows)

    def levels(self, first: int, count: int) -> np.ndarray:
        """Levels (count, bands) of reference frames first .. first + count - 1; frames before
        0 or not appended yet are `SILENCE_DB`."""
        return self.rows(np.arange(first, first + count))

    def rows(self, indices: np.ndarray) -> np.ndarray:
        """Levels (len(indices), bands) of the reference frames at `indices` (1-D ints, any
        order, repeats allowed); frames before 0 or not appended yet are `SILENCE_DB`."""
        if len(self._levels) != self._count:
            self._levels = np.concatenate(self._frames) if self._frames else self._levels
            self._frames = [self._levels]
        out = np.full((len(indices), self._levels.shape[1]), SILENCE_DB)
        known = (indices >= 0) & (indices < self._count)
        out[known] = self._levels[indices[known]]
        return out

