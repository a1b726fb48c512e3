"""Argument checks shared by the calibration package's constructors and policies."""

from __future__ import annotations

import math


def positive_seconds(name: str, value: object) -> float:
    """`value` as float seconds; raises ValueError naming `name` unless it is a positive,
    finite int or float (a bool is refused: `True` is not a duration)."""
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0):
        raise ValueError(f"{name} must be a positive finite number")
    return float(value)
