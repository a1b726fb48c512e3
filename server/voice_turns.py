"""Fair turns at the one TTS voice, shared by every session of the process.

The voice (one engine, one lock, the machine's cores) synthesizes one piece of one reply at a
time. Which reply's piece comes next matters more than how fast one piece is: with plain
first-come turns, a person who asks a question while three other sessions stream long replies
waits for three continuation pieces (about 0.5-1.5 s of Piper each on 2 cores) before the
first word of the answer. `VoiceTurns` is a priority queue over turns of one piece each:

1. the first piece of a reply (nothing of it synthesized yet) goes before every continuation:
   time to first audio is what a listener waits on, a continuation only refills a buffer;
2. continuations go least-buffered first: a reply with less synthesized audio ahead of what
   was sent (`ahead_ms`) is closer to an underrun; a reply far ahead of playback yields;
3. ties in arrival order.

A turn is held for one synthesis piece (`server.speaking.Speaker.speak`: one segment of the reply)
released when the engine is free; a waiter that is cancelled (a barge-in, a closed socket)
leaves the queue at once. A holder far enough ahead of playback may also offer to be
preempted (`turn(preempt=...)`): when a first piece asks for the voice, the hook stops the
running piece (the engine returns within milliseconds, `StopSignal`) and its reply asks for
the voice again to redo it later; its listener still has seconds of audio to play, the asking
listener gets the voice at once. Otherwise a first piece waits for at most the piece being
synthesized (the pieces are short: the segmenter's job).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator, Callable

FIRST_PIECE = 0
"""Priority class of a reply's first piece (served first)."""
CONTINUATION = 1
"""Priority class of every later piece of a reply."""


class VoiceTurns:
    """Turns at the TTS voice by priority (see the module docstring); asyncio, one event loop
    at a time, cancellation-safe. Nothing is bound to a loop while nobody waits."""

    def __init__(self) -> None:
        """A free voice with nobody waiting."""
        self._held = False
        self._waiting: list[tuple[int, int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()
        self._preempt: Callable[[], None] | None = None

    def locked(self) -> bool:
        """True while a reply holds the voice."""
        return self._held

    def waiting(self) -> int:
        """Turns requested and not yet granted (cancelled waiters excluded)."""
        return sum(not future.done() for *_, future in self._waiting)

    @contextlib.asynccontextmanager
    async def turn(self, *, first: bool, ahead_ms: int = 0,
                   preempt: Callable[[], None] | None = None) -> AsyncIterator[None]:
        """Hold the voice for one piece: `first` for a reply's first piece, else a
        continuation with `ahead_ms` (ms of synthesized audio of the reply not yet sent).

        `preempt`: called (once, on the event loop) when a first piece asks for the voice
        while this turn holds it; it must make the holder give the voice back soon."""
        await self.acquire(first=first, ahead_ms=ahead_ms)
        try:
            if preempt is not None and self._first_waiting():
                preempt()
            else:
                self._preempt = preempt
            yield
        finally:
            self.release()

    async def acquire(self, *, first: bool, ahead_ms: int = 0) -> None:
        """Wait for the voice (see `turn`); raises `asyncio.CancelledError` when cancelled,
        having left the queue (or passed on a turn granted in the same loop iteration)."""
        if not self._held and self.waiting() == 0:
            self._held = True
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if first and self._preempt is not None:
            preempt, self._preempt = self._preempt, None
            preempt()
        key = (FIRST_PIECE, 0) if first else (CONTINUATION, max(0, ahead_ms))
        heapq.heappush(self._waiting, (*key, next(self._arrivals), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()
            raise

    def _first_waiting(self) -> bool:
        return any(key == FIRST_PIECE and not future.done()
                   for key, *_, future in self._waiting)

    def release(self) -> None:
        """Give the voice to the most urgent waiter, or free it when nobody waits."""
        self._preempt = None
        while self._waiting:
            *_, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(None)
                return
        self._held = False
