"""A reply's playback ACKs placed in audio time: on the client's own microphone timeline.

The client sends its microphone as contiguous appends, and every event on one socket is read
in the order the client sent it, however late the server reads it. So an ACK read after the
appends ending at input position `lo` (ms) and before the one ending at `hi` was sent while
the client's microphone stood between them: its played position belongs to the microphone
audio there, whatever the clock said when the server read it. A stall of the server's event
loop (a busy machine, garbage collection, another session's work) delays the reading, not the
order: it moves no ACK.

Within [lo, hi] the ACK is placed where the session clock puts it when that is inside (the
arrival's clock less the input delay, `server.realtime.arrival.InputClock`: exact when nothing
stalled), else at the nearer end. The error is therefore at most the audio of one append (the
page's, the terminal client's and the tests' clients': 40 ms) for a client that sends ACKs on
a timer of its own, and none for one that sends each ACK right after an append.

Sans-I/O: plain data; the session reads ACKs (`read`) and places them when the next append
arrives (`place`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

PENDING_LIMIT = 8
"""ACKs kept waiting for the next append (without a microphone stream none comes): the latest
ones; an earlier one read before the same append says less than the later."""


@dataclass(frozen=True, slots=True)
class AckAnchor:
    """One ACK on the input timeline.

    Attributes:
        audio_ms: the input position (ms of microphone audio) at which the client sent it.
        played_ms: the position (ms of the reply's audio) it reported played then (the
            cursor's, so never less than an earlier ACK's).
        read_ms: the session clock (ms) at which the server read it.
        moved: it reported more played than the ACK read before it (the first always): the
            client was playing; False: it stood still (ran dry, or its loop held it).
    """

    audio_ms: float
    played_ms: int
    read_ms: float
    moved: bool = True


@dataclass(slots=True)
class AckAnchors:
    """The ACKs of one reply, in audio time: those read and not yet placed, and the placed
    ones still needed (the latest at or before the last position asked for, and all after)."""

    _pending: deque[tuple[float, int, float]] = field(
        default_factory=lambda: deque(maxlen=PENDING_LIMIT))  # (lo ms, played ms, read ms)
    _placed: list[AckAnchor] = field(default_factory=list)

    def read(self, played_ms: int, read_ms: float, input_end_ms: float) -> None:
        """An ACK reporting `played_ms` was read at clock `read_ms` (ms), after the appends up
        to input position `input_end_ms` (ms)."""
        self._pending.append((input_end_ms, played_ms, read_ms))

    def place(self, audio_end_ms: float, delay_ms: float | None) -> None:
        """The next append, ending at input position `audio_end_ms` (ms), arrived: place the
        ACKs read before it between the input end at their reading and `audio_end_ms`, where
        the clock puts them (`read_ms - delay_ms`, `InputClock.delay_ms`) when that is inside;
        never before an ACK placed earlier."""
        placed = self._placed
        while self._pending:
            lo, played, read = self._pending.popleft()
            at = lo if delay_ms is None else min(max(read - delay_ms, lo), audio_end_ms)
            if placed:
                at = max(at, placed[-1].audio_ms)
            placed.append(AckAnchor(at, played, read, not placed or played > placed[-1].played_ms))

    def latest_at(self, audio_ms: float) -> AckAnchor | None:
        """The latest ACK placed at or before input position `audio_ms` (ms), None when there
        is none. Positions are asked for in order: those before the answer are forgotten."""
        placed = self._placed
        index = 0
        while index + 1 < len(placed) and placed[index + 1].audio_ms <= audio_ms:
            index += 1
        del placed[:index]
        if placed and placed[0].audio_ms <= audio_ms:
            return placed[0]
        return None

    def clear(self) -> None:
        """Forget every ACK (the reply resumed after a pause: playback runs from the resume)."""
        self._pending.clear()
        self._placed.clear()
