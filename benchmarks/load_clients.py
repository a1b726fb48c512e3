"""The simulated clients of `bench_load`, run in its child processes (`--role client`).

`FrameLink` is a WebSocket client as light as a load generator can make it (websockets'
Sans-I/O protocol driven from the transport's callbacks); `LoadClient` times each ACK and
barge-in to the server's answer and each audio delta against the simulated playback clock.
Modes: `load` (long replies with real-time ACKs and barge-ins, until told to stop; tables 1a and
1b) and `cycles` (connect/disconnect cycles; table 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.uri import parse_uri

from benchmarks.prompts import LONG_PROMPTS, TOPIC_PROMPTS, TYPING_S
from benchmarks.session_client import PLAYBACK_JITTER_MS, BenchClient, ResponseTrack

CHILD = (sys.executable, "-m", "benchmarks.bench_load")
"""How `bench_load`'s child processes are started (with `cwd=PROJECT_ROOT`): its client
processes (`--role client`) and, with `--profile`, its server (`--role server`)."""
ACK_INTERVAL_S = 0.100
"""The simulated clients ACK their playback position this often (s)."""
BARGE_AFTER_S = (1.0, 10.0)
"""A reply is interrupted at a uniformly random moment this long after its first audio delta
(the replies to LONG_PROMPTS run 55-85 s, so every reply is interrupted)."""
CONNECT_STAGGER_S = 0.010
"""Time between two session starts in one client process."""
LAG_TICK_S = 0.010
"""The client loop-lag probe sleeps this long and records how much later it woke."""
CYCLE_KINDS = ("idle", "barge", "drop")
"""Connect/disconnect cycles, in turn: connect and close; ask, ACK, barge in, close after
`response.done`; ask and drop the TCP connection at the first audio delta (mid-reply)."""


class FrameLink(asyncio.Protocol):
    """A client WebSocket as light as a load generator can make it: websockets' Sans-I/O
    `ClientProtocol` (handshake, framing, masking, close) driven straight from the transport's
    callbacks. Each text frame goes to `on_frame` as UTF-8 bytes with the time its data arrived
    (perf_counter s), in the callback that received it: no task wakes up, no message queue,
    no str decoding per frame, as `websockets.asyncio.client` would (that is most of a
    simulated client's CPU, and the clients share the cores with the server).

    Args:
        url: the `ws://` URL.
        on_frame: called with (frame bytes, arrival time s) for every text frame, in order.
    """

    def __init__(self, url: str, on_frame: Callable[[bytes, float], None]) -> None:
        self.protocol = ClientProtocol(parse_uri(url), max_size=None)
        self.on_frame = on_frame
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.protocol.send_request(self.protocol.connect())
        self._flush()

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.protocol.receive_data(data)
        for event in self.protocol.events_received():
            if not isinstance(event, Frame):  # the handshake's response
                if self.protocol.handshake_exc is not None:
                    self.opened.set_exception(self.protocol.handshake_exc)
                else:
                    self.opened.set_result(None)
            elif event.opcode is Opcode.TEXT:
                if not event.fin:
                    raise RuntimeError("the server fragmented a frame")
                self.on_frame(event.data, now)
        self._flush()

    def eof_received(self) -> None:
        self.protocol.receive_eof()
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_exception(exc or ConnectionError("closed during the handshake"))
        if not self.closed.done():
            self.closed.set_result(None)

    def send(self, text: str) -> None:
        """Send one text frame."""
        self.protocol.send_text(text.encode())
        self._flush()

    async def close(self) -> None:
        """Close handshake (code 1000), then the TCP connection; at most 10 s."""
        self.protocol.send_close()
        self._flush()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await asyncio.shield(self.closed)
        if self.transport is not None:
            self.transport.abort()

    def _flush(self) -> None:
        transport = self.transport
        assert transport is not None
        for data in self.protocol.data_to_send():
            if transport.is_closing():
                return
            if data:
                transport.write(data)
            else:  # the end of the stream: half-close, as websockets' asyncio client does
                with contextlib.suppress(OSError):
                    transport.write_eof()


class LoadClient(BenchClient):
    """A `BenchClient` on a `FrameLink` that times each `playback.ack` to its
    `playback.acknowledged` and each `barge_in` to its `conversation.item.truncated`.

    The server answers every client event in arrival order, each ACK with exactly one
    `playback.acknowledged` and each accepted barge-in with exactly one
    `conversation.item.truncated` (or either with one `error` naming its `event_id`), so the
    answers match the pending events first in, first out. Frames are timed when their data
    arrives (`FrameLink`).

    Attributes:
        latencies: "ack" / "barge" -> [(send time s, ms to the answer)].
        ttfa: [(send time of `response.create` s, ms to the first audio delta)].
        lateness: [(due time s, ms the audio delta arrived after it was due, >= 0)].
    """

    def __init__(self, link: FrameLink) -> None:
        self.pending: deque[tuple[str, str, float]] = deque()
        self.latencies: dict[str, list[tuple[float, float]]] = {"ack": [], "barge": []}
        self.ttfa: list[tuple[float, float]] = []
        self.lateness: list[tuple[float, float]] = []
        self._count = 0
        self.link = link
        link.on_frame = self.on_frame
        super().__init__(link)  # type: ignore[arg-type]  # BenchClient only keeps it

    @classmethod
    async def open(cls, url: str) -> LoadClient:
        """Connect to `url` and wait for `session.created` (TimeoutError after 10 s)."""
        uri = parse_uri(url)
        link = FrameLink(url, lambda _frame, _now: None)
        client = cls(link)
        try:
            await asyncio.get_running_loop().create_connection(lambda: link, uri.host, uri.port)
            async with asyncio.timeout(10):
                await asyncio.shield(link.opened)
            async with asyncio.timeout(10):
                await client._opened.wait()
        except BaseException:
            client._reader.cancel()
            if link.transport is not None:
                link.transport.abort()
            raise
        return client

    async def close(self) -> None:
        """Close the socket and stop the reader."""
        await self.link.close()
        await asyncio.gather(self._reader, return_exceptions=True)

    async def _read(self) -> None:
        """Frames arrive through `on_frame`; this only waits for the connection's end."""
        await self.link.closed

    async def send(self, event: dict[str, Any]) -> None:
        """Send one client event as a JSON text frame."""
        self.link.send(json.dumps(event))

    def on_frame(self, frame: bytes, now: float) -> None:
        """One server frame: a `playback.acknowledged` is matched by its type alone, an
        audio delta is parsed without its base64 `delta` (6.4 KB per 100 ms, unused here);
        everything else is parsed whole."""
        if frame.startswith(ACKNOWLEDGED_START):
            self._answered("playback.acknowledged", now)
        else:
            self.on_event(json.loads(_without_audio(frame).decode()), now)

    def on_event(self, event: dict[str, Any], now: float) -> None:
        """Match acknowledgements (and errors) to the pending ACKs and barge-ins."""
        kind = event["type"]
        if kind in ANSWERS:
            self._answered(kind, now)
        elif kind == "error" and self.pending and (
                event["error"].get("event_id") == self.pending[0][0]):
            self.pending.popleft()
        super().on_event(event, now)

    def _answered(self, kind: str, now: float) -> None:
        """An answer of `kind` (a key of ANSWERS) arrived at `now`: time the oldest pending
        event, which it answers."""
        if not self.pending:
            return
        _event_id, sent_kind, sent_at = self.pending.popleft()
        if sent_kind != ANSWERS[kind]:
            raise RuntimeError(f"{kind} answered a {sent_kind}")
        self.latencies[sent_kind].append((sent_at, (now - sent_at) * 1000))

    async def timed(self, kind: str, event: dict[str, Any]) -> None:
        """Send `event` ("ack" or "barge" `kind`) with an `event_id`; its answer is timed."""
        self._count += 1
        event_id = f"evt_{self._count}"
        self.pending.append((event_id, kind, time.perf_counter()))
        await self.send({**event, "event_id": event_id})

    def audio_lateness(self, track: ResponseTrack, until: float) -> None:
        """Record how late each audio delta of `track` arrived for the simulated playback.

        The delta whose audio starts at s ms (the previous delta's `audio_end_ms`) is due when
        the playback clock (`ResponseTrack.played_ms`) reaches s: at first audio +
        (s + PLAYBACK_JITTER_MS) ms. Deltas due after `until` (perf_counter s: the barge-in,
        or the end of the run) would not have been played and are left out.
        """
        if track.first_audio_at is None:
            return
        start_ms = 0
        for arrived, end_ms in track.deltas:
            due = track.first_audio_at + (start_ms + PLAYBACK_JITTER_MS) / 1000
            if due > until:
                break
            self.lateness.append((due, max(0.0, arrived - due) * 1000))
            start_ms = end_ms


ANSWERS = {"playback.acknowledged": "ack", "conversation.item.truncated": "barge"}
"""Server event -> the kind of timed client event it answers."""
ACKNOWLEDGED_START = b'{"type": "playback.acknowledged"'
AUDIO_DELTA_START = b'{"type": "response.output_audio.delta"'
"""How the server's frames of these events begin (Python's `json` spacing, `type` first)."""
DELTA_MEMBER = b', "delta": "'


def _without_audio(frame: bytes) -> bytes:
    """An audio delta frame without its `delta` member when that is the object's last (base64
    holds no quote, so the value ends at the frame's last quote); any other frame as it is."""
    if not frame.startswith(AUDIO_DELTA_START):
        return frame
    start = frame.find(DELTA_MEMBER)
    if start < 0 or frame.find(b'"', start + len(DELTA_MEMBER)) != len(frame) - 2:
        return frame
    return frame[:start] + b"}"


async def _load_session(url: str, rng: random.Random, ready: asyncio.Event,
                        stop: asyncio.Event) -> LoadClient:
    """One session until `stop`: long replies, ACKs every ACK_INTERVAL_S of real-time playback,
    a barge-in BARGE_AFTER_S into each reply, the next question TYPING_S after it.

    `ready` is set at the first audio (or when the session fails before it).
    """
    try:
        client = await LoadClient.open(url)
        while not stop.is_set():
            response_id, sent_at = await client.prompt(rng.choice(LONG_PROMPTS))
            track = client.tracks[response_id]
            async with asyncio.timeout(30):
                await track.first_audio.wait()
            assert track.first_audio_at is not None
            client.ttfa.append((sent_at, (track.first_audio_at - sent_at) * 1000))
            ready.set()
            barge_at = track.first_audio_at + rng.uniform(*BARGE_AFTER_S)
            next_ack = track.first_audio_at + ACK_INTERVAL_S
            while not stop.is_set() and (now := time.perf_counter()) < barge_at:
                if now >= next_ack:
                    await client.timed("ack", {"type": "playback.ack", "response_id": response_id,
                                               "played_ms": track.played_ms(now)})
                    next_ack = max(next_ack + ACK_INTERVAL_S, now)
                await asyncio.sleep(max(0.0, min(next_ack, barge_at) - time.perf_counter()))
            now = time.perf_counter()
            client.audio_lateness(track, now)
            if stop.is_set():
                break
            await client.timed("barge", {"type": "barge_in", "response_id": response_id,
                                         "audio_end_ms": track.played_ms(now),
                                         "source": "button"})
            async with asyncio.timeout(10):
                await track.done.wait()
            await asyncio.sleep(TYPING_S)
        await client.close()
        return client
    finally:
        ready.set()


async def _watch_loop(samples: list[tuple[float, float, float]], stop: asyncio.Event) -> None:
    """Until `stop`: every LAG_TICK_S, (time s, ms the loop woke late, process CPU s)."""
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(LAG_TICK_S)
        now = time.perf_counter()
        samples.append((now, (now - before - LAG_TICK_S) * 1000, time.process_time()))


def _rounded(samples: list[tuple[float, ...]]) -> list[list[float]]:
    return [[round(value, 4) for value in sample] for sample in samples]


async def client_load(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec["sessions"]` concurrent `_load_session`s (seeds from `spec["seed"]` and
    `spec["first"]`). Prints "ready" once each has audio, runs until a line arrives on stdin,
    then returns every sample with its time (perf_counter s: the same clock in every process).

    The cyclic garbage collector is off in the client processes: their samples (hundreds of
    thousands of lists and tuples) made each of its full collections pause a client's loop
    for 40-230 ms (measured at 200 sessions), timed into every server's latencies alike; a
    run is short, and what the clients leave for the collector is little."""
    gc.disable()
    stop = asyncio.Event()
    lag: list[tuple[float, float, float]] = []
    watcher = asyncio.create_task(_watch_loop(lag, stop))
    ready = [asyncio.Event() for _ in range(spec["sessions"])]
    tasks = []
    for index, event in enumerate(ready):
        rng = random.Random(spec["seed"] * 100_000 + spec["first"] + index)
        tasks.append(asyncio.create_task(_load_session(spec["url"], rng, event, stop)))
        await asyncio.sleep(CONNECT_STAGGER_S)
    async with asyncio.timeout(120):
        await asyncio.gather(*(event.wait() for event in ready))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    stop.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    await watcher
    clients = [result for result in results if isinstance(result, LoadClient)]
    failures = [repr(result) for result in results if not isinstance(result, LoadClient)]
    return {
        "ack": _rounded([s for c in clients for s in c.latencies["ack"]]),
        "barge": _rounded([s for c in clients for s in c.latencies["barge"]]),
        "ttfa": _rounded([s for c in clients for s in c.ttfa]),
        "lateness": _rounded([s for c in clients for s in c.lateness]),
        "lag": _rounded(lag),
        "errors": [error for c in clients for error in c.errors],
        "failures": failures,
    }


async def _cycle(url: str, rng: random.Random, kind: str) -> None:
    """One connect/disconnect cycle of `kind` (CYCLE_KINDS)."""
    client = await BenchClient.open(url)
    if kind != "idle":
        response_id, _sent = await client.prompt(rng.choice(TOPIC_PROMPTS))
        track = client.tracks[response_id]
        async with asyncio.timeout(30):
            await track.first_audio.wait()
        if kind == "drop":
            client.websocket.transport.abort()
        else:
            await client.ack(response_id, 50)
            await client.barge_in(response_id, 50)
            async with asyncio.timeout(10):
                await track.done.wait()
    await client.close()


async def client_cycles(spec: dict[str, Any]) -> dict[str, Any]:
    """Cycles number `spec["first"]` .. + `spec["count"]` - 1 (kind = number mod 3), at most
    `spec["concurrency"]` at a time; returns the failures' reprs."""
    numbers = iter(range(spec["first"], spec["first"] + spec["count"]))
    failures: list[str] = []

    async def worker() -> None:
        for number in numbers:
            try:
                await _cycle(spec["url"], random.Random(spec["seed"] * 100_000 + number),
                             CYCLE_KINDS[number % len(CYCLE_KINDS)])
            except Exception as exc:
                failures.append(repr(exc))

    await asyncio.gather(*(worker() for _ in range(spec["concurrency"])))
    return {"failures": failures}


def client_main(spec_json: str) -> None:
    """Child role: run `client_load` or `client_cycles` (`spec["mode"]`), print JSON."""
    spec = json.loads(spec_json)
    mode = {"load": client_load, "cycles": client_cycles}[spec["mode"]]
    print(json.dumps(asyncio.run(mode(spec))), flush=True)
