"""Short loud non-speech sounds (a cough, a clap, a knock on a door, a dropped cup) told from
the room. Sans-I/O: one (window end ms, level dBFS, Silero probability) at a time, spans out.

`server.listening.room_background.RoomBackground` learns the room from the windows heard outside
turns, and rules by the room's loud levels of its last second. A cough half a second before a
sentence was that second's loudest sound: a 180 ms cough at -10 dBFS peak is 7 of its 31
windows, over 10 %, so the room's 90th percentile became the cough's level, and the sentence's
softer windows no longer stood `CONTINUE_DB` over it (its turn ended at the sentence's first
pause: two turns, the first half answerable alone). Such a sound is no part of the room:
`TransientDetector` finds it so that the room leaves it out.

A transient is a run of windows that rises out of the room (the window before it is within
`EDGE_DB` of the room's level, `ROOM_PERCENTILE` of the last `REFERENCE_MS` of the room's own
windows), stays `EDGE_DB` over that level for at most `MAX_MS`, reaches `ABOVE_DB` over it, has
no window Silero scores `SPEECH_PROBABILITY` or more (speech is `TurnDetector`'s business: a
person's short word is dropped speech, and the room's talk is the room), and falls back within
`EDGE_DB` of the room's level. Windows that are not the room's (a turn's, speech held back as
the reply's echo) are not judged and break a run.

Measured (`tests/speech_fixtures.py`'s 180 ms cough at -10 dBFS peak over a -60 dBFS pink
floor): seven windows at -44 to -20 dBFS, the floor's at -73 dBFS, Silero 0.01-0.03.
"""

from __future__ import annotations

import collections

from server.listening.percentiles import percentile
from server.listening.silero_vad import WINDOW_MS

REFERENCE_MS = 1000
"""The room's level is taken over the last second of the room's own windows (transients left
out), as the room's gain rise is (`room_background.RECENT_MS`)."""

REFERENCE_MIN_MS = 256
"""Less of the room than this heard (ms), and no run is judged: the room's level is unknown."""

ROOM_PERCENTILE = 50.0
"""The room's level: this percentile of the last `REFERENCE_MS` of its window levels (its
median: babble's windows stay within about 6 dB of it; a TV's pauses hold it at the floor)."""

EDGE_DB = 6.0
"""A window this far (dB) over the room's level is loud: a run of loud windows begins after a
window that is not, and ends at the next one that is not (a cough's decay falls to the floor
within its own length; babble's windows at -45 dBFS RMS stay within about 6 dB of their
median)."""

ABOVE_DB = 20.0
"""How far over the room's level (dB) a run's loudest window must reach: a sound much louder
than the room. A design margin: a cough at -10 dBFS peak stands 50 dB over a -60 dBFS floor and
about 25 dB over babble at -45 dBFS RMS; babble's own loudest windows stand 6-8 dB over its
median."""

MAX_MS = 480
"""The longest transient (ms of loud windows): a cough, a clap, a knock or a cup's clatter and
its ring are shorter; a run still loud after this is a change of the room (a blender switched
on), not a transient. Under `room_background.SETTLE_MS` (1000), so a transient is found before
its windows are learned."""

SPEECH_PROBABILITY = 0.35
"""A run with a window Silero scores this or more is speech, not a transient: the default
`server_vad` threshold (0.5) less `TurnDetector`'s hysteresis (0.15), the lowest probability
that continues speech. Measured: a cough's windows score 0.01-0.03."""

_REFERENCE_WINDOWS = REFERENCE_MS // WINDOW_MS
_REFERENCE_MIN_WINDOWS = REFERENCE_MIN_MS // WINDOW_MS
_MAX_WINDOWS = MAX_MS // WINDOW_MS


class TransientDetector:
    """Finds the transients (module docstring) in one stream of VAD windows.

    Feed every window in order to `push`, saying whether it is the room's (outside turns and
    held-back speech); a transient is reported by the window that ends it, as the (start, end]
    ms span its windows end in. Not thread-safe (one caller per instance).
    """

    def __init__(self) -> None:
        self._levels: collections.deque[float] = collections.deque(maxlen=_REFERENCE_WINDOWS)
        self._run: list[float] = []
        self._run_start_ms = 0
        self._room_dbfs = 0.0
        self._quiet = False

    def push(self, end_ms: int, level_dbfs: float, probability: float | None,
             room: bool = True) -> tuple[int, int] | None:
        """Take the window ending at `end_ms` (ms; `WINDOW_MS` long): its RMS level (dBFS), its
        Silero speech probability (None: unknown, taken for speech), and whether it is the
        room's. Returns the span (start, end] (ms) of the transient this window ends, or None.
        The window that ends a transient is not part of it."""
        speech = probability is None or probability >= SPEECH_PROBABILITY
        if not room:
            self._run.clear()
            self._quiet = False
            return None
        if self._run:
            if level_dbfs < self._room_dbfs + EDGE_DB:
                return self._end_run(end_ms, level_dbfs)
            if speech or len(self._run) >= _MAX_WINDOWS:
                self._levels.extend(self._run)
                self._run.clear()
                self._quiet = False
                self._levels.append(level_dbfs)
                return None
            self._run.append(level_dbfs)
            return None
        if len(self._levels) >= _REFERENCE_MIN_WINDOWS:
            room_dbfs = percentile(self._levels, ROOM_PERCENTILE)
            loud = level_dbfs >= room_dbfs + EDGE_DB
            if loud and self._quiet and not speech:
                self._room_dbfs = room_dbfs
                self._run_start_ms = end_ms - WINDOW_MS
                self._run.append(level_dbfs)
                return None
            self._quiet = not loud
        else:
            self._quiet = True
        self._levels.append(level_dbfs)
        return None

    def _end_run(self, end_ms: int, level_dbfs: float) -> tuple[int, int] | None:
        """The run fell back to the room at the window ending at `end_ms`: a transient when it
        reached `ABOVE_DB`; else its windows are the room's."""
        run, self._run = self._run, []
        self._quiet = True
        transient = max(run) >= self._room_dbfs + ABOVE_DB
        if not transient:
            self._levels.extend(run)
        self._levels.append(level_dbfs)
        return (self._run_start_ms, end_ms - WINDOW_MS) if transient else None
