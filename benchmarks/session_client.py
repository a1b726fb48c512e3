"""A simulated realtime client for the benchmarks, and how they start a server and run clients.

`BenchClient` is one session seen from the client: a reader task keeps a `ResponseTrack` per
response (arrival times, audio received, a simulated real-time playback position). `serving`
starts a `DemoServer` on loopback; `run_clients` runs a benchmark's client role in a child
process, so that the clients' CPU is not counted as the server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from benchmarks.measuring import HOST, PROJECT_ROOT
from server.app import DemoServer

PLAYBACK_JITTER_MS = 100
"""Simulated client: played = elapsed since its first audio delta - 100 ms, ACKed every 150 ms."""


@dataclass(slots=True)
class ResponseTrack:
    """What one client saw of one response. Times are `time.perf_counter()` seconds.

    Attributes:
        first_audio_at: arrival of its first `response.output_audio.delta`.
        max_end_ms: largest `audio_end_ms` received (ms of audio received so far).
        deltas: (arrival time, audio_end_ms) of every audio delta, in order.
        done_at, status: arrival and `status` of its `response.done`.
    """

    first_audio_at: float | None = None
    max_end_ms: int = 0
    deltas: list[tuple[float, int]] = field(default_factory=list)
    first_audio: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    done_at: float | None = None
    status: str = ""

    def played_ms(self, now: float) -> int:
        """Simulated real-time playback position at `now` (s): elapsed since the first audio
        minus PLAYBACK_JITTER_MS, clamped to [0, audio received]."""
        if self.first_audio_at is None:
            return 0
        elapsed_ms = int((now - self.first_audio_at) * 1000) - PLAYBACK_JITTER_MS
        return max(0, min(elapsed_ms, self.max_end_ms))


class BenchClient:
    """One realtime session seen from the client: a reader task keeps a `ResponseTrack` per
    response id (timestamps taken when each frame is read, before JSON decoding)."""

    def __init__(self, websocket: ClientConnection) -> None:
        self.websocket = websocket
        self.session_id = ""
        self.tracks: dict[str, ResponseTrack] = {}
        self.created: asyncio.Queue[str] = asyncio.Queue()
        self.errors: list[str] = []
        self._opened = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, url: str) -> BenchClient:
        """Connect to `url` and wait for `session.created` (TimeoutError after 10 s)."""
        client = cls(await connect(url, max_size=None, compression=None))
        async with asyncio.timeout(10):
            await client._opened.wait()
        return client

    async def close(self) -> None:
        """Close the socket and stop the reader."""
        await self.websocket.close()
        await asyncio.gather(self._reader, return_exceptions=True)

    async def _read(self) -> None:
        async for frame in self.websocket:
            now = time.perf_counter()
            self.on_event(json.loads(frame), now)

    def on_event(self, event: dict[str, Any], now: float) -> None:
        """Take in one server event that arrived at `now` (perf_counter s); subclasses that
        watch more events extend this."""
        kind = event["type"]
        if kind == "response.output_audio.delta":
            track = self.tracks[event["response_id"]]
            track.deltas.append((now, event["audio_end_ms"]))
            track.max_end_ms = max(track.max_end_ms, event["audio_end_ms"])
            if track.first_audio_at is None:
                track.first_audio_at = now
                track.first_audio.set()
        elif kind == "response.created":
            self.tracks[event["response"]["id"]] = ResponseTrack()
            self.created.put_nowait(event["response"]["id"])
        elif kind == "response.done":
            track = self.tracks[event["response"]["id"]]
            track.done_at, track.status = now, event["response"]["status"]
            track.done.set()
        elif kind == "session.created":
            self.session_id = event["session"]["id"]
            self._opened.set()
        elif kind == "error":
            self.errors.append(event["error"]["code"])

    async def send(self, event: dict[str, Any]) -> None:
        """Send one client event as a JSON text frame."""
        await self.websocket.send(json.dumps(event))

    async def prompt(self, text: str) -> tuple[str, float]:
        """Type `text` and request a reply; returns (response_id, perf_counter() s just before
        `response.create` was sent)."""
        await self.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]}})
        sent_at = time.perf_counter()
        await self.send({"type": "response.create"})
        async with asyncio.timeout(30):
            return await self.created.get(), sent_at

    async def ack(self, response_id: str, played_ms: int) -> None:
        """Send `playback.ack`."""
        await self.send({"type": "playback.ack", "response_id": response_id,
                         "played_ms": played_ms})

    async def barge_in(self, response_id: str, audio_end_ms: int) -> None:
        """Send `barge_in` (source "button")."""
        await self.send({"type": "barge_in", "response_id": response_id,
                         "audio_end_ms": audio_end_ms, "source": "button"})


@contextlib.asynccontextmanager
async def serving(demo: DemoServer) -> AsyncIterator[str]:
    """Start `demo` on HOST, a free port; yield its realtime URL; stop it afterwards."""
    server = await demo.start(HOST, 0)
    try:
        yield f"ws://{HOST}:{demo.port()}/v1/realtime"
    finally:
        server.close()
        await server.wait_closed()


async def run_clients(child: Sequence[str], spec: dict[str, Any],
                      during: Callable[[], Awaitable[None]] | None = None) -> dict[str, Any]:
    """Run a benchmark's client role on `spec` in a child Python process; return its JSON
    result (the last line it prints).

    `child` is the command of the benchmark module (e.g. `server_clients.CHILD`) whose
    `--role client --spec JSON` runs the client; it starts with `cwd=PROJECT_ROOT`. With
    `during`: wait for the child's "ready" line, await `during()`, then tell the child to
    stop (a line on its stdin). Raises RuntimeError when the child fails.
    """
    process = await asyncio.create_subprocess_exec(
        *child, "--role", "client", "--spec", json.dumps(spec), cwd=PROJECT_ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    if during is not None:
        async with asyncio.timeout(180):
            line = await process.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"client process did not get ready: {line!r}")
        await during()
        process.stdin.write(b"stop\n")
        await process.stdin.drain()
    async with asyncio.timeout(300):
        output = await process.stdout.read()
    if await process.wait() != 0:
        raise RuntimeError(f"client process failed ({spec['mode']})")
    return json.loads(output.decode().strip().splitlines()[-1])
