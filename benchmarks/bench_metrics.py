"""Metrics benchmark: how long a `/metrics` scrape takes while 20 sessions are active, for
this branch and (with `--baseline DIR`) another checkout of the project side by side.

Starts each project's real server as a child process (`python -m server --tts uniform
--calibration marks --host 127.0.0.1 --port 0 --log-level warning`, run in that project's
directory; this branch's also with `--metrics-port 0`) and, in a second child process of this
script (`--role clients`), 20 sessions that ask for long topic replies, ACK them every 100 ms
as a real-time player would, barge in 1-4 s into each and ask again: every metric keeps
changing. Rounds alternate between the servers; each round scrapes one server with no session
open, then during the 20 sessions. One request every `--interval-s`, taking turns between:

- `/metrics` on the main port (the event loop answers it), a new connection per scrape with
  the standard library's `http.client` (websockets closes the connection after each answer);
- `/healthz` the same way: the loop's wait and the HTTP exchange without the exposition;
- `/metrics` on `--metrics-port` (a thread of its own), new connection, and on one kept-alive
  connection (as Prometheus scrapes);
- `/metrics` on the main port with a pooled `httpx.Client`, the client of earlier runs (its own
  Python overhead is part of that time).

A scrape is timed from before the connection (or the request, kept alive) to the end of the
body. The last rows time `ServerMetrics.exposition()` alone in a child process of each project
after 20 sessions' worth of events. Method and caveats: benchmarks/README.md ("Metrics
benchmark").

Run from the project root: `.venv/bin/python -m benchmarks.bench_metrics --baseline DIR`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from websockets.asyncio.client import connect

from benchmarks.measuring import PROJECT_ROOT, cpu_snapshot, percentile, print_run_header, verdict
from benchmarks.prompts import TOPIC_PROMPTS
from benchmarks.tables import print_table

CHILD = (sys.executable, "-m", "benchmarks.bench_metrics")
SERVER = (sys.executable, "-m", "server", "--tts", "uniform", "--calibration", "marks",
          "--host", "127.0.0.1", "--port", "0", "--log-level", "warning")
SCRAPE_P95_MS = 5.0
"""Issue 14's target for one scrape during 20 sessions."""
ACK_INTERVAL_S = 0.100
BARGE_AFTER_S = (1.0, 4.0)
"""A reply is interrupted at a uniformly random moment this long after its first audio."""
PLAYBACK_LAG_MS = 100
"""Simulated player: played = elapsed since first audio - 100 ms, clamped to audio received."""


# ---------------------------------------------------------------------------------- clients


