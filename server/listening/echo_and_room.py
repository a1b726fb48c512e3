"""The reply's echo and the room's background together (`server.listening.input_speech`): a
candidate the echo gate (`server.listening.echo.EchoDetector.is_echo`) and the room gate
(`server.listening.room_background.RoomBackground.is_background`) each call "not theirs" may
still be the two of them: a talk radio in the echo's pauses is what the echo does not explain,
and the echo is what stands over the radio. Here a frame the echo does not explain counts as
the person only where its 32 ms window also stands `OVER_ROOM_DB` above the loudest window the
room was heard at. Sans-I/O.

Measured (issue 24's tester's room: an espeak-ng en-us+m3 talk radio at -40 dBFS RMS from the
microphone's first sample, a Piper reply's echo at -14 dB 100 ms late starting 280 ms in;
`tests/test_rooms_talk_radio.py`): the radio's candidates that started turns (7 of 50 radio
shifts) held 12-60 % of their frames above the echo (`UNEXPLAINED_SHARE` 10 %), in windows
2.4-10.1 dB above the room's loudest learned window: the room, heard alone 280 ms and then
only in the echo's deepest pauses, is young and its loudest window low (`OVER_ROOM_DB`).
Before any room was heard (the reply starts with the microphone) this holds nothing back."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from server.listening.band_envelope import FRAME_MS
from server.listening.echo import SHARE_SPAN_MS, EchoDetector
from server.listening.echo_path import EXCESS_DB, UNEXPLAINED_SHARE
from server.listening.silero_vad import WINDOW_MS

OVER_ROOM_DB = 6.0
"""How far (dB) a window holding frames the echo does not explain must stand above the room's
loudest window (`RoomBackground.over_loudest_db`, RMS over 32 ms, the echo in it included) for
those frames to be the person. Measured offline on the tester's room (module docstring): the
radio's windows there stood 2.4-10.1 dB over the room's loudest, and with 6, 8, 10 or 12 dB none
of the 7 shifts that started a turn did (50 shifts at 6 dB: none); Piper "Wait." at -22 dBFS RMS
over talk radios at -32 dBFS RMS under that echo (`tests/test_rooms_talk_radio.py`, 3 talkers)
was heard at 3 of 3 with 6 dB, 1 of 3 with 8 and 0 of 3 with 10: a person 10 dB over a talker
(RMS) stands only 6-8 dB over its loudest window (a talker's loudest stand about 10 dB over its
RMS, a person's about 5)."""


def echo_and_room(echo: EchoDetector, over_loudest_db: Callable[[int, np.ndarray], np.ndarray
                                                                 | None],
                  start_ms: int, end_ms: int) -> bool:
    """True when the candidate speech from `start_ms` to `end_ms` (ms on the stream), which
    the echo gate found more than the echo, is the echo and the room together: fewer than
    `UNEXPLAINED_SHARE` of its frames (from `start_ms`, at least the last `SHARE_SPAN_MS`, as
    `is_echo` counts) are `EXCESS_DB` above the echo (the held path's, else the best match's
    at the lead-in's gain) and in a window `OVER_ROOM_DB` above the room's loudest
    (`over_loudest_db(start_ms, window ends)`, dB per window; None: no room heard yet, and
    this is False)."""
    share_from_ms = min(start_ms, end_ms - SHARE_SPAN_MS)
    match = (echo.held.held_excess(share_from_ms, end_ms) if echo.path is not None
             else echo.match(start_ms, end_ms))
    if match is None or match.excess_db.size == 0:
        return False
    first = max(0, (share_from_ms - match.first_ms) // FRAME_MS)
    excess = match.excess_db[first:]
    if excess.size == 0:
        return False
    frame_ends = match.first_ms + (np.arange(first, first + excess.size) + 1) * FRAME_MS
    over = over_loudest_db(start_ms, -(-frame_ends // WINDOW_MS) * WINDOW_MS)
    if over is None:
        return False
    return float(np.mean((excess >= EXCESS_DB) & (over >= OVER_ROOM_DB))) < UNEXPLAINED_SHARE
