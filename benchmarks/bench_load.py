"""Load benchmark: how many concurrent sessions one server process holds within 20 ms, and
whether its memory comes back after many sessions came and went.

Starts the real server as a child process (`python -m server --tts uniform --calibration marks
--host 127.0.0.1 --port 0 --log-level warning`) and drives it over loopback with simulated
clients in `--client-processes` child processes of this script (`--role client`: one asyncio
loop each, the sessions split between them), so that the clients stay off the server's core as
far as 2 cores allow. With `--baseline DIR`, each load step also runs on a server started from
the checkout DIR, for a before/after comparison under the same machine load; with `--workers N`
this tree's server runs N worker processes (its `--workers`). Every wait is bounded. Method,
definitions and caveats: benchmarks/README.md ("Load benchmark").

Run from the project root: `.venv/bin/python -m benchmarks.bench_load`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import os
import pstats
import random
import re
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.uri import parse_uri

from benchmarks.bench_server import (
    HOST,
    LONG_PROMPTS,
    PLAYBACK_JITTER_MS,
    PROJECT_ROOT,
    TOPIC_PROMPTS,
    TYPING_S,
    BenchClient,
    ResponseTrack,
    cpu_snapshot,
    percentile,
    print_run_header,
    proc_field,
    run_clients,
    verdict,
)
from benchmarks.tables import print_table

CHILD = (sys.executable, "-m", "benchmarks.bench_load")
"""How the client processes are started (with `cwd=PROJECT_ROOT`)."""
SERVER_FLAGS = ("--tts", "uniform", "--calibration", "marks", "--host", HOST, "--port", "0",
                "--log-level", "warning")
LATENCY_P99_MS = 20.0
RSS_GROWTH_PCT = 5.0

ACK_INTERVAL_S = 0.100
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
SETTLE_S = 2.0
"""Wait after the last cycle before reading the server's memory (its handlers finish)."""


# ---------------------------------------------------------------------------------- client side


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


# ---------------------------------------------------------------------------------- server side


def _stat_cpu_s(path: str) -> float:
    """utime + stime of a /proc stat file, in seconds."""
    with open(path, encoding="utf-8") as handle:
        fields = handle.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(slots=True)
class ServerProcess:
    """The server child process: its pid and realtime URL, and which code it runs ("this
    tree", or "baseline" for `--baseline DIR`). With `--workers` the server is a parent
    process and its workers (`server.workers`); every figure adds up the whole process tree
    (`pids`)."""

    process: asyncio.subprocess.Process
    url: str
    label: str

    @property
    def pid(self) -> int:
        """The server's process id (the workers' parent with `--workers`)."""
        return self.process.pid

    def pids(self) -> list[int]:
        """The server process and its descendants (by the parent pid in /proc/PID/stat)."""
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError), open(f"/proc/{entry}/stat",
                                                        encoding="utf-8") as handle:
                    parents[int(entry)] = int(handle.read().rpartition(")")[2].split()[1])
        found, index = [self.pid], 0
        while index < len(found):
            found += [pid for pid, parent in parents.items() if parent == found[index]]
            index += 1
        return found

    def cpu_s(self) -> tuple[float, float]:
        """User + system CPU seconds the server used so far: (its processes, their main
        threads, which run the event loops), from /proc/PID/stat and /proc/PID/task/PID/stat."""
        pids = self.pids()
        return (sum(_stat_cpu_s(f"/proc/{pid}/stat") for pid in pids),
                sum(_stat_cpu_s(f"/proc/{pid}/task/{pid}/stat") for pid in pids))

    def rss_mib(self) -> float:
        """The server's resident memory, VmRSS of /proc/PID/status, in MiB."""
        return sum(int(proc_field(f"/proc/{pid}/status", "VmRSS").split()[0])
                   for pid in self.pids()) / 1024

    def threads(self) -> int:
        """The server's thread count (/proc/PID/status)."""
        return sum(int(proc_field(f"/proc/{pid}/status", "Threads")) for pid in self.pids())

    def fds(self) -> int:
        """The server's open file descriptors (sockets included)."""
        return sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in self.pids())


