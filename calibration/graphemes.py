"""Extended grapheme clusters (Unicode UAX #29), so that no cut splits a user-perceived
character.

Rules GB1-GB13: CR LF, controls, Hangul syllable sequences, Extend / ZWJ / SpacingMark, emoji ZWJ
sequences, regional-indicator flags. Not implemented: Prepend (GB9b) and the Indic conjunct rule
(GB9c); the Extended_Pictographic table is the Unicode 15 emoji-data ranges, abbreviated. All
offsets are Python code-point indices. Nothing here does I/O.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache


def in_ranges(cp: int, starts: Sequence[int], ranges: Sequence[tuple[int, int]]) -> bool:
    """True when code point `cp` lies in one of the sorted, disjoint inclusive `ranges`, whose
    first elements are `starts` (binary search)."""
    i = bisect_right(starts, cp) - 1
    return i >= 0 and cp <= ranges[i][1]


_OTHER, _CR, _LF, _CONTROL, _EXTEND, _ZWJ, _RI, _SPACING, _L, _V, _T, _LV, _LVT, _PICT = range(14)

_PICT_RANGES: tuple[tuple[int, int], ...] = (
    (0x00A9, 0x00A9), (0x00AE, 0x00AE), (0x203C, 0x203C), (0x2049, 0x2049), (0x2122, 0x2122),
    (0x2139, 0x2139), (0x2194, 0x2199), (0x21A9, 0x21AA), (0x231A, 0x231B), (0x2328, 0x2328),
    (0x2388, 0x2388), (0x23CF, 0x23CF), (0x23E9, 0x23F3), (0x23F8, 0x23FA), (0x24C2, 0x24C2),
    (0x25AA, 0x25AB), (0x25B6, 0x25B6), (0x25C0, 0x25C0), (0x25FB, 0x25FE), (0x2600, 0x2605),
    (0x2607, 0x2612), (0x2614, 0x2685), (0x2690, 0x2705), (0x2708, 0x2712), (0x2714, 0x2714),
    (0x2716, 0x2716), (0x271D, 0x271D), (0x2721, 0x2721), (0x2728, 0x2728), (0x2733, 0x2734),
    (0x2744, 0x2744), (0x2747, 0x2747), (0x274C, 0x274C), (0x274E, 0x274E), (0x2753, 0x2755),
    (0x2757, 0x2757), (0x2763, 0x2767), (0x2795, 0x2797), (0x27A1, 0x27A1), (0x27B0, 0x27B0),
    (0x27BF, 0x27BF), (0x2934, 0x2935), (0x2B05, 0x2B07), (0x2B1B, 0x2B1C), (0x2B50, 0x2B50),
    (0x2B55, 0x2B55), (0x3030, 0x3030), (0x303D, 0x303D), (0x3297, 0x3297), (0x3299, 0x3299),
    (0x1F000, 0x1F0FF), (0x1F10D, 0x1F10F), (0x1F12F, 0x1F12F), (0x1F16C, 0x1F171),
    (0x1F17E, 0x1F17F), (0x1F18E, 0x1F18E), (0x1F191, 0x1F19A), (0x1F1AD, 0x1F1E5),
    (0x1F201, 0x1F20F), (0x1F21A, 0x1F21A), (0x1F22F, 0x1F22F), (0x1F232, 0x1F23A),
    (0x1F23C, 0x1F23F), (0x1F249, 0x1F3FA), (0x1F400, 0x1F53D), (0x1F546, 0x1F64F),
    (0x1F680, 0x1F6FF), (0x1F774, 0x1F77F), (0x1F7D5, 0x1F7FF), (0x1F80C, 0x1F80F),
    (0x1F848, 0x1F84F), (0x1F85A, 0x1F85F), (0x1F888, 0x1F88F), (0x1F8AE, 0x1F8FF),
    (0x1F90C, 0x1F93A), (0x1F93C, 0x1F945), (0x1F947, 0x1FAFF), (0x1FC00, 0x1FFFD),
)
_PICT_STARTS = [lo for lo, _ in _PICT_RANGES]


@lru_cache(maxsize=4096)
def _gcb(ch: str) -> int:
    """Grapheme_Cluster_Break property of one character (UAX #29 table 2, abbreviated)."""
    cp = ord(ch)
    if ch == "\r":
        return _CR
    if ch == "\n":
        return _LF
    if cp == 0x200D:
        return _ZWJ
    if 0x1F1E6 <= cp <= 0x1F1FF:
        return _RI
    if (
        cp == 0x200C
        or 0xFF9E <= cp <= 0xFF9F
        or 0x1F3FB <= cp <= 0x1F3FF
        or 0xE0020 <= cp <= 0xE007F
    ):
        return _EXTEND
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return _L
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return _V
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return _T
    if 0xAC00 <= cp <= 0xD7A3:
        return _LV if (cp - 0xAC00) % 28 == 0 else _LVT
    category = unicodedata.category(ch)
    if category in ("Mn", "Me"):
        return _EXTEND
    if category == "Mc":
        return _SPACING
    if category in ("Cc", "Cf", "Zl", "Zp", "Cs"):
        return _CONTROL
    if in_ranges(cp, _PICT_STARTS, _PICT_RANGES):
        return _PICT
    return _OTHER


def _breaks(prev: int, cur: int, ri_run: int, pict_zwj: bool) -> bool:
    if prev == _CR and cur == _LF:  # GB3
        return False
    if prev in (_CONTROL, _CR, _LF) or cur in (_CONTROL, _CR, _LF):  # GB4, GB5
        return True
    if prev == _L and cur in (_L, _V, _LV, _LVT):  # GB6
        return False
    if prev in (_LV, _V) and cur in (_V, _T):  # GB7
        return False
    if prev in (_LVT, _T) and cur == _T:  # GB8
        return False
    if cur in (_EXTEND, _ZWJ, _SPACING):  # GB9, GB9a
        return False
    if prev == _ZWJ and cur == _PICT and pict_zwj:  # GB11
        return False
    return not (prev == _RI and cur == _RI and ri_run % 2 == 1)  # GB12, GB13


def grapheme_boundaries(text: str, start: int = 0, stop: int | None = None) -> list[int]:
    """Extended grapheme cluster boundaries of text[start:stop], as absolute code-point offsets.

    `start` must itself be a boundary of `text` that no earlier context can affect (any offset
    that does not follow an emoji, ZWJ or regional indicator). The result is sorted, begins with
    `start` and ends with `stop` (default len(text)); it is [start] for an empty range.
    """
    stop = len(text) if stop is None else stop
    if start >= stop:
        return [start]
    out = [start]
    prev = _gcb(text[start])
    ri_run = 1 if prev == _RI else 0
    pict_ext = prev == _PICT
    pict_zwj = False
    for i in range(start + 1, stop):
        cur = _gcb(text[i])
        if _breaks(prev, cur, ri_run, pict_zwj):
            out.append(i)
        ri_run = ri_run + 1 if cur == _RI else 0
        pict_zwj = cur == _ZWJ and pict_ext
        pict_ext = cur == _PICT or (cur == _EXTEND and pict_ext)
        prev = cur
    out.append(stop)
    return out