async def _session(url: str, rng: random.Random, stop_at: float) -> int:
    """One session: topic prompt, real-time ACKs, barge-in, again until `stop_at`
    (`time.monotonic()`); returns the number of replies it interrupted."""
    barges = 0
    async with connect(url, max_size=None) as websocket:
        while time.monotonic() < stop_at:
            await websocket.send(json.dumps({"type": "conversation.item.create", "item": {
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": rng.choice(TOPIC_PROMPTS)}]}}))
            await websocket.send(json.dumps({"type": "response.create"}))
            response_id, received_ms, first_audio = None, 0, None
            barge_at = rng.uniform(*BARGE_AFTER_S)
            next_ack = 0.0
            while True:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(ACK_INTERVAL_S / 2):
                        event = json.loads(await websocket.recv())
                        if event["type"] == "response.created":
                            response_id = event["response"]["id"]
                        elif event["type"] == "response.output_audio.delta":
                            received_ms = event["audio_end_ms"]
                            first_audio = first_audio or time.monotonic()
                        elif event["type"] == "response.done":
                            break
                now = time.monotonic()
                if first_audio is None or response_id is None:
                    continue
                played = int(min(received_ms, (now - first_audio) * 1000 - PLAYBACK_LAG_MS))
                if now - first_audio >= barge_at:
                    await websocket.send(json.dumps({
                        "type": "barge_in", "response_id": response_id,
                        "audio_end_ms": max(0, played), "source": "vad"}))
                    barges += 1
                    barge_at = float("inf")
                elif now >= next_ack and played > 0:
                    await websocket.send(json.dumps({"type": "playback.ack",
                                                     "response_id": response_id,
                                                     "played_ms": played}))
                    next_ack = now + ACK_INTERVAL_S
    return barges


async def _clients(url: str, sessions: int, seconds: float, seed: int) -> int:
    stop_at = time.monotonic() + seconds
    rngs = [random.Random(seed + index) for index in range(sessions)]
    counts = await asyncio.gather(*(_session(url, rng, stop_at) for rng in rngs))
    return sum(counts)


def clients_main(url: str, sessions: int, seconds: float, seed: int) -> None:
    """`--role clients`: run the sessions, print the number of barge-ins."""
    print(asyncio.run(_clients(url, sessions, seconds, seed)), flush=True)


# ---------------------------------------------------------------------------------- scraping


@dataclass
class Target:
    """One project's running server: its name in the tables, root and URLs."""

    name: str
    root: Path
    process: subprocess.Popen[str]
    url: str
    metrics_url: str | None


@contextlib.contextmanager
def running_server(name: str, root: Path, metrics_port: bool) -> Iterator[Target]:
    """A server child process run in `root` (its own code); yields its URLs."""
    command = [*SERVER, "--metrics-port", "0"] if metrics_port else list(SERVER)
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        urls = re.findall(r"http://[^\s,)]+", line)
        if not urls:
            raise RuntimeError(f"the {name} server did not start: {line!r}")
        yield Target(name, root, process, urls[0], urls[1] if len(urls) > 1 else None)
    finally:
        process.terminate()
        process.wait(timeout=30)


def fresh_get(url: str) -> tuple[float, int]:
    """GET `url` on a new connection (`http.client`); (ms to the body's end, body bytes)."""
    parts = urlsplit(url)
    started = time.perf_counter()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.request("GET", parts.path)
        answer = connection.getresponse()
        body = answer.read()
    finally:
        connection.close()
    elapsed = (time.perf_counter() - started) * 1000
    if answer.status != 200:
        raise RuntimeError(f"{url}: HTTP {answer.status}")
    return elapsed, len(body)


class KeptAlive:
    """GETs of one URL on one kept-alive `http.client` connection."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.path = parts.path
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)

    def get(self) -> tuple[float, int]:
        """(ms from the request to the body's end, body bytes)."""
        started = time.perf_counter()
        self.connection.request("GET", self.path)
        answer = self.connection.getresponse()
        body = answer.read()
        elapsed = (time.perf_counter() - started) * 1000
        if answer.status != 200:
            raise RuntimeError(f"{self.path}: HTTP {answer.status}")
        return elapsed, len(body)


@dataclass
class Series:
    """The times of one kind of request to one server in one condition."""

    times: list[float] = field(default_factory=list)
    size: int = 0


def scrape(target: Target, seconds: float, interval_s: float,
           results: dict[str, Series]) -> None:
    """Take turns between the request kinds for `seconds`, one every `interval_s`."""
    kinds: list[tuple[str, Callable[[], tuple[float, int]]]] = [
        ("/metrics, main port, new conn.", lambda: fresh_get(f"{target.url}/metrics")),
        ("/healthz, main port, new conn.", lambda: fresh_get(f"{target.url}/healthz")),
    ]
    with contextlib.ExitStack() as stack:
        if target.metrics_url is not None:
            metrics_url = f"{target.metrics_url}/metrics"
            kept = KeptAlive(metrics_url)
            stack.callback(kept.connection.close)
            kinds += [("/metrics, metrics port, new conn.", lambda: fresh_get(metrics_url)),
                      ("/metrics, metrics port, kept alive", kept.get)]
        pooled = stack.enter_context(httpx.Client())

        def with_httpx() -> tuple[float, int]:
            started = time.perf_counter()
            answer = pooled.get(f"{target.url}/metrics")
            elapsed = (time.perf_counter() - started) * 1000
            answer.raise_for_status()
            return elapsed, len(answer.content)

        kinds.append(("/metrics, main port, httpx pool", with_httpx))
        for _, get in kinds:
            get()
        stop_at = time.monotonic() + seconds
        turn = 0
        while time.monotonic() < stop_at:
            name, get = kinds[turn % len(kinds)]
            elapsed, size = get()
            series = results.setdefault(name, Series())
            series.times.append(elapsed)
            series.size = size
            turn += 1
            time.sleep(interval_s)


def exposition_main(count: int, sessions: int) -> None:
    """`--role exposition`: time `ServerMetrics.exposition` in this process after `sessions`
    sessions' worth of events (each label value used, histograms filled); print one JSON
    object {"times_ms": [...], "bytes": n}. Imports the project of the working directory."""
    from server.metrics import ServerMetrics
    from server.realtime import protocol

    metrics = ServerMetrics()
    rng = random.Random(1)
    for _ in range(sessions):
        observer = metrics.session()
        metrics.sessions.inc()
        for index in range(50):
            rid, iid = f"resp_{index}", f"item_{index}"
            observer.server_event({"type": "response.created", "response": {"id": rid}})
            observer.server_event({"type": "response.output_audio.delta", "response_id": rid})
            observer.client_event(protocol.BargeIn(None, rid, None, 100, "vad"))
            observer.server_event({"type": "conversation.item.heard", "item_id": iid,
                                   "response_id": rid, "method": "marks",
                                   "elapsed_ms": rng.uniform(0.5, 5), "interrupted": True})
            observer.server_event({"type": "response.done",
                                   "response": {"id": rid, "status": "cancelled"}})
            metrics.observe_tts("uniform", rng.uniform(0.001, 0.01), 1.0)
            metrics.observe_first_token(rng.uniform(0.001, 0.01), "demo")
    body = metrics.exposition()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        body = metrics.exposition()
        times.append((time.perf_counter() - started) * 1000)
    print(json.dumps({"times_ms": times, "bytes": len(body)}), flush=True)


def exposition_times(root: Path, count: int, sessions: int) -> Series:
    """`exposition_main` run in a child process with `root`'s code."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--role", "exposition", "--count",
         str(count), "--sessions", str(sessions)], cwd=root, check=True, capture_output=True,
        text=True, env={**os.environ, "PYTHONPATH": str(root)}).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return Series(result["times_ms"], result["bytes"])


def busy_cores(before: tuple[float, float, float]) -> float:
    """Cores the whole machine kept busy since `before` (a `cpu_snapshot()`), every process
    included (these servers and clients too)."""
    busy, _, wall = cpu_snapshot()
    return (busy - before[0]) / (wall - before[2])


def bench(args: argparse.Namespace) -> None:
    print_run_header()
    roots = [("this branch", PROJECT_ROOT, True)]
    if args.baseline:
        roots.insert(0, ("baseline", Path(args.baseline).resolve(), False))
    results: dict[tuple[str, str], dict[str, Series]] = {}
    windows: list[list[Any]] = []
    barges = []
    with contextlib.ExitStack() as stack:
        targets = [stack.enter_context(running_server(*root)) for root in roots]
        for round_index in range(args.rounds):
            order = targets if round_index % 2 == 0 else targets[::-1]
            for target in order:
                before = cpu_snapshot()
                scrape(target, args.idle_seconds, args.interval_s,
                       results.setdefault((target.name, "idle, 0 sessions"), {}))
                windows.append([target.name, round_index + 1, "idle, 0 sessions",
                                busy_cores(before)])
                clients = subprocess.Popen(
                    [*CHILD, "--role", "clients", "--url",
                     target.url.replace("http", "ws") + "/v1/realtime",
                     "--sessions", str(args.sessions), "--seconds",
                     str(args.seconds + args.warm_s), "--seed", str(args.seed + round_index)],
                    cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True)
                time.sleep(args.warm_s)
                condition = f"{args.sessions} active sessions"
                before = cpu_snapshot()
                scrape(target, args.seconds, args.interval_s,
                       results.setdefault((target.name, condition), {}))
                windows.append([target.name, round_index + 1, condition, busy_cores(before)])
                out, _ = clients.communicate(timeout=args.seconds + 120)
                barges.append(out.strip().splitlines()[-1] if out.strip() else "?")
    rows = []
    for (server, condition), kinds in results.items():
        for kind, series in kinds.items():
            rows.append(row(server, condition, kind, series, kind.startswith("/metrics")))
    for name, root, _ in roots:
        rows.append(row(name, "in-process", "exposition() alone",
                        exposition_times(root, args.count, args.sessions), True))
    print_table(f"/metrics scrape time (ms; target p95 <= {SCRAPE_P95_MS:g} ms during "
                f"{args.sessions} sessions; barge-ins per sessions window: "
                f"{', '.join(barges)})",
                ["server", "condition", "request", "n", "bytes", "p50", "p95", "p99", "max",
                 "p95 target"], rows)
    print_table("Machine load during each window (cores busy, all processes, these servers "
                "and clients included)", ["server", "round", "condition", "busy cores"],
                windows)


def row(server: str, condition: str, kind: str, series: Series, judged: bool) -> list[Any]:
    """One table row; the verdict only for `/metrics` rows."""
    times = series.times
    p95 = percentile(times, 95)
    return [server, condition, kind, len(times), series.size, percentile(times, 50), p95,
            percentile(times, 99), max(times), verdict(p95 <= SCRAPE_P95_MS) if judged else ""]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("bench", "clients", "exposition"), default="bench")
    parser.add_argument("--url", help="(clients) the server's /v1/realtime URL")
    parser.add_argument("--baseline", help="another checkout of the project (e.g. a git "
                        "worktree of main) measured side by side with this one")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds; each measures every server idle, then with sessions")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="scrape window during the sessions, per round (s)")
    parser.add_argument("--idle-seconds", type=float, default=3.0,
                        help="scrape window before any session, per round (s)")
    parser.add_argument("--warm-s", type=float, default=3.0,
                        help="time the sessions run before the scrape window opens (s)")
    parser.add_argument("--interval-s", type=float, default=0.05, help="between two requests")
    parser.add_argument("--count", type=int, default=500, help="in-process exposition() calls")
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args(argv)
    if args.role == "clients":
        clients_main(args.url, args.sessions, args.seconds, args.seed)
    elif args.role == "exposition":
        exposition_main(args.count, args.sessions)
    else:
        bench(args)


if __name__ == "__main__":
    main()
