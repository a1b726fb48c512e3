"""A stalled event loop, for tests and benchmarks that run a real server and its clients in one
loop: a task blocks the loop for `STALL_MS` every `BETWEEN_MS` (seeded), as a busy 2-core
machine, a garbage collection or another session's work does. The server then reads its
clients' frames late and in bursts; the clients, blocked too, catch up at once (as a browser's
audio threads, which run on while its page's script is blocked, do).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

STALL_MS = (50, 400)
"""How long each stall blocks the event loop (ms, uniform)."""
BETWEEN_MS = (100, 800)
"""How long the loop runs between stalls (ms, uniform)."""


@asynccontextmanager
async def stalled_loop(seed: int) -> AsyncIterator[None]:
    """Block the running event loop `STALL_MS` every `BETWEEN_MS` (random.Random(`seed`))
    while the block runs."""
    rng = random.Random(seed)

    async def stall() -> None:
        while True:
            await asyncio.sleep(rng.uniform(*BETWEEN_MS) / 1000)
            time.sleep(rng.uniform(*STALL_MS) / 1000)

    task = asyncio.create_task(stall())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
