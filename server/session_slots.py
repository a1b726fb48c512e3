"""`--max-sessions`: the count of a server's open realtime sessions, in one process or shared
by the worker processes of `--workers` (`server.workers`)."""

from __future__ import annotations

import contextlib
import multiprocessing
from multiprocessing.sharedctypes import Synchronized
from typing import Any


class SessionSlots:
    """At most `limit` sessions open at once.

    Args:
        limit: the most sessions open at once (`--max-sessions`).
        shared: a count in shared memory (`shared_count`) that several processes take their
            sessions from, under its lock; None: a count of this process's own.
    """

    def __init__(self, limit: int, shared: Synchronized[int] | None = None) -> None:
        self.limit = limit
        self._count: Any = shared if shared is not None else _Count()
        self._lock: Any = shared.get_lock() if shared is not None else contextlib.nullcontext()

    @property
    def open(self) -> int:
        """Sessions open now (in every process sharing the count)."""
        return self._count.value

    def full(self) -> bool:
        """True when no session can open now."""
        return self._count.value >= self.limit

    def take(self) -> bool:
        """Open one session: True, or False (and nothing changes) when `limit` are open."""
        with self._lock:
            if self._count.value >= self.limit:
                return False
            self._count.value += 1
            return True

    def release(self) -> None:
        """Close one session taken with `take`."""
        with self._lock:
            self._count.value -= 1


class _Count:
    """A count of one process (the `value` of a `multiprocessing.Value`, without its lock)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


def shared_count() -> Synchronized[int]:
    """A zero count in shared memory, locked, that processes started with multiprocessing's
    spawn method can be given (`SessionSlots(shared=...)`)."""
    return multiprocessing.get_context("spawn").Value("i", 0)
