"""Server benchmarks: time to first audio, barge-in stop, audio in flight, CPU and RSS.

Starts a real `server.app.DemoServer` in this process on 127.0.0.1 (a free port) and drives it
with plain `websockets` clients over loopback. The clients run in a child process of this script
(`--role client`) so that their CPU is not counted as the server's; the RSS figures come from a
fresh child process (`--role rss`). Every loop is bounded; a full run takes about 3 minutes on
2 cores. Prints one plain-text table per measurement with its target and PASS/FAIL.
Method, definitions and caveats: benchmarks/README.md.

Run from the project root: `.venv/bin/python -m benchmarks.bench_server`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib.metadata
import json
import os
import platform
import random
import shlex
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode

from benchmarks.tables import print_table
from calibration.local_asr import LocalWhisperTranscriber
from server.app import DemoServer
from server.config import ServerConfig, build_services
from server.realtime.session import SessionConfig
from server.responders.demo_topics import TOPICS
from server.sending import wait_set
from server.services import Services
from server.speech.synthesizer import SpeechChunk, SpeechSynthesizer, StopSignal

HOST = "127.0.0.1"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
CHILD = (sys.executable, "-m", "benchmarks.bench_server")
"""How the client and RSS child processes are started (with `cwd=PROJECT_ROOT`)."""

TTFA_P50_MS = 200.0
TTFA_P95_MS = 350.0
"""Warm first audio, default config, quiet machine (issue 12): p50 / p95 targets (ms), also
for a prompt 0.25 s after a barge-in."""
STOP_P99_MS = 5.0
FRAME_MS = 100
"""Audio per `response.output_audio.delta` (server.realtime.session.SessionConfig.frame_ms)."""
CPU_PCT_PER_SESSION = 1.0

ACK_INTERVAL_S = 0.150
PLAYBACK_JITTER_MS = 100
"""Simulated client: played = elapsed since its first audio delta - 100 ms, ACKed every 150 ms."""
BARGE_WINDOW_S = (0.05, 4.0)
"""A barge-in comes at a uniformly random moment this long after the first audio delta."""
BARGE_SESSIONS = 5
BARGES_PER_SESSION = 6
PAUSE_S = 0.25
"""Idle time after a barge-in's `response.done` before the next barge-in prompt."""
TYPING_S = 1.0
"""Time to first audio: a typed prompt comes this long after the previous reply was stopped
(nobody types a new prompt faster); a separate run uses PAUSE_S to show what a prompt sent
right after a barge-in costs."""
CPU_SETTLE_S = 2.0
"""Wait after every streaming session got its first audio before the CPU window opens."""

WARM_UP_PROMPT = "say: Hello there. This is a warm up before the measured prompts."
SAY_PROMPTS = tuple(
    "say: " + reply
    for reply in (
        "Sure, I can help with that. The train to the coast leaves at ten past nine, and the "
        "trip takes a little under two hours.",
        "Good morning! It looks like a bright day with a light breeze from the west. You might "
        "want a jacket for the evening, though.",
        "That is a great question. Most house plants like bright, indirect light and a good "
        "drink about once a week. Let the soil dry out a little between waterings.",
        "I found three recipes that use the vegetables you have. The quickest one is a stir fry "
        "that takes about twenty minutes.",
        "Your meeting with the design team has moved to Thursday afternoon. I have updated the "
        "calendar and sent a note to everyone invited.",
        "The museum opens at ten and closes at six on weekdays. Tickets are cheaper if you book "
        "them online the day before.",
        "Honestly, I would start with the short trail along the river. It is flat and shaded, "
        "and there is a small cafe at the far end.",
        "Let me read that back to you. You want two large pizzas, one with mushrooms and one "
        "with peppers, delivered at seven.",
        "The library has the book you asked about. It is on the second floor, in the history "
        "section, near the big windows.",
        "Well, the quickest way is to take the bus to the main square and then walk for five "
        "minutes. If it rains, the tram stops right outside.",
        "I have set a timer for twelve minutes. I will let you know when the pasta is ready.",
        "Here is a quick summary of the article. Sleep helps the brain sort and store what we "
        "learned during the day, and even a short nap can help.",
        "No problem at all. I have moved your dentist appointment to next Monday at half past "
        "three.",
        "The package left the warehouse this morning. It should arrive tomorrow before noon, "
        "and someone will need to sign for it.",
        "Sounds like a plan. Bring comfortable shoes, a bottle of water and something warm, "
        "because it gets cold at the top.",
        "Your flight is on time and boarding starts at gate twelve in forty minutes. The "
        "security line is short right now.",
        "I think the red one suits the room better. It matches the cushions, and it will look "
        "warmer in the evening light.",
        "A cup of green tea has about a third of the caffeine of a cup of coffee. It is a "
        "gentler choice in the afternoon.",
        "The first step is to unplug the router and wait for thirty seconds. Then plug it back "
        "in and give it two minutes to restart.",
        "Happy birthday to your sister! A handwritten card and her favourite flowers would make "
        "a lovely surprise.",
    )
)
TOPIC_PROMPTS = (
    "tell me about tides", "how does bread rise?", "tell me about the history of radio",
    "what can you tell me about the planets?", "tell me about the first marathon",
    "how do honey bees make honey?", "why does the sea have tides?",
    "how do I bake sourdough bread?", "who invented the radio?", "tell me about the solar system",
    "what was the first olympic marathon like?", "how does a beehive work?",
    "what does the moon do to the ocean?", "how do you knead dough?",
    "tell me about broadcasting", "is Mars a planet?", "why do runners run marathons?",
    "what is pollination?", "hello, what can you talk about?",
    "tell me something about astronomy",
)
LONG_PROMPTS = TOPIC_PROMPTS[:6]
"""One prompt per main topic: replies of 920-1260 characters (about 55-85 s of audio)."""


