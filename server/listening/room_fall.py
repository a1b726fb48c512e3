"""When the room fell (loud babble stopped, a fan was switched off): the background
`server.listening.room_background.RoomBackground` learned is then forgotten and the room is
learned anew, so the person is heard at once after loud noise, not a whole history later.
Levels are dBFS of 32 ms windows (`server.listening.silero_vad.WINDOW_MS`). Sans-I/O."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from server.listening.percentiles import percentile
from server.listening.silero_vad import WINDOW_MS

FLOOR_PERCENTILE = 10.0
"""The room's floor: this percentile of the background windows' levels (minimum statistics,
R. Martin, IEEE TSAP 2001, over the whole history rather than sub-windows)."""

FALL_DB = 10.0
"""The room fell (loud babble stopped, a fan was switched off) when even the loud windows
(`room_background.LOUD_PERCENTILE`) of the last `FALL_SPAN_MS` outside turns stay this far (dB)
below the floor (`FLOOR_PERCENTILE`) of the last `FALL_FLOOR_MS` of background learned before
them: that background is then forgotten, and the room is learned anew from that second on. A
room that only pauses (a TV between sentences) has its pauses in that floor already and never
falls so. Measured on `tests/room_sounds.py`'s backgrounds (30 s, three seeds, 3 s spans every
256 ms): a TV talker's floor is the -70 dBFS RMS pink floor under it (-72 to -66 dBFS) at -25
and -45 dBFS RMS, and every second of it has loud windows (90th percentile at least -47 dBFS at
-45); babble's floor is -34 to -31 dBFS at -25 dBFS RMS, -54 to -51 dBFS at -45."""

FALL_SPAN_MS = 640
"""How long the room must have stayed down to have fallen (ms): a person who speaks a second
after loud babble stopped is over it by then (with a second, espeak-ng's questions 1 s after
were missed 2 of 5: their first windows were still outside the turn, and loud)."""

FALL_FLOOR_MS = 3000
"""The background whose floor a fall is measured from: its last 3 s (see `FALL_DB`)."""

FALL_WINDOWS = FALL_SPAN_MS // WINDOW_MS
"""`FALL_SPAN_MS` in windows."""

_FALL_FLOOR_WINDOWS = FALL_FLOOR_MS // WINDOW_MS


def room_fell(loud_dbfs: float, background_dbfs: Sequence[float]) -> bool:
    """Whether the room fell: `loud_dbfs`, the loud level (dBFS) of the last `FALL_SPAN_MS`
    heard outside turns, stays `FALL_DB` below the floor (`FLOOR_PERCENTILE`) of the last
    `FALL_FLOOR_MS` of `background_dbfs` (the learned windows' levels, oldest first; empty:
    False)."""
    if not background_dbfs:
        return False
    floor = percentile(itertools.islice(
        background_dbfs, max(len(background_dbfs) - _FALL_FLOOR_WINDOWS, 0), None),
        FLOOR_PERCENTILE)
    return loud_dbfs <= floor - FALL_DB
