"""PCM16 audio as the protocol carries it (signed 16-bit little-endian mono samples)."""

from __future__ import annotations

import numpy as np


def pcm16_to_float(pcm16: bytes) -> np.ndarray:
    """PCM16 LE bytes (an even count) -> float32 samples in [-1, 1), scaled by 1/32768.

    Raises:
        ValueError: an odd number of bytes.
    """
    return np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0


def float_to_pcm16(pcm: np.ndarray) -> bytes:
    """Float32 samples in [-1, 1] -> PCM16 LE bytes (clipped, scaled by 32767)."""
    return (np.clip(pcm, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
