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


LEAST_DELAY_WINDOW_MS = 30_000.0
"""Appends over which `InputClock.least_delay_ms` is kept (ms of clock), with no restart: a
server that falls behind reading for seconds (its event loop stalled over and over on a
loaded machine: measured 3.7 s behind after 4 s of a session at load 11 on 2 cores) raises
`delay_ms` with it, not this. Short enough that the drift of a client's audio clock (about
0.1 ms a second) stays a few ms."""


class InputClock:
    """The delay (ms) from the input timeline to the session clock: the least (arrival clock
    minus audio end) over the appends of the last `LATENESS_WINDOW_MS` (the latest included),
    restarted from the latest when it is more than `MAX_LATE_MS` above that least
    (`delay_ms`); and the least over `LEAST_DELAY_WINDOW_MS`, never restarted
    (`least_delay_ms`).

    The delay holds the client's capture-to-send time and the network's fastest crossing, so
    audio `a` (ms) was captured by clock `a + delay_ms` at the latest, and the client received
    what the server sent at clock `c` no earlier than audio `c - delay_ms`.
    """

    def __init__(self) -> None:
        self._delays: deque[tuple[float, float]] = deque()  # (clock ms, delay ms), increasing
        self._least: deque[tuple[float, float]] = deque()  # the same over the longer window

    def arrived(self, clock_ms: float, audio_end_ms: float) -> None:
        """An append whose audio ends at `audio_end_ms` (input timeline) arrived at
        `clock_ms`."""
        delay = clock_ms - audio_end_ms
        if self._delays and delay - self._delays[0][1] > MAX_LATE_MS:
            self._delays.clear()
        _keep_least(self._delays, clock_ms, delay, LATENESS_WINDOW_MS)
        _keep_least(self._least, clock_ms, delay, LEAST_DELAY_WINDOW_MS)

    @property
    def delay_ms(self) -> float | None:
        """The session clock minus the input timeline (ms) for on-time audio, following a
        stream that moved within `MAX_LATE_MS` of clock; None before any append. What it
        places can come late (when the server fell behind reading), never early: it bounds
        what the client can have played."""
        return self._delays[0][1] if self._delays else None

    @property
    def least_delay_ms(self) -> float | None:
        """The least delay (ms) over `LEAST_DELAY_WINDOW_MS`; None before any append. What it
        places can come early (a client that stopped streaming and resumed, for that window),
        never late while the server falls behind reading: it places what must not run ahead
        of the client (a reply's start before its first ACK)."""
        return self._least[0][1] if self._least else None


def _keep_least(delays: deque[tuple[float, float]], clock_ms: float, delay: float,
                window_ms: float) -> None:
    """Add (`clock_ms`, `delay`) to `delays` (increasing in both, its head the least delay
    of the last `window_ms` of clock): a sliding-window minimum."""
    while delays and delays[-1][1] >= delay:
        delays.pop()
    delays.append((clock_ms, delay))
    while delays[0][0] < clock_ms - window_ms:
        delays.popleft()
