"""Where the input timeline (ms of microphone audio) sits on the session clock.

Sans-I/O: the session gives each append's arrival (clock, ms) and the end of its audio on the
input timeline (ms); the earliest recent arrivals relative to their audio set the delay
(`InputClock.delay_ms`). Only what the server itself does at a clock reading is placed with it
(the audio it sent a client, a reply it resumed, the real-time estimate before a reply's first
ACK: `server.realtime.audio_time`); the client's own reports are placed by audio time
(`server.realtime.ack_anchors`), which no stall of the server's event loop moves.
"""

from __future__ import annotations

from collections import deque

LATENESS_WINDOW_MS = 2000.0
"""Appends over which the delay (the earliest arrival relative to its audio) is kept (ms of
clock). Long enough to hold on-time appends around a stall of the client's or the server's
event loop (measured: the tester's client, on a loaded 2-core machine, sent 300-450 ms of
appends in one burst several times a run), short enough that a lasting change (a microphone
that stopped and restarted, a slower network) becomes the new delay within it."""


MAX_LATE_MS = 1000.0
"""An append later than this (ms) starts a new delay instead: the stream itself moved (a
client that stopped sending and resumed, its audio continuing where it left off), not one
stall. A stall of the server this long places only its own sends and resumes that much late;
the client's ACKs stay where their audio puts them."""


class InputClock:
    """The delay (ms) from the input timeline to the session clock: the least (arrival clock
    minus audio end) over the appends of the last `LATENESS_WINDOW_MS` (the latest included),
    restarted from the latest when it is more than `MAX_LATE_MS` above that least.

    The delay holds the client's capture-to-send time and the network's fastest crossing, so
    audio `a` (ms) was captured by clock `a + delay_ms` at the latest, and the client received
    what the server sent at clock `c` no earlier than audio `c - delay_ms`.
    """

    def __init__(self) -> None:
        self._delays: deque[tuple[float, float]] = deque()  # (clock ms, delay ms), increasing

    def arrived(self, clock_ms: float, audio_end_ms: float) -> None:
        """An append whose audio ends at `audio_end_ms` (input timeline) arrived at
        `clock_ms`."""
        delay = clock_ms - audio_end_ms
        delays = self._delays
        if delays and delay - delays[0][1] > MAX_LATE_MS:
            delays.clear()
        while delays and delays[-1][1] >= delay:
            delays.pop()
        delays.append((clock_ms, delay))
        while delays[0][0] < clock_ms - LATENESS_WINDOW_MS:
            delays.popleft()

    @property
    def delay_ms(self) -> float | None:
        """The session clock minus the input timeline (ms) for on-time audio; None before any
        append."""
        return self._delays[0][1] if self._delays else None
