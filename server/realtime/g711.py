"""G.711 companding: mu-law (`audio/pcmu`) and A-law (`audio/pcma`) <-> 16-bit linear PCM.

ITU-T Recommendation G.711 (11/1988), in the form of Sun Microsystems' public-domain `g711.c`
(which CPython's `audioop` also follows, bit for bit): mu-law on the 14-bit value (the 16-bit
one shifted right by 2; bias 0x21, clip 8159), A-law on the 13-bit value (shifted right by 3),
each code with its bits inverted as transmitted. Every conversion is a table lookup: 256
entries to decode, 65536 (one per 16-bit sample) to encode. Sans-I/O, pure functions.
"""

from __future__ import annotations

import numpy as np

_ULAW_BIAS = 0x84
_ULAW_CLIP = 8159
_ULAW_SEGMENT_ENDS = (0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF)
_ALAW_SEGMENT_ENDS = (0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF)


def _ulaw_encode_one(sample: int) -> int:
    value = sample >> 2
    if value < 0:
        value, mask = -value, 0x7F
    else:
        mask = 0xFF
    value = min(value, _ULAW_CLIP) + (_ULAW_BIAS >> 2)
    segment = next((i for i, end in enumerate(_ULAW_SEGMENT_ENDS) if value <= end), 8)
    if segment >= 8:
        return 0x7F ^ mask
    return ((segment << 4) | ((value >> (segment + 1)) & 0x0F)) ^ mask


def _ulaw_decode_one(code: int) -> int:
    code = ~code & 0xFF
    magnitude = (((code & 0x0F) << 3) + _ULAW_BIAS) << ((code >> 4) & 0x07)
    return _ULAW_BIAS - magnitude if code & 0x80 else magnitude - _ULAW_BIAS


def _alaw_encode_one(sample: int) -> int:
    value = sample >> 3
    if value >= 0:
        mask = 0xD5
    else:
        mask = 0x55
        value = -value - 1
    segment = next((i for i, end in enumerate(_ALAW_SEGMENT_ENDS) if value <= end), 8)
    if segment >= 8:
        return 0x7F ^ mask
    code = segment << 4
    code |= (value >> 1 if segment < 2 else value >> segment) & 0x0F
    return code ^ mask


def _alaw_decode_one(code: int) -> int:
    code ^= 0x55
    magnitude = (code & 0x0F) << 4
    segment = (code & 0x70) >> 4
    if segment == 0:
        magnitude += 8
    else:
        magnitude += 0x108
        if segment > 1:
            magnitude <<= segment - 1
    return magnitude if code & 0x80 else -magnitude


_SAMPLES = range(-32768, 32768)
_ULAW_ENCODE = np.roll(np.array([_ulaw_encode_one(s) for s in _SAMPLES], np.uint8), -32768)
_ALAW_ENCODE = np.roll(np.array([_alaw_encode_one(s) for s in _SAMPLES], np.uint8), -32768)
"""Encoding tables indexed by the 16-bit sample's two's-complement bit pattern (uint16)."""
_ULAW_DECODE = np.array([_ulaw_decode_one(c) for c in range(256)], np.int16)
_ALAW_DECODE = np.array([_alaw_decode_one(c) for c in range(256)], np.int16)

LAWS = ("audio/pcmu", "audio/pcma")
"""The OpenAI Realtime format names of the two laws."""


def encode(pcm16: bytes, law: str) -> bytes:
    """PCM16 LE mono -> one G.711 byte per sample.

    Args:
        pcm16: 16-bit little-endian samples (an even byte count).
        law: "audio/pcmu" (mu-law) or "audio/pcma" (A-law).

    Raises:
        ValueError: an odd byte count.
        KeyError: another `law`.
    """
    table = {"audio/pcmu": _ULAW_ENCODE, "audio/pcma": _ALAW_ENCODE}[law]
    if len(pcm16) % 2:
        raise ValueError("PCM16 audio must have an even byte count.")
    return table[np.frombuffer(pcm16, dtype="<i2").view(np.uint16)].tobytes()


def decode(codes: bytes, law: str) -> bytes:
    """One G.711 byte per sample -> PCM16 LE mono (two bytes per sample).

    Raises:
        KeyError: a `law` other than "audio/pcmu" or "audio/pcma".
    """
    table = {"audio/pcmu": _ULAW_DECODE, "audio/pcma": _ALAW_DECODE}[law]
    return table[np.frombuffer(codes, dtype=np.uint8)].astype("<i2").tobytes()
