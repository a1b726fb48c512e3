"""The in-process ASR queue: foreground transcriptions first, background ones only when idle.

One process has two kinds of transcription work on the same cores:

- *foreground*: the person's spoken turn. Someone waits for the answer; it must never queue
  behind calibration work;
- *background*: calibration ASR (the `auto` policy's cross-checks of the word marks and its
  ASR fallback, the `asr` policy). Useful when it comes in time, worthless when late.

`PriorityLimit` is the queue in front of the in-process worker threads: at most `limit`
transcriptions run at once; a waiting foreground job is served before any background job
(first come, first served within a class); background jobs hold at most `background_limit`
slots (default `limit - 1`), so a foreground job always finds a slot without waiting for a
running calibration to end (a running transcription cannot be interrupted). Background jobs
also wait while the process does other foreground work that is not ASR (`foreground_work`:
a reply's first audio being synthesized), and a background job whose start would come too late
to finish within its budget is skipped (`TranscriptionSkipped`), never started.

State is kept per event loop, as `asyncio` primitives are: one server loop has one queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Iterator
from enum import IntEnum
from weakref import WeakKeyDictionary


class AsrPriority(IntEnum):
    """Priority class of a transcription (lower is served first)."""

    FOREGROUND = 0
    """The person's turn: someone waits for it."""
    BACKGROUND = 1
    """Calibration ASR: cross-checks and fallbacks, skipped when late."""


class TranscriptionSkipped(TimeoutError):
    """A background transcription was not started: it could not have finished within its
    budget (it waited behind foreground work). A `TimeoutError`, as the caller's own deadline
    would have ended it."""


class _Gate:
    """The queue of one event loop (see `PriorityLimit`)."""

    def __init__(self, limit: int, background_limit: int) -> None:
        self.limit = limit
        self.background_limit = background_limit
        self.running = {AsrPriority.FOREGROUND: 0, AsrPriority.BACKGROUND: 0}
        self.waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self.arrivals = itertools.count()
        self.foreground_holds = 0

    def busy(self) -> int:
        return sum(self.running.values())

    def dispatch(self) -> None:
        """Grant free slots to the most urgent waiters that may run now."""
        while self.waiting and self.busy() < self.limit:
            priority, _, future = self.waiting[0]
            if future.done():
                heapq.heappop(self.waiting)
                continue
            if priority == AsrPriority.BACKGROUND and (
                self.foreground_holds
                or self.running[AsrPriority.BACKGROUND] >= self.background_limit
            ):
                return
            heapq.heappop(self.waiting)
            self.running[AsrPriority(priority)] += 1
            future.set_result(None)


class PriorityLimit:
    """At most `limit` concurrent transcriptions per event loop, foreground first.

    Args:
        limit: concurrent transcriptions (int >= 1).
        background_limit: of which background ones at most (default `limit - 1`, at least 1).

    Raises:
        ValueError: a limit that is not an int >= 1.
    """

    def __init__(self, limit: int, background_limit: int | None = None) -> None:
        if background_limit is None:
            background_limit = max(1, limit - 1) if isinstance(limit, int) else 0
        for value in (limit, background_limit):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError("concurrency limit must be an int >= 1")
        self.limit = limit
        self.background_limit = min(background_limit, limit)
        self._gates: WeakKeyDictionary[asyncio.AbstractEventLoop, _Gate] = WeakKeyDictionary()

    def _gate(self) -> _Gate:
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = _Gate(self.limit, self.background_limit)
        return gate

    def busy(self) -> int:
        """Transcriptions holding a slot on the running loop."""
        return self._gate().busy()

    async def acquire(self, priority: AsrPriority, latest_start: float | None = None) -> None:
        """Wait for a slot for a job of `priority`.

        `latest_start`: `time.monotonic()` after which the job is not worth starting; a job
        granted later is refused with `TranscriptionSkipped` (its slot given back).
        Cancellation leaves the queue (a slot granted meanwhile is given back).
        """
        gate = self._gate()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(gate.waiting, (int(priority), next(gate.arrivals), future))
        gate.dispatch()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(priority)
            raise
        if latest_start is not None and time.monotonic() > latest_start:
            self.release(priority)
            raise TranscriptionSkipped("background transcription would finish too late")

    def release(self, priority: AsrPriority) -> None:
        """Give back a slot of `priority` (on the loop that acquired it, from a task or a
        callback)."""
        gate = self._gate()
        gate.running[priority] -= 1
        gate.dispatch()

    @contextlib.contextmanager
    def foreground_work(self) -> Iterator[None]:
        """Hold background jobs back (none starts; running ones go on) while the block runs:
        foreground work outside ASR, such as synthesizing a reply's first audio. Call on the
        event loop."""
        gate = self._gate()
        gate.foreground_holds += 1
        try:
            yield
        finally:
            gate.foreground_holds -= 1
            gate.dispatch()


__all__ = ["AsrPriority", "PriorityLimit", "TranscriptionSkipped"]