# ---------------------------------------------------------------------------------- reporting


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of `values`, linear interpolation (numpy); nan when empty."""
    return float(np.percentile(values, q)) if values else float("nan")


def verdict(ok: bool) -> str:
    """'PASS' or 'FAIL'."""
    return "PASS" if ok else "FAIL"


def proc_field(path: str, key: str) -> str:
    """The value after "key:" in a /proc file of "key: value" lines (e.g. VmRSS of
    /proc/PID/status), stripped; "?" when the key is missing."""
    with open(path, encoding="utf-8") as handle:
        for text in handle:
            name, _, value = text.partition(":")
            if name.strip() == key:
                return value.strip()
    return "?"


def cpu_snapshot() -> tuple[float, float, float]:
    """(machine busy CPU s from /proc/stat, CPU s of this process and its reaped children,
    perf_counter s); give it to `other_load` later."""
    with open("/proc/stat", encoding="utf-8") as handle:
        ticks = [int(value) for value in handle.readline().split()[1:9]]
    busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    own = os.times()
    return (busy, own.user + own.system + own.children_user + own.children_system,
            time.perf_counter())


def other_load(before: tuple[float, float, float]) -> str:
    """Cores used by other processes on this machine since `before` (a `cpu_snapshot()`):
    machine busy time minus this process and its reaped children, over the wall time."""
    busy, own, wall = cpu_snapshot()
    cores = max(0.0, (busy - before[0] - (own - before[1])) / (wall - before[2]))
    return f"other processes used {cores:.2f} of {len(os.sched_getaffinity(0))} cores meanwhile"


def machine_facts() -> list[tuple[str, str]]:
    """(name, value) pairs: nproc, CPU model, memory, Python, OS and the key package versions."""
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}"
        for name in ("websockets", "piper-tts", "onnxruntime", "faster-whisper", "numpy")
    )
    return [
        ("nproc", f"{len(os.sched_getaffinity(0))} (os.cpu_count() = {os.cpu_count()})"),
        ("cpu", proc_field("/proc/cpuinfo", "model name")),
        ("memory", proc_field("/proc/meminfo", "MemTotal")),
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("os", platform.platform()),
        ("load average", " ".join(f"{value:.2f}" for value in os.getloadavg())),
        ("packages", versions),
    ]


def print_run_header() -> None:
    """Print the command that started this run and the machine facts, one per line."""
    print(f"command: {command_line()}")
    for name, value in machine_facts():
        print(f"{name}: {value}")
    sys.stdout.flush()


def command_line() -> str:
    """The command that started this run (whichever benchmark's `__main__`), as typed from
    the project root."""
    python = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) else (
        sys.executable)
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    if spec is not None:
        return shlex.join([python, "-m", spec.name, *sys.argv[1:]])
    return shlex.join([python, *sys.argv])


# ---------------------------------------------------------------------------------- client side


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


async def client_ttfa(spec: dict[str, Any]) -> dict[str, Any]:
    """One session: a warm-up prompt, then say/topic prompts alternately. For each, the time
    from sending `response.create` to the first audio delta; then `barge_in` at 0 ms (the user
    stops it), wait for `response.done` and `spec["think_s"]` seconds."""
    client = await BenchClient.open(spec["url"])
    prompts = [("warm-up", WARM_UP_PROMPT)]
    for say, topic in zip(SAY_PROMPTS, TOPIC_PROMPTS, strict=True):
        prompts += [("say", say), ("topic", topic)]
    samples: list[dict[str, Any]] = []
    for kind, text in prompts:
        response_id, sent_at = await client.prompt(text)
        track = client.tracks[response_id]
        async with asyncio.timeout(30):
            await track.first_audio.wait()
        assert track.first_audio_at is not None
        samples.append({"kind": kind, "ms": (track.first_audio_at - sent_at) * 1000})
        await client.barge_in(response_id, 0)
        async with asyncio.timeout(10):
            await track.done.wait()
        await asyncio.sleep(spec["think_s"])
    await client.close()
    return {"samples": samples, "errors": client.errors}


async def _barge_session(url: str, rng: random.Random, count: int) -> tuple[list[Any], list[str]]:
    client = await BenchClient.open(url)
    records = []
    for _ in range(count):
        response_id, _sent = await client.prompt(rng.choice(TOPIC_PROMPTS))
        track = client.tracks[response_id]
        async with asyncio.timeout(30):
            await track.first_audio.wait()
        assert track.first_audio_at is not None
        barge_at = track.first_audio_at + rng.uniform(*BARGE_WINDOW_S)
        next_ack = track.first_audio_at + ACK_INTERVAL_S
        while (now := time.perf_counter()) < barge_at:
            if now >= next_ack:
                await client.ack(response_id, track.played_ms(now))
                next_ack += ACK_INTERVAL_S
            await asyncio.sleep(max(0.0, min(next_ack, barge_at) - time.perf_counter()))
        now = time.perf_counter()
        played, received = track.played_ms(now), track.max_end_ms
        sent_at = time.perf_counter()
        await client.barge_in(response_id, played)
        async with asyncio.timeout(10):
            await track.done.wait()
        assert track.done_at is not None
        records.append({
            "session_id": client.session_id, "response_id": response_id,
            "played_ms": played, "received_ms": received, "status": track.status,
            "done_ms": (track.done_at - sent_at) * 1000,
            "late_deltas": sum(1 for at, _end in track.deltas if at >= sent_at),
        })
        await asyncio.sleep(PAUSE_S)
    await client.close()
    return records, client.errors


async def client_barge(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec["sessions"]` concurrent sessions, each `spec["barges"]` times: a topic prompt,
    real-time ACKs, then `barge_in` at the simulated played position at a random moment."""
    results = await asyncio.gather(*(
        _barge_session(spec["url"], random.Random(spec["seed"] * 1000 + index), spec["barges"])
        for index in range(spec["sessions"])
    ))
    return {"barges": [r for records, _ in results for r in records],
            "errors": [e for _, errors in results for e in errors]}


async def _stream_session(url: str, rng: random.Random, ready: asyncio.Event,
                          stop: asyncio.Event) -> dict[str, int]:
    client = await BenchClient.open(url)
    underrun_ms, replies = 0, 0
    while not stop.is_set():
        response_id, _sent = await client.prompt(rng.choice(LONG_PROMPTS))
        track = client.tracks[response_id]
        async with asyncio.timeout(120):
            await track.first_audio.wait()
        assert track.first_audio_at is not None
        ready.set()
        while not stop.is_set() and not track.done.is_set():
            now = time.perf_counter()
            wanted = int((now - track.first_audio_at) * 1000) - PLAYBACK_JITTER_MS
            underrun_ms = max(underrun_ms, wanted - track.max_end_ms)
            await client.ack(response_id, track.played_ms(now))
            await wait_set(stop, ACK_INTERVAL_S)
        replies += track.done.is_set()
    await client.close()
    return {"underrun_ms": underrun_ms, "replies_completed": replies,
            "errors": len(client.errors)}


async def client_stream(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec["sessions"]` concurrent sessions streaming long replies with real-time ACKs.

    Prints "ready" once every session got audio, streams until a line arrives on stdin, then
    returns per-session stats (`underrun_ms`: worst shortfall of received audio behind the
    simulated playback clock, 0 or less when playback never starved).
    """
    stop = asyncio.Event()
    ready = [asyncio.Event() for _ in range(spec["sessions"])]
    tasks = [
        asyncio.create_task(_stream_session(spec["url"], random.Random(spec["seed"] + index),
                                            ready[index], stop))
        for index in range(spec["sessions"])
    ]
    async with asyncio.timeout(120):
        await asyncio.gather(*(event.wait() for event in ready))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    stop.set()
    return {"sessions": await asyncio.gather(*tasks)}


CLIENT_MODES: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "ttfa": client_ttfa, "barge": client_barge, "stream": client_stream,
}


# ---------------------------------------------------------------------------------- server side


@dataclass(slots=True)
class ResponseProbe:
    """Server-side observations of one response. Times are `time.perf_counter()` seconds.

    Attributes:
        barge_parsed_at: websockets parsed the client's `barge_in` frame for it
            (`Connection.process_event`, called from `data_received`).
        barge_dispatched_at: the server's receive loop took that frame from websockets.
        sent_ms_at_barge: `audio_end_ms` of its last audio delta handed to the socket before
            `barge_parsed_at`.
        last_end_ms: `audio_end_ms` of its latest audio delta handed to the socket.
        audio_after_barge: times its audio deltas were handed to the socket at or after
            `barge_parsed_at` (a correct barge-in leaves this empty).
        done_at, done_status: when its `response.done` was handed to the socket, and status.
    """

    barge_parsed_at: float | None = None
    barge_dispatched_at: float | None = None
    sent_ms_at_barge: int = 0
    last_end_ms: int = 0
    audio_after_barge: list[float] = field(default_factory=list)
    done_at: float | None = None
    done_status: str = ""


_AUDIO_PREFIX = '{"type": "response.output_audio.delta"'
_DONE_PREFIX = '{"type": "response.done"'
_CREATED_PREFIX = '{"type": "session.created"'


class ProbedSocket:
    """Wraps a server `ServerConnection` to timestamp barge-ins and outgoing audio.

    The server's `Connection` iterates the socket and frames its events with the socket's
    protocol object (`server.outbound.send_events`); both are observed here and forwarded
    unchanged, every other attribute is the wrapped connection's. The socket's
    `process_event` is wrapped too, to see a `barge_in` frame as soon as websockets parses it.
    """

    def __init__(self, inner: ServerConnection,
                 probes: dict[tuple[str, str], ResponseProbe]) -> None:
        self._inner = inner
        self._probes = probes
        self._session_id = ""
        parse = inner.process_event

        def process_event(event: Any) -> None:
            if isinstance(event, Frame) and event.opcode is Opcode.TEXT:
                self._on_barge(bytes(event.data), parsed=True)
            parse(event)

        inner.process_event = process_event  # type: ignore[method-assign]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __aiter__(self) -> AsyncIterator[str | bytes]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[str | bytes]:
        async for frame in self._inner:
            self._on_barge(frame.encode() if isinstance(frame, str) else frame, parsed=False)
            yield frame

    def _probe(self, response_id: str) -> ResponseProbe:
        return self._probes.setdefault((self._session_id, response_id), ResponseProbe())

    def _on_barge(self, data: bytes, *, parsed: bool) -> None:
        if b'"barge_in"' not in data:
            return
        now = time.perf_counter()
        probe = self._probe(json.loads(data)["response_id"])
        if parsed and probe.barge_parsed_at is None:
            probe.barge_parsed_at = now
            probe.sent_ms_at_barge = probe.last_end_ms
        elif not parsed and probe.barge_dispatched_at is None:
            probe.barge_dispatched_at = now

    @property
    def protocol(self) -> _ProbedProtocol:
        """The connection's Sans-I/O protocol, whose `send_text` the server's
        `send_events` frames every event with: each frame is recorded there."""
        return _ProbedProtocol(self._inner.protocol, self._record)

    def _record(self, message: str) -> None:
        """Timestamp an outgoing server event (audio end, response.done, the session id)."""
        now = time.perf_counter()
        if message.startswith(_AUDIO_PREFIX):
            event = json.loads(message)
            probe = self._probe(event["response_id"])
            probe.last_end_ms = event["audio_end_ms"]
            if probe.barge_parsed_at is not None:
                probe.audio_after_barge.append(now)
        elif message.startswith(_DONE_PREFIX):
            response = json.loads(message)["response"]
            probe = self._probe(response["id"])
            probe.done_at, probe.done_status = now, response["status"]
        elif message.startswith(_CREATED_PREFIX):
            self._session_id = json.loads(message)["session"]["id"]


class _ProbedProtocol:
    """A `websockets` protocol object whose `send_text` hands each frame's text to `record`
    first; every other attribute is the wrapped protocol's."""

    def __init__(self, inner: Any, record: Callable[[str], None]) -> None:
        self._inner = inner
        self._record = record

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def send_text(self, data: bytes, fin: bool = True) -> None:
        """Record the frame, then frame it unchanged."""
        self._record(data.decode())
        self._inner.send_text(data, fin)


class ProbedServer(DemoServer):
    """`DemoServer` whose connections are `ProbedSocket`s; `probes` keyed (session, response)."""

    def __init__(self, services: Services) -> None:
        super().__init__(services)
        self.probes: dict[tuple[str, str], ResponseProbe] = {}

    async def _handle(self, websocket: ServerConnection) -> None:
        await super()._handle(ProbedSocket(websocket, self.probes))  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def serving(demo: DemoServer) -> AsyncIterator[str]:
    """Start `demo` on HOST, a free port; yield its realtime URL; stop it afterwards."""
    server = await demo.start(HOST, 0)
    try:
        yield f"ws://{HOST}:{demo.port()}/v1/realtime"
    finally:
        server.close()
        await server.wait_closed()


async def run_clients(spec: dict[str, Any],
                      during: Callable[[], Awaitable[None]] | None = None,
                      child: Sequence[str] = CHILD) -> dict[str, Any]:
    """Run `client_main(spec)` in a child Python process; return its JSON result.

    With `during`: wait for the child's "ready" line, await `during()`, then tell the child to
    stop (a line on its stdin). `child` is the command of a benchmark module whose
    `--role client --spec JSON` runs the client (this one's by default). Raises RuntimeError
    when the child fails.
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


# ---------------------------------------------------------------------------------- measurements


async def measure_ttfa(runs: dict[str, tuple[Services, float]]) -> None:
    """Table 1: time from `response.create` sent to the first audio delta received (warm);
    `runs`: label -> (services, seconds between a stopped reply and the next prompt)."""
    rows = []
    load = cpu_snapshot()
    for label, (services, think_s) in runs.items():
        async with serving(DemoServer(services)) as url:
            result = await run_clients({"mode": "ttfa", "url": url, "think_s": think_s})
        for kind in ("say", "topic", "all"):
            values = [s["ms"] for s in result["samples"]
                      if s["kind"] == kind or (kind == "all" and s["kind"] != "warm-up")]
            p50, p95 = percentile(values, 50), percentile(values, 95)
            rows.append([label, kind, len(values), p50, p95, max(values),
                         len(result["errors"]), f"p50<={TTFA_P50_MS:.0f} p95<={TTFA_P95_MS:.0f}",
                         verdict(p50 <= TTFA_P50_MS and p95 <= TTFA_P95_MS)])
    print_table(
        "1. Time to first audio after a typed prompt, warm (1 warm-up prompt, then 20 say: + 20 "
        "topic prompts alternately, one session; each reply stopped by barge_in at its first "
        f"audio, next prompt {TYPING_S:.1f} s later unless the label says otherwise); "
        + other_load(load),
        ["tts (calibration)", "prompts", "n", "p50 ms", "p95 ms", "max ms", "errors", "target",
         "PASS/FAIL"], rows)


@dataclass(frozen=True, slots=True)
class BargeSample:
    """One barge-in joined from client and server records (ms)."""

    played_ms: int
    received_ms: int
    server_sent_ms: int
    frames_after: int
    stop_ms: float
    done_ms: float
    dispatch_ms: float
    client_done_ms: float
    late_deltas: int


def _join_barges(result: dict[str, Any], probes: dict[tuple[str, str], ResponseProbe]
                 ) -> list[BargeSample]:
    samples = []
    for record in result["barges"]:
        probe = probes[(record["session_id"], record["response_id"])]
        if probe.barge_parsed_at is None or probe.done_at is None:
            raise RuntimeError(f"barge-in not seen by the server: {record}")
        parsed = probe.barge_parsed_at
        last = max(probe.audio_after_barge, default=parsed)
        samples.append(BargeSample(
            played_ms=record["played_ms"], received_ms=record["received_ms"],
            server_sent_ms=probe.sent_ms_at_barge, frames_after=len(probe.audio_after_barge),
            stop_ms=(last - parsed) * 1000, done_ms=(probe.done_at - parsed) * 1000,
            dispatch_ms=((probe.barge_dispatched_at or parsed) - parsed) * 1000,
            client_done_ms=record["done_ms"], late_deltas=record["late_deltas"],
        ))
    return samples


async def measure_barge(runs: dict[str, tuple[Services, SessionConfig]], seed: int) -> None:
    """Tables 2a, 2b and 3: barge-ins at random moments of real-time-ACKed playback;
    `runs`: label -> (services, the session settings to use)."""
    results: dict[str, list[BargeSample]] = {}
    load = cpu_snapshot()
    for label, (services, session_config) in runs.items():
        demo = ProbedServer(replace(services, session_config=session_config))
        async with serving(demo) as url:
            result = await run_clients({"mode": "barge", "url": url, "seed": seed,
                                        "sessions": BARGE_SESSIONS, "barges": BARGES_PER_SESSION})
        if result["errors"]:
            raise RuntimeError(f"{label}: server errors {result['errors']}")
        results[label] = _join_barges(result, demo.probes)
    every = [s for samples in results.values() for s in samples]
    stop_rows = []
    for label, samples in [*results.items(), ("all runs", every)]:
        stop = [s.stop_ms for s in samples]
        done = [s.done_ms for s in samples]
        after = sum(s.frames_after for s in samples)
        p99 = percentile(stop, 99)
        stop_rows.append([label, len(samples), after, p99, max(stop), percentile(done, 50),
                          percentile(done, 99), percentile([s.dispatch_ms for s in samples], 99),
                          f"p99<={STOP_P99_MS:.0f}, 0 frames", verdict(p99 <= STOP_P99_MS
                                                                       and after == 0)])
    print_table(
        f"2a. barge_in received -> last audio frame of that response sent, server side "
        f"({BARGE_SESSIONS} concurrent sessions x {BARGES_PER_SESSION} barge-ins per run, "
        f"at uniform {BARGE_WINDOW_S[0]}-{BARGE_WINDOW_S[1]} s after first audio); "
        + other_load(load),
        ["run", "n", "frames sent after", "stop p99 ms", "stop max ms", "->done p50 ms",
         "->done p99 ms", "->dispatch p99 ms", "target", "PASS/FAIL"], stop_rows)
    client_rows = []
    for label, samples in [*results.items(), ("all runs", every)]:
        done = [s.client_done_ms for s in samples]
        late = [s.late_deltas for s in samples]
        client_rows.append([label, len(samples), percentile(done, 50), percentile(done, 99),
                            max(done), sum(late), max(late), "info", "-"])
    print_table(
        "2b. Client view: barge_in sent -> cancelled response.done received; audio deltas of "
        "that response received after barge_in was sent (sent before the server parsed it)",
        ["run", "n", "->done p50 ms", "->done p99 ms", "->done max ms", "late deltas",
         "max per barge", "target", "PASS/FAIL"], client_rows)
    flight_rows = []
    for label, samples in results.items():
        lead_ms = runs[label][1].lead_ms
        target = lead_ms + FRAME_MS
        flight = [s.received_ms - s.played_ms for s in samples]
        server = [s.server_sent_ms - s.played_ms for s in samples]
        p95, worst = percentile(flight, 95), max(flight)
        flight_rows.append([label, lead_ms, len(samples), percentile(flight, 50), p95, worst,
                            max(server), f"<={target}",
                            f"{verdict(p95 <= target)} / {verdict(worst <= target)}"])
    print_table(
        "3. Audio in flight beyond the played position at a barge-in: max audio_end_ms received "
        "- simulated played_ms (client); server column: audio_end_ms handed to the socket when "
        "the barge_in was parsed - played_ms",
        ["run", "lead ms", "n", "p50 ms", "p95 ms", "max ms", "server max ms", "target",
         "PASS/FAIL (p95 / max)"], flight_rows)


class CountingSynthesizer:
    """A `SpeechSynthesizer` passing another one's chunks through, counting their samples
    (`samples`, at the inner synthesizer's rate; updated under a lock, from worker threads)."""

    def __init__(self, inner: SpeechSynthesizer) -> None:
        self.inner = inner
        self.name = inner.name
        self.sample_rate_hz = inner.sample_rate_hz
        self.samples = 0
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Warm up the inner synthesizer."""
        self.inner.warm_up()

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        """The inner synthesizer's chunks for `text` (stopped by `stop`), counted."""
        for chunk in self.inner.synthesize(text, stop):
            with self._lock:
                self.samples += len(chunk.pcm)
            yield chunk


async def _cpu_window(seconds: float, counter: CountingSynthesizer,
                      window: dict[str, float]) -> None:
    """Wait CPU_SETTLE_S, then measure this process for `seconds`: fills `window` with cpu
    (process CPU s), loop (main-thread CPU s, the event loop), audio (s synthesized) and
    wall (s)."""
    await asyncio.sleep(CPU_SETTLE_S)
    cpu, loop, wall = time.process_time(), time.thread_time(), time.perf_counter()
    samples = counter.samples
    await asyncio.sleep(seconds)
    window.update(cpu=time.process_time() - cpu, loop=time.thread_time() - loop,
                  wall=time.perf_counter() - wall,
                  audio=(counter.samples - samples) / counter.sample_rate_hz)


async def _drain_after_close(counter: CountingSynthesizer) -> tuple[float, float]:
    """After every session closed: (seconds until this process used < 0.1 core over a 0.5 s
    interval, at most 60 s; audio seconds synthesized meanwhile, for nobody)."""
    closed, samples = time.perf_counter(), counter.samples
    while time.perf_counter() - closed < 60:
        cpu = time.process_time()
        await asyncio.sleep(0.5)
        if time.process_time() - cpu < 0.05:
            break
    busy_s = max(0.0, time.perf_counter() - closed - 0.5)
    return busy_s, (counter.samples - samples) / counter.sample_rate_hz


async def _stream_run(services: Services, sessions: int, seconds: float,
                      seed: int) -> dict[str, Any]:
    """One CPU run: the `_cpu_window` figures plus per-session client stats ("sessions") and
    the drain after close ("drain_s", "drain_audio_s")."""
    window: dict[str, Any] = {}
    counter = CountingSynthesizer(services.synthesizer)
    async with serving(DemoServer(replace(services, synthesizer=counter))) as url:
        result = await run_clients({"mode": "stream", "url": url, "seed": seed,
                                    "sessions": sessions},
                                   functools.partial(_cpu_window, seconds, counter, window))
    window["drain_s"], window["drain_audio_s"] = await _drain_after_close(counter)
    window["sessions"] = result["sessions"]
    return window


async def measure_cpu(engines: dict[str, Services], sessions: int, seconds: float,
                      seed: int) -> None:
    """Table 4: server process CPU per streaming session (clients in a child process)."""
    rows = []
    per_session: dict[str, float] = {}
    load = cpu_snapshot()
    for label, services in engines.items():
        run = await _stream_run(services, sessions, seconds, seed)
        share = 100 * run["cpu"] / (sessions * run["wall"])
        per_session[label] = share
        other = run["cpu"] - run["loop"]
        tts = f"{100 * other / run['audio']:.1f}" if run["audio"] >= 1 else "-"
        held = (f"{len(os.sched_getaffinity(0)) * run['audio'] / other:.0f}"
                if run["audio"] >= 1 and other > 0 else "-")
        is_uniform = label.startswith("uniform")
        rows.append([
            label, sessions, run["wall"], run["cpu"], run["loop"], other, run["audio"], share,
            100 * run["loop"] / (sessions * run["wall"]), tts, held,
            max(s["underrun_ms"] for s in run["sessions"]),
            sum(s["errors"] for s in run["sessions"]), run["drain_s"], run["drain_audio_s"],
            f"<={CPU_PCT_PER_SESSION:.0f} %" if is_uniform else "info (TTS incl.)",
            verdict(share <= CPU_PCT_PER_SESSION) if is_uniform else "-"])
    labels = list(per_session)
    rows.append([f"{labels[1]} - {labels[0]} (TTS share)", "", "", "", "", "", "",
                 per_session[labels[1]] - per_session[labels[0]], "", "", "", "", "", "", "",
                 "info", "-"])
    print_table(
        f"4. Server CPU per streaming session: {sessions} concurrent long replies, real-time "
        f"ACKs every {ACK_INTERVAL_S * 1000:.0f} ms, window opens {CPU_SETTLE_S:.0f} s after all "
        "got audio; CPU = time.process_time() of the server process (loop = main-thread "
        "time.thread_time(), other = worker threads: TTS, ASR; TTS %/RT session = other cpu s "
        "per s of audio synthesized in the window; RT sessions held = cores / (other cpu s per "
        "s of audio): sessions speaking all the time that the cores could synthesize for, "
        "nothing left over; after close = server still busy once every client disconnected, "
        "and audio synthesized then); " + other_load(load),
        ["tts (calibration)", "sessions", "wall s", "cpu s", "loop cpu s", "other cpu s",
         "audio synth s", "% core/session", "loop %/session", "TTS %/RT session",
         "RT sessions held",
         "max underrun ms", "errors", "busy after close s", "audio after close s", "target",
         "PASS/FAIL"], rows)


# ---------------------------------------------------------------------------------- RSS


def rss_mb(key: str = "VmRSS") -> float:
    """This process's /proc/self/status `key` (VmRSS, VmHWM, ...) in MiB."""
    return int(proc_field("/proc/self/status", key).split()[0]) / 1024


def rss_main() -> None:
    """Child role: load what the server loads, step by step; print JSON [(stage, MiB)]."""
    rows = [("python + imports (server, calibration, numpy, websockets, faster_whisper)",
             rss_mb())]
    services = build_services(ServerConfig(port=0, tts="piper", calibration="marks"))

    async def start_and_measure() -> None:
        async with serving(DemoServer(services)):
            rows.append(("server started, Piper voice loaded + warmed (--calibration marks)",
                         rss_mb()))

    asyncio.run(start_and_measure())
    reply = TOPICS[1].text
    rate = services.synthesizer.sample_rate_hz
    pcm = np.concatenate([chunk.pcm for chunk in services.synthesizer.synthesize(reply)])
    rows.append((f"+ one {len(reply)}-char reply synthesized ({len(pcm) / rate:.0f} s of audio)",
                 rss_mb()))
    transcriber = LocalWhisperTranscriber()
    transcriber.load()
    rows.append(("+ whisper tiny.en loaded (what the default --calibration auto adds)",
                 rss_mb()))
    transcriber.transcribe_blocking(pcm[: rate * 10], rate)
    rows.append(("+ one 10 s transcription", rss_mb()))
    rows.append(("peak (VmHWM)", rss_mb("VmHWM")))
    print(json.dumps(rows), flush=True)


async def measure_rss() -> None:
    """Table 5: resident memory of a fresh process loading the server's models."""
    process = await asyncio.create_subprocess_exec(
        *CHILD, "--role", "rss", cwd=PROJECT_ROOT, stdout=asyncio.subprocess.PIPE)
    async with asyncio.timeout(180):
        output, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError("rss child process failed")
    rows = [[stage, mib, "info", "-"] for stage, mib in
            json.loads(output.decode().strip().splitlines()[-1])]
    print_table("5. RSS of a fresh process (VmRSS from /proc/self/status, MiB)",
                ["stage", "VmRSS MiB", "target", "PASS/FAIL"], rows)


# ---------------------------------------------------------------------------------- main


async def bench(args: argparse.Namespace) -> None:
    """Run measurements 5 (while the voices load), 1, 2/3 and 4, printing each table when
    done."""
    started = time.perf_counter()
    print_run_header()
    rss = asyncio.create_task(measure_rss())
    uniform = await asyncio.to_thread(
        build_services, ServerConfig(port=0, tts="uniform", calibration="marks"))
    piper = await asyncio.to_thread(build_services, ServerConfig(port=0, tts="piper"))
    await rss
    await measure_ttfa({
        f"uniform (marks), prompt {PAUSE_S} s after barge-in": (uniform, PAUSE_S),
        "piper (auto)": (piper, TYPING_S),
        f"piper (auto), prompt {PAUSE_S} s after barge-in": (piper, PAUSE_S),
    })
    session = uniform.session_config
    await measure_barge({
        "uniform lead 400": (uniform, replace(session, lead_ms=400)),
        "uniform lead 200": (uniform, replace(session, lead_ms=200)),
        "piper lead 400": (piper, replace(piper.session_config, lead_ms=400)),
        "diagnosis: uniform lead 400 jitter_ms=0": (uniform, replace(session, lead_ms=400,
                                                                      jitter_ms=0)),
    }, args.seed)
    await measure_cpu({"uniform (marks)": uniform, "piper (auto)": piper}, args.cpu_sessions,
                      args.cpu_seconds, args.seed)
    print(f"\ntotal wall time: {time.perf_counter() - started:.0f} s")


def client_main(spec_json: str) -> None:
    """Child role: run one client mode (`spec["mode"]`) and print its result as JSON."""
    spec = json.loads(spec_json)
    result = asyncio.run(CLIENT_MODES[spec["mode"]](spec))
    print(json.dumps(result), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("main", "client", "rss"), default="main",
                        help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=7, help="random seed for barge-in moments")
    parser.add_argument("--cpu-seconds", type=float, default=20.0,
                        help="CPU measurement window per engine (s)")
    parser.add_argument("--cpu-sessions", type=int, default=20,
                        help="concurrent streaming sessions for the CPU measurement")
    args = parser.parse_args(argv)
    if args.role == "client":
        client_main(args.spec)
    elif args.role == "rss":
        rss_main()
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
