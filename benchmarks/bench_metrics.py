"""Metrics benchmark: how long a `/metrics` scrape takes while 20 sessions are active.

Starts the real server as a child process (`python -m server --tts uniform --calibration marks
--host 127.0.0.1 --port 0 --log-level warning`) and, in a second child process of this script
(`--role clients`), 20 sessions that ask for long topic replies, ACK them every 100 ms as a
real-time player would, barge in 1-4 s into each and ask again: every metric keeps changing.
This process scrapes `/metrics` over loopback with a blocking `httpx` client at a fixed rate,
first with no session open, then during the 20 sessions, and times `ServerMetrics.exposition`
alone in this process after the same kind of traffic. Method and caveats: benchmarks/README.md
("Metrics benchmark").

Run from the project root: `.venv/bin/python -m benchmarks.bench_metrics`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
from websockets.asyncio.client import connect

from benchmarks.bench_server import (
    HOST,
    PROJECT_ROOT,
    TOPIC_PROMPTS,
    cpu_snapshot,
    other_load,
    percentile,
    print_run_header,
    verdict,
)
from benchmarks.tables import print_table
from server.metrics import ServerMetrics
from server.realtime import protocol

CHILD = (sys.executable, "-m", "benchmarks.bench_metrics")
SERVER = (sys.executable, "-m", "server", "--tts", "uniform", "--calibration", "marks",
          "--host", HOST, "--port", "0", "--log-level", "warning")
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


@contextlib.contextmanager
def running_server() -> Iterator[str]:
    """The server child process; yields its http:// URL."""
    process = subprocess.Popen(SERVER, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"http://\S+", line)
        if match is None:
            raise RuntimeError(f"the server did not start: {line!r}")
        yield match.group(0)
    finally:
        process.terminate()
        process.wait(timeout=30)


def scrape_times(url: str, seconds: float, interval_s: float) -> tuple[list[float], int]:
    """Scrape `url`/metrics every `interval_s` for `seconds`; (round trips in ms, last body's
    size in bytes)."""
    times, size = [], 0
    with httpx.Client() as http:
        http.get(f"{url}/metrics")
        stop_at = time.monotonic() + seconds
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            answer = http.get(f"{url}/metrics")
            times.append((time.perf_counter() - started) * 1000)
            answer.raise_for_status()
            size = len(answer.content)
            time.sleep(interval_s)
    return times, size


def exposition_times(count: int, sessions: int) -> tuple[list[float], int]:
    """Time `ServerMetrics.exposition` in this process after `sessions` sessions' worth of
    events (each label value used, histograms filled); (ms per call, bytes)."""
    metrics = ServerMetrics()
    rng = random.Random(1)
    for _ in range(sessions):
        observer = metrics.session()
        metrics.sessions.inc()
        for index in range(50):
            rid, iid = f"resp_{index}", f"item_{index}"
            observer.server_event({"type": "response.created", "response": {"id": rid}})
            observer.server_event({"type": "response.output_audio.delta", "response_id": rid})
            observer.client_event("{}", protocol.BargeIn(None, rid, None, 100, "vad"))
            observer.server_event({"type": "conversation.item.heard", "item_id": iid,
                                   "response_id": rid, "method": "marks",
                                   "elapsed_ms": rng.uniform(0.5, 5), "interrupted": True})
            observer.server_event({"type": "response.done",
                                   "response": {"id": rid, "status": "cancelled"}})
            metrics.observe_tts("uniform", rng.uniform(0.001, 0.01), 1.0)
            metrics.observe_first_token(rng.uniform(0.001, 0.01), "demo")
    metrics.exposition()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        body = metrics.exposition()
        times.append((time.perf_counter() - started) * 1000)
    return times, len(body)


def row(name: str, times: Sequence[float], size: int, other: str) -> list[Any]:
    p95 = percentile(times, 95)
    return [name, len(times), size, percentile(times, 50), p95, percentile(times, 99),
            max(times), other, verdict(p95 <= SCRAPE_P95_MS)]


def bench(args: argparse.Namespace) -> None:
    print_run_header()
    rows = []
    with running_server() as url:
        before = cpu_snapshot()
        times, size = scrape_times(url, args.idle_seconds, args.interval_s)
        rows.append(row("idle server, 0 sessions", times, size, other_load(before)))
        clients = subprocess.Popen(
            [*CHILD, "--role", "clients", "--url", url.replace("http", "ws") + "/v1/realtime",
             "--sessions", str(args.sessions), "--seconds", str(args.seconds + args.warm_s),
             "--seed", str(args.seed)], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True)
        time.sleep(args.warm_s)
        before = cpu_snapshot()
        times, size = scrape_times(url, args.seconds, args.interval_s)
        rows.append(row(f"{args.sessions} active sessions", times, size, other_load(before)))
        out, _ = clients.communicate(timeout=args.seconds + 120)
        barges = out.strip().splitlines()[-1] if out.strip() else "?"
    before = cpu_snapshot()
    times, size = exposition_times(args.count, args.sessions)
    rows.append(row("exposition() alone, in-process", times, size, other_load(before)))
    print_table(f"/metrics scrape time (ms; target p95 <= {SCRAPE_P95_MS:g} ms; the clients "
                f"barged in {barges} times)",
                ["run", "scrapes", "bytes", "p50", "p95", "p99", "max", "other load", "p95"],
                rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("bench", "clients"), default="bench")
    parser.add_argument("--url", help="(clients) the server's /v1/realtime URL")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0,
                        help="scrape window during the sessions (s)")
    parser.add_argument("--idle-seconds", type=float, default=5.0,
                        help="scrape window before any session (s)")
    parser.add_argument("--warm-s", type=float, default=3.0,
                        help="time the sessions run before the scrape window opens (s)")
    parser.add_argument("--interval-s", type=float, default=0.05, help="between two scrapes")
    parser.add_argument("--count", type=int, default=500, help="in-process exposition() calls")
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args(argv)
    if args.role == "clients":
        clients_main(args.url, args.sessions, args.seconds, args.seed)
    else:
        bench(args)


if __name__ == "__main__":
    main()
