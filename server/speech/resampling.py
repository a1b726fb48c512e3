"""Sample-rate conversion of float32 mono audio (soxr, high quality)."""

from __future__ import annotations

import numpy as np
import soxr


def resample(pcm: np.ndarray, from_hz: int, to_hz: int) -> np.ndarray:
    """Resample float32 mono PCM from `from_hz` to `to_hz` with soxr (HQ); identity when equal.

    The output has round(len(pcm) * to_hz / from_hz) samples, dtype float32.

    Raises:
        ValueError: a rate is not positive.
    """
    if from_hz <= 0 or to_hz <= 0:
        raise ValueError(f"sample rates must be positive, got {from_hz} and {to_hz}")
    samples = np.asarray(pcm, dtype=np.float32)
    if from_hz == to_hz:
        return samples
    return np.asarray(soxr.resample(samples, from_hz, to_hz), dtype=np.float32)


class StreamResampler:
    """Resample the consecutive chunks of one stream (one reply piece) as if they were one
    array, with soxr's streaming HQ resampler.

    Chunks resampled one by one are each cut off at their edges: where a chunk ends inside a
    word (Piper's sentence heads) that is a click (measured: 0.10 of full scale at such a
    boundary, against no difference from whole-array resampling when streamed). The stream
    keeps back the last few ms of each chunk (about 18 ms from 22050 to 24000 Hz) until the
    next one arrives; `feed` returns them apart from the new chunk's own samples, so that the
    new chunk's output starts at its exact place (to half a sample) and marks relative to its
    first sample need no shift.
    """

    def __init__(self, from_hz: int, to_hz: int) -> None:
        """A stream from `from_hz` to `to_hz` (identity when equal).

        Raises:
            ValueError: a rate is not positive.
        """
        if from_hz <= 0 or to_hz <= 0:
            raise ValueError(f"sample rates must be positive, got {from_hz} and {to_hz}")
        self._from_hz = from_hz
        self._to_hz = to_hz
        self._stream = (None if from_hz == to_hz
                        else soxr.ResampleStream(from_hz, to_hz, 1, dtype="float32"))
        self._taken = 0
        self._given = 0

    def feed(self, pcm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Resample the next chunk (float32 mono). Returns (held, own): `held` the samples
        still owed to the earlier chunks, `own` this chunk's output so far, starting at its
        first sample (empty for a chunk shorter than what the stream keeps back)."""
        samples = np.asarray(pcm, dtype=np.float32)
        if self._stream is None:
            return np.zeros(0, dtype=np.float32), samples
        owed = (self._taken * self._to_hz + self._from_hz // 2) // self._from_hz - self._given
        out = np.asarray(self._stream.resample_chunk(samples), dtype=np.float32)
        self._taken += len(samples)
        self._given += len(out)
        split = min(max(owed, 0), len(out))
        return out[:split], out[split:]

    def flush(self) -> np.ndarray:
        """The samples the stream still holds (after the last chunk); empty when none."""
        if self._stream is None:
            return np.zeros(0, dtype=np.float32)
        out = np.asarray(self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True),
                         dtype=np.float32)
        self._given += len(out)
        return out