def profiled_server(spec_json: str) -> None:
    """Child role: run the server (`spec["argv"]`) with cProfile on its main thread, timed by
    that thread's CPU time (`time.thread_time`: time the thread waited for a core on a busy
    machine is not charged to the function it was in), and write `spec["profile"]` when it
    stops."""
    from server.__main__ import main as server_main

    spec = json.loads(spec_json)
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    try:
        server_main(spec["argv"])
    finally:
        profiler.disable()
        profiler.dump_stats(spec["profile"])


@contextlib.asynccontextmanager
async def server_process(profile: str | None, max_sessions: int, label: str = "this tree",
                         root: str = str(PROJECT_ROOT), workers: int = 1) -> Any:
    """Start the server of the checkout `root` (its `server` package: `python -m server` runs
    with `cwd=root`) with `--max-sessions max_sessions` (under cProfile when `profile` is
    given: `profiled_server`) and yield a `ServerProcess` once it listens; SIGTERM it
    afterwards (it stops gracefully, so a profile is written), SIGKILL after 30 s."""
    argv = [*SERVER_FLAGS, "--max-sessions", str(max_sessions)]
    if workers > 1:
        argv += ["--workers", str(workers)]
    command = ((*CHILD, "--role", "server", "--spec", json.dumps({"profile": profile,
                                                                  "argv": argv}))
               if profile else (sys.executable, "-m", "server", *argv))
    process = await asyncio.create_subprocess_exec(
        *command, cwd=root, stdout=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    try:
        async with asyncio.timeout(120):
            line = (await process.stdout.readline()).decode()
        match = re.search(r"http://([\d.]+):(\d+)", line)
        if match is None:
            raise RuntimeError(f"the server did not start: {line!r}")
        yield ServerProcess(process, f"ws://{match[1]}:{match[2]}/v1/realtime", label)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(30):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


# ---------------------------------------------------------------------------------- measurements


def _split(total: int, parts: int) -> list[int]:
    """`total` as `parts` near-equal positive counts (fewer parts when total is smaller)."""
    parts = max(1, min(parts, total))
    return [total // parts + (index < total % parts) for index in range(parts)]


def _in_window(samples: list[list[float]], window: tuple[float, float]) -> list[float]:
    """The values (second item) of the [time, value, ...] samples whose time is in `window`."""
    return [sample[1] for sample in samples if window[0] <= sample[0] < window[1]]


def _client_cpu_s(lag: list[list[float]], window: tuple[float, float]) -> float:
    """CPU s one client process used in `window`, from its loop probe's samples."""
    inside = [sample for sample in lag if window[0] <= sample[0] < window[1]]
    return inside[-1][2] - inside[0][2] if len(inside) > 1 else 0.0


async def load_step(server: ServerProcess, sessions: int, args: argparse.Namespace,
                    first: int) -> dict[str, Any]:
    """One load step: `sessions` sessions over the client processes; once all have audio,
    `args.warmup_s` pass, then the `args.window_s` window is measured (server CPU and RSS here,
    samples in the clients). Returns the window's figures."""
    counts = _split(sessions, args.client_processes)
    all_ready = asyncio.Event()
    ready = 0
    figures: dict[str, Any] = {}

    async def measure() -> None:
        await all_ready.wait()
        await asyncio.sleep(args.warmup_s)
        machine, cpu, start = cpu_snapshot(), server.cpu_s(), time.perf_counter()
        await asyncio.sleep(args.window_s)
        end = time.perf_counter()
        (process, loop), (process_0, loop_0) = server.cpu_s(), cpu
        figures.update(window=(start, end), server_cpu=process - process_0,
                       loop_cpu=loop - loop_0, machine_busy=cpu_snapshot()[0] - machine[0],
                       rss=server.rss_mib())

    measurement = asyncio.create_task(measure())

    async def during() -> None:
        nonlocal ready
        ready += 1
        if ready == len(counts):
            all_ready.set()
        await asyncio.shield(measurement)

    offsets = [sum(counts[:index]) for index in range(len(counts))]
    results = await asyncio.gather(*(
        run_clients({"mode": "load", "url": server.url, "sessions": count, "seed": args.seed,
                     "first": first + offset}, during, child=CHILD)
        for count, offset in zip(counts, offsets, strict=True)))
    window = figures["window"]
    wall = window[1] - window[0]
    client_cpu = sum(_client_cpu_s(result["lag"], window) for result in results)
    merged = {key: [s for result in results for s in result[key]]
              for key in ("ack", "barge", "ttfa", "lateness", "lag")}
    other = max(0.0, figures["machine_busy"] - figures["server_cpu"] - client_cpu) / wall
    return {
        "sessions": sessions, "wall": wall,
        **{key: _in_window(samples, window) for key, samples in merged.items()},
        "server_pct": 100 * figures["server_cpu"] / wall,
        "loop_pct": 100 * figures["loop_cpu"] / wall,
        "clients_pct": 100 * client_cpu / wall, "other_cores": other,
        "rss": figures["rss"],
        "errors": [error for result in results for error in result["errors"]],
        "failures": [failure for result in results for failure in result["failures"]],
    }


async def measure_load(servers: list[ServerProcess], args: argparse.Namespace) -> None:
    """Tables 1a and 1b: the load steps on each server (the same sessions and seeds; with two
    servers, which goes first alternates from step to step), then the largest passing step
    of each."""
    rows, resources = [], []
    best = dict.fromkeys((server.label for server in servers), 0)
    first = 0
    for index, sessions in enumerate(args.steps):
        for server in servers if index % 2 == 0 else servers[::-1]:
            row, resource = await _step_rows(server, sessions, args, first, best)
            rows.append(row)
            resources.append(resource)
        first += sessions
    print_table(
        f"1a. Event latency under load (client side, {args.window_s:.0f} s window opening "
        f"{args.warmup_s:.0f} s after every session had audio): ack = playback.ack sent -> "
        "its playback.acknowledged received; barge = barge_in sent -> its "
        "conversation.item.truncated received; late = audio delta arrival - its real-time due "
        f"time (playback clock = first audio + {PLAYBACK_JITTER_MS} ms), 0 when early",
        ["server", "sessions", "acks", "ack p50 ms", "ack p99 ms", "ack max ms", "barges",
         "barge p50 ms", "barge p99 ms", "deltas", "late deltas", "late p99 ms",
         "late max ms", "ttfa p50 ms", "ttfa p99 ms", "errors", "target", "PASS/FAIL"], rows)
    print_table(
        "1b. Resources in the same windows: server % of one core (/proc/PID/stat; loop = its "
        "main thread, the event loop; the rest is TTS worker threads), client processes' % "
        "(time.process_time), client loop lag p99 (a 10 ms sleep woke this much later: "
        "client-side delay inside the latencies), other processes' cores, server VmRSS; "
        "us/event = CPU time in the window over the events timed in it (ACKs answered and "
        "audio deltas received: an ACK in and its answer out, or an audio delta out), for "
        "the server's process, its loop and the clients: a per-event cost, which a busy "
        "machine distorts less than %",
        ["server", "sessions", "wall s", "server %", "loop %", "loop %/session", "clients %",
         "server us/event", "loop us/event", "clients us/event", "client lag p99 ms",
         "other cores", "server RSS MiB"], resources)
    print()
    for label, sessions in best.items():
        print(f"most sessions with every p99 <= {LATENCY_P99_MS:.0f} ms and no error"
              f"{f' ({label})' if len(servers) > 1 else ''}: {sessions or 'none'} "
              f"(of steps {', '.join(map(str, args.steps))})")


async def _step_rows(server: ServerProcess, sessions: int, args: argparse.Namespace, first: int,
                     best: dict[str, int]) -> tuple[list[object], list[object]]:
    """One load step on `server`: its rows of tables 1a and 1b; `best[server.label]` is
    raised to `sessions` when the step passes."""
    step = await load_step(server, sessions, args, first)
    p99 = {key: percentile(step[key], 99) for key in ("ack", "barge", "lateness")}
    ok = (all(value <= LATENCY_P99_MS for value in p99.values())
          and not step["errors"] and not step["failures"])
    if ok:
        best[server.label] = max(best[server.label], sessions)
    for failure in sorted(set(step["failures"]))[:3]:
        print(f"  {server.label}, {sessions} sessions: a session failed: {failure}",
              file=sys.stderr)
    if step["errors"]:
        codes = {code: step["errors"].count(code) for code in sorted(set(step["errors"]))}
        print(f"  {server.label}, {sessions} sessions: error events by code: {codes}",
              file=sys.stderr)
    return ([
            server.label, sessions, len(step["ack"]), percentile(step["ack"], 50), p99["ack"],
            max(step["ack"], default=float("nan")), len(step["barge"]),
            percentile(step["barge"], 50), p99["barge"], len(step["lateness"]),
            sum(value > 0 for value in step["lateness"]), p99["lateness"],
            max(step["lateness"], default=float("nan")), percentile(step["ttfa"], 50),
            percentile(step["ttfa"], 99), len(step["errors"]) + len(step["failures"]),
            f"p99<={LATENCY_P99_MS:.0f}", verdict(ok)],
            [server.label, sessions, step["wall"], step["server_pct"], step["loop_pct"],
             step["loop_pct"] / sessions, step["clients_pct"],
             *(step[key] * step["wall"] * 1e4 / max(1, len(step["ack"]) + len(step["lateness"]))
               for key in ("server_pct", "loop_pct", "clients_pct")),
             percentile(step["lag"], 99), step["other_cores"], step["rss"]])


async def measure_rss(server: ServerProcess, args: argparse.Namespace) -> None:
    """Table 2: server VmRSS after warm-up cycles and through `args.cycles` more cycles."""
    rows: list[list[object]] = [["server started, no session yet", server.rss_mib(), "",
                                 server.fds(), server.threads(), 0, "info", "-"]]
    done = 0
    failures: list[str] = []
    base = 0.0
    checkpoints = [args.warmup_cycles]
    checkpoints += [args.warmup_cycles + args.cycles * part // 4 for part in range(1, 5)]
    for checkpoint in checkpoints:
        result = await run_clients({"mode": "cycles", "url": server.url, "first": done,
                                    "count": checkpoint - done, "seed": args.seed,
                                    "concurrency": args.cycle_concurrency}, child=CHILD)
        failures += result["failures"]
        done = checkpoint
        await asyncio.sleep(SETTLE_S)
        rss = server.rss_mib()
        if checkpoint == args.warmup_cycles:
            base = rss
            label = f"after {checkpoint} warm-up cycles (start)"
        else:
            label = f"+ {checkpoint - args.warmup_cycles} cycles"
        growth = 100 * (rss - base) / base
        final = checkpoint == checkpoints[-1]
        rows.append([label, rss, growth, server.fds(), server.threads(), len(failures),
                     f"<={RSS_GROWTH_PCT:.0f} %" if final else "info",
                     verdict(growth <= RSS_GROWTH_PCT and not failures) if final else "-"])
    print_table(
        f"2. Server VmRSS (/proc/PID/status) over connect/disconnect cycles, "
        f"{args.cycle_concurrency} at a time, kinds in turn: {', '.join(CYCLE_KINDS)} "
        f"(read {SETTLE_S:.0f} s after each batch)",
        ["stage", "VmRSS MiB", "vs start %", "open fds", "threads", "failed cycles", "target",
         "PASS/FAIL"], rows)
    for failure in sorted(set(failures))[:3]:
        print(f"  a cycle failed: {failure}", file=sys.stderr)


def print_profile(path: str, top: int = 25) -> None:
    """The server's `top` functions by own time, from its cProfile output (main thread)."""
    stats = pstats.Stats(path)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_calls, ncalls, own, cumulative, _callers) in sorted(
            stats.stats.items(), key=lambda item: -item[1][2])[:top]:  # type: ignore[attr-defined]
        if filename.startswith("/"):
            filename = os.path.relpath(filename, PROJECT_ROOT)
        rows.append([f"{name} ({filename}:{line})", ncalls, own, 100 * own / total, cumulative])
    print_table(f"3. Server profile (cProfile, event-loop thread's CPU time, {total:.1f} s in "
                f"all): top {top} by own time",
                ["function", "calls", "own s", "own %", "cumulative s"], rows)


async def bench(args: argparse.Namespace) -> None:
    """Memory cycles (table 2) first, then the load steps (1a, 1b), one server process."""
    started = time.perf_counter()
    print_run_header()
    max_sessions = max([*args.steps, args.cycle_concurrency])
    async with contextlib.AsyncExitStack() as stack:
        servers = []
        if args.baseline:
            servers.append(await stack.enter_async_context(
                server_process(None, max_sessions, "baseline", args.baseline)))
        server = await stack.enter_async_context(
            server_process(args.profile, max_sessions, workers=args.workers))
        servers.append(server)
        for each in servers:
            workers = f" --workers {args.workers}" if each is server and args.workers > 1 else ""
            print(f"server ({each.label}): pid {each.pid}, {each.url}, flags "
                  f"{' '.join(SERVER_FLAGS)} --max-sessions {max_sessions}{workers}",
                  flush=True)
        if args.cycles:
            await measure_rss(server, args)
        if args.steps:
            await measure_load(servers, args)
    if args.profile:
        print_profile(args.profile)
    print(f"\ntotal wall time: {time.perf_counter() - started:.0f} s")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("main", "client", "server"), default="main",
                        help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=lambda text: [int(n) for n in text.split(",") if n],
                        default=[25, 50, 100, 200, 300],
                        help="session counts to step through, comma-separated ('' for none)")
    parser.add_argument("--warmup-s", type=float, default=3.0,
                        help="time after every session had audio before the window (s)")
    parser.add_argument("--window-s", type=float, default=10.0, help="measured window (s)")
    parser.add_argument("--client-processes", type=int, default=2,
                        help="client processes sharing the sessions")
    parser.add_argument("--cycles", type=int, default=1000,
                        help="connect/disconnect cycles for the memory check (0: skip it)")
    parser.add_argument("--warmup-cycles", type=int, default=1000,
                        help="cycles before the memory baseline (the heap grows to its working "
                             "size over the first few hundred)")
    parser.add_argument("--cycle-concurrency", type=int, default=20,
                        help="cycles at a time")
    parser.add_argument("--seed", type=int, default=7, help="random seed (questions, barge-ins)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="a checkout of the project (e.g. `git worktree add /tmp/base main`) "
                             "whose server runs each load step too, beside this tree's, for a "
                             "before/after comparison under the same machine load")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes of this tree's server (its --workers; the "
                             "baseline's server runs one); CPU, RSS, threads and fds add up "
                             "all of them")
    parser.add_argument("--profile", metavar="PATH",
                        help="run the server under cProfile, write PATH and print its top "
                             "functions (slows the server down: diagnosis only)")
    args = parser.parse_args(argv)
    if args.role == "client":
        client_main(args.spec)
    elif args.role == "server":
        profiled_server(args.spec)
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
