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
