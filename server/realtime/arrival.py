"""How late a microphone append arrived, from the audio it carries and the clock it came at.

Sans-I/O: the session gives each append's arrival (clock, ms) and the end of its audio on the
input timeline (ms); the earliest recent arrivals relative to the audio set the baseline.
"""

from __future__ import annotations

from collections import deque

LATENESS_WINDOW_MS = 2000.0
"""Appends over which the baseline (the earliest arrival relative to its audio) is kept (ms of
clock). Long enough to hold on-time appends around a stall of the client's or the server's
event loop (measured: the tester's client, on a loaded 2-core machine, sent 300-450 ms of
appends in one burst several times a run), short enough that a lasting change (a microphone
that stopped and restarted, a slower network) becomes the new baseline within it."""


MAX_LATE_MS = 1000.0
"""An append later than this (ms) starts a new baseline instead: the stream itself moved (a
client that stopped sending and resumed, its audio continuing where it left off), not one
stall; a position estimated that far back would be wrong for the whole window."""


BURST_MS = 10.0
"""Events arriving within this (ms) of an append came in its burst (`burst_late_ms`): a client
sends an append and its ACK in one go (the tester's, every third 40 ms tick), a stalled event
loop takes them together; the page's appends and ACKs come on their own timers 20-40 ms apart
when nothing stalls."""


class ArrivalLateness:
    """Each append's lateness (ms): its arrival clock minus its audio's end, less the least
    such difference of the appends of the last `LATENESS_WINDOW_MS` (this one included); 0
    and a new baseline beyond `MAX_LATE_MS`."""

    def __init__(self) -> None:
        self._delays: deque[tuple[float, float]] = deque()  # (clock ms, delay ms), increasing
        self._latest = (float("-inf"), 0.0)  # (clock ms, lateness ms) of the latest append

    def late_ms(self, clock_ms: float, audio_end_ms: float) -> float:
        """The lateness (ms, >= 0) of an append arriving at `clock_ms` whose audio ends at
        `audio_end_ms` on the input timeline."""
        delay = clock_ms - audio_end_ms
        delays = self._delays
        if delays and delay - delays[0][1] > MAX_LATE_MS:
            delays.clear()
        while delays and delays[-1][1] >= delay:
            delays.pop()
        delays.append((clock_ms, delay))
        while delays[0][0] < clock_ms - LATENESS_WINDOW_MS:
            delays.popleft()
        self._latest = (clock_ms, delay - delays[0][1])
        return self._latest[1]

    def burst_late_ms(self, clock_ms: float) -> float:
        """The lateness (ms) of another event (a playback ACK) arriving at `clock_ms`: the
        latest append's when it came within `BURST_MS` before (the same burst: a client, or
        this server's event loop, that stalled held both), else 0."""
        arrived_ms, late_ms = self._latest
        return late_ms if clock_ms - arrived_ms <= BURST_MS else 0.0
