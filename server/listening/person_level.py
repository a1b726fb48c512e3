"""How near the person's own level a candidate turn must come to be the person: the first rule
of `server.listening.room_background`'s room gate, and when the room is still too cold for
its other rules to tell a talker in it from the person. Sans-I/O; levels are dBFS window
levels (RMS over 32 ms, as `VadWindow.level_dbfs`), times ms from the microphone's first
sample.
"""

from __future__ import annotations

from collections.abc import Callable

NEAR_DB = 20.0
"""How far below the person's level (dB) a candidate's loudest window may stay (a design
margin, not fitted: room for a murmur or a quiet "wait" said well below full voice; a TV at
-45 dBFS RMS stays 22 dB below a person at -20 dBFS RMS, loudest window to 90th percentile)."""

COLD_ROOM_MS = 1000
"""A candidate that starts in the microphone's first second comes before the background can
tell a TV's first words from the person's: the `COLD_NEAR_DB` level rule decides. Counted in
microphone time, not in room heard: the auto gain converges with the stream's time, and the
windows of a reply playing whose echo rules them are not room heard, so counted so a
session's first reply kept the room cold while it played and held a person at -12 dBFS peak
over it for the room (`tests/test_echo_suppression.py`). Later, the room is cold only while
the reply's echo and the room cannot be told apart in what the microphone hears
(`near_margin_db`)."""

COLD_NEAR_DB = 12.0
"""How far below the person's level a candidate's loudest window may stay in a cold room
(`COLD_ROOM_MS`): with `PERSON_PRIOR_DBFS`, -24 dBFS, above a TV or babble at -45 dBFS RMS
lifted 10 dB by an auto gain (loudest windows -32 to -29 dBFS), below a person at -20 dBFS
RMS (-11)."""

PERSON_PRIOR_DBFS = -12.0
"""The person's level before their first turn (dBFS, the 90th percentile window level): a
voice of about -20 dBFS RMS (measured: Piper at -20 dBFS RMS has its 90th percentile window at
-14 dBFS, its loudest at -11). With `NEAR_DB`, a candidate's loudest window then needs -32
dBFS: a voice of about -35 dBFS RMS over its speech or more (Piper "Hang on." at -36 dBFS RMS
has its loudest window at -33.4 dBFS and is not heard), above a TV talker at -45 dBFS RMS
(loudest window -36 dBFS)."""

COLD_ROOM_HEARD_MS = 1000
"""Room heard (ms of windows learned or standing for the room) under which a candidate over a
reply is judged as in a cold room while nothing tells the reply's echo from the room
(`near_margin_db`): as much as `COLD_ROOM_MS`, the second the level rule alone decides in."""


def near_margin_db(start_ms: int, person_dbfs: float,
                   sound_before: Callable[[], tuple[float | None, int]] | None = None,
                   echo_unknown: Callable[[], bool] | None = None) -> float:
    """How far below the person's level `person_dbfs` (dBFS) a candidate starting at
    `start_ms` may keep its loudest window (dB): `COLD_NEAR_DB` in a cold room, else
    `NEAR_DB`.

    The room is cold for a candidate that starts in the microphone's first `COLD_ROOM_MS`, and
    for one over a reply (`sound_before`, None: no reply in it) when `sound_before()` (the
    microphone's loudest window just before it, the reply's echo and the room together, dBFS
    or None; the room heard, ms) says that window already came within `NEAR_DB` of the
    person's level with less than `COLD_ROOM_HEARD_MS` of room heard outside that echo, and
    `echo_unknown()` (asked last; None: never) says no echo path tells the echo from the room
    yet: that sound passes the level rule by itself, and the room's other rules have no room
    to judge it by. Measured (`benchmarks/bench_echo.py` table 3): a TV talker at -40 dBFS RMS
    from the microphone's first sample under a Piper reply's -14 dB echo (the reply 80-120 ms
    in) reached -30.5 dBFS in its loudest window 1.2 s in, with 96 ms of room heard and no
    echo path: a turn 692 or 1170 ms into the first reply in 5 of 12 runs."""
    if start_ms < COLD_ROOM_MS:
        return COLD_NEAR_DB
    if sound_before is None or echo_unknown is None:
        return NEAR_DB
    loudest_dbfs, room_heard_ms = sound_before()
    if (loudest_dbfs is not None and loudest_dbfs >= person_dbfs - NEAR_DB
            and room_heard_ms < COLD_ROOM_HEARD_MS and echo_unknown()):
        return COLD_NEAR_DB
    return NEAR_DB
