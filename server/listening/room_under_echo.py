"""The room heard under a reply's echo (`server.listening.room_background`): which windows of a
reply playing are the room's, by how far the microphone stands above the echo the held echo
path explains (`server.listening.held_echo.HeldEcho.over_echo_db`). Sans-I/O."""

from __future__ import annotations

from collections.abc import Callable

from server.listening.echo import MAX_SPAN_MS
from server.listening.echo_path import LEARN_STEP_MS
from server.listening.silero_vad import WINDOW_MS

ROOM_OVER_ECHO_DB = 6.0
"""How far (dB) above the power of the reply's echo the held echo path explains
(`server.listening.held_echo.HeldEcho.over_echo_db`, itself an overestimate) a window of a
reply playing must stand to be learned as the room where the echo rules the microphone
(`echo_rules`): at most a quarter of its power is the echo, so its levels are the room's
within 1.3 dB. Without it a room heard mostly under a reply's echo stays young and its talker
is judged against the bars of a room heard for a second (issue 24's tester: Piper "Wait." at
-22 dBFS RMS over an espeak talk radio at -40 dBFS RMS under a -14 dB echo: 3.4 s of room
learned by 8 s in, missed)."""

ECHO_RULES_HEARD_MS = MAX_SPAN_MS // 2 + LEARN_STEP_MS // 2
"""How long after a window's end (ms) the echo gate has heard the second it judges the window
by (`EchoDetector.echo_rules`: from `MAX_SPAN_MS` / 2 before the `LEARN_STEP_MS` step nearest
the window to as long after); until then it says the echo may rule it."""


def room_over_the_echo(echo_rules: Callable[[int], bool] | None,
                       over_echo_db: Callable[[int, int], float | None] | None,
                       end_ms: int) -> bool:
    """Whether a window of a reply playing (ending at `end_ms`, ms) is the room's: the reply's
    echo does not rule the microphone around it (`echo_rules`, None: it may always, and the
    window is never the room's), or the microphone stands `ROOM_OVER_ECHO_DB` above the echo
    the held echo path explains in it (`over_echo_db`, None: not known)."""
    if echo_rules is None or not echo_rules(end_ms):
        return echo_rules is not None
    return _over_the_echo(over_echo_db, end_ms)


def room_under_the_echo(level_dbfs: float, end_ms: int, room_loudest_dbfs: float,
                        over_echo_db: Callable[[int, int], float | None] | None) -> bool:
    """Whether a window of speech held back as the reply's echo (and by nothing else; its
    level `level_dbfs`, ending at `end_ms` ms) is the room's after all: it is no louder than
    the room's loudest learned window (`room_loudest_dbfs`: a person wrongly held as the echo
    stands above the room) and it stands `ROOM_OVER_ECHO_DB` above the echo the held echo path
    explains in it (`over_echo_db`). Silero scores the echo as speech, so the echo gate holds
    back most of a reply's windows, and the room heard under them would otherwise never be
    learned."""
    return level_dbfs <= room_loudest_dbfs and _over_the_echo(over_echo_db, end_ms)


def _over_the_echo(over_echo_db: Callable[[int, int], float | None] | None,
                   end_ms: int) -> bool:
    """The window ending at `end_ms` stands `ROOM_OVER_ECHO_DB` above the held path's echo."""
    over_db = None if over_echo_db is None else over_echo_db(end_ms - WINDOW_MS, end_ms)
    return over_db is not None and over_db >= ROOM_OVER_ECHO_DB
