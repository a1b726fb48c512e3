"""The gates a `server.listening.vad.TurnDetector` candidate turn passes besides the echo's:
the level range of its recent windows (a hum's level does not move, speech's does), and where
its speech stops being the room's (`server.listening.room_background`'s gate). Sans-I/O
functions over window positions (ms) and levels (dBFS).
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from server.listening.silero_vad import WINDOW_MS

MODULATION_FLOOR_DB = 30.0
"""Windows this far below the loudest recent one do not count for `min_level_range_db` (the
silence right after a hum stops, which Silero still scores at about 0.6)."""


def past_the_room(room_gate: Callable[[int, int], bool] | None, start_ms: int,
                  window_end_ms: int) -> int:
    """Where a candidate turn the room gate rejected before (speech from `start_ms`, passed at
    `window_end_ms`, ms) becomes the person: its start moved on, window by window, while its
    speech from `start_ms` to that window's end is still the room's by `room_gate` (at most
    to the last window before `window_end_ms`). The gate asks every `min_speech_ms` or so,
    so the room talking since its last rejection would otherwise begin the turn: measured,
    Piper "Wait, stop, ..." 330 ms after the last rejection of babble at -55 dBFS RMS began
    630 ms before the voice."""
    moved_ms = start_ms
    while (room_gate is not None and moved_ms + 2 * WINDOW_MS <= window_end_ms
           and room_gate(start_ms, moved_ms + WINDOW_MS)):
        moved_ms += WINDOW_MS
    return moved_ms


def level_range_open(recent: collections.deque[tuple[int, float | None]], start_ms: int,
                     min_level_range_db: float) -> bool:
    """The level-range gate (`TurnDetectionConfig.min_level_range_db`) over a candidate's
    recent (window end ms, level dBFS) pairs, its speech from `start_ms`: its windows after
    the first, those within `MODULATION_FLOOR_DB` of the loudest, must differ by
    `min_level_range_db` (dB); open while a level is unknown, with fewer than two such
    windows, or with a range of 0."""
    known = [(end_ms, level) for end_ms, level in recent if level is not None]
    if len(known) < len(recent):
        return True
    modulated = [level for end_ms, level in known if end_ms - WINDOW_MS > start_ms]
    if len(modulated) >= 2 and min_level_range_db > 0:
        loudest = max(modulated)
        audible = [level for level in modulated if level >= loudest - MODULATION_FLOOR_DB]
        if loudest - min(audible) < min_level_range_db:
            return False
    return True
