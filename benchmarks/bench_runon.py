"""Run-on replies: first audio and server memory of a 600-word unpunctuated `say:` (issue 12).

Starts the server as a child process (`python -m server --tts piper --deterministic` on a free
port, so its RSS is its own), then on one session:

1. Prompts, interleaved so that a changing machine load hits both kinds alike: NORMAL ones
   (`say:` with an ordinary sentence of the demo's kind, three texts in turn) and, every
   `--every`-th, a RUN-ON one (`say:` + 600 unpunctuated words); each is cancelled
   (`response.cancel`) at its first audio and the next is sent 1 s later. Time to first audio =
   `response.create` sent -> first `response.output_audio.delta` received.
2. One more run-on reply is left generating for `--hold-s` seconds (the server paces a client
   that sends no ACKs in real time) while the server's VmRSS is sampled every 100 ms.

Targets (issue 12): run-on first audio <= normal first-audio p95 + 100 ms; server RSS growth
while a run-on reply is spoken <= 100 MB. Timings on a shared machine are noisy: the table says
how busy the other processes kept the CPU. Run from the project root:
`.venv/bin/python -m benchmarks.bench_runon`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

import httpx
import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from benchmarks.tables import print_table

NORMAL = (
    "Tides are the slow rise and fall of the sea, and they are mostly the work of the Moon.",
    "Good bread needs only four things: flour, water, salt and yeast.",
    "The first marathon runner carried news of a victory from the battlefield to Athens.",
)
RUN_ON = " ".join(
    ["the", "river", "kept", "rising", "past", "old", "stone", "walls", "near", "town"] * 60
)
TARGET_FIRST_AUDIO_MARGIN_MS = 100.0
TARGET_RSS_GROWTH_MB = 100.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rss_mb(pid: int) -> float:
    """Resident set size of process `pid` in MB (VmRSS of /proc/PID/status)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def first_audio_ms(ws: ClientConnection, text: str) -> tuple[float, str]:
    """Send `say: text` and `response.create`; (ms to the first audio delta, response id)."""
    await ws.send(json.dumps({"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text",
                                                         "text": f"say: {text}"}]}}))
    started = time.perf_counter()
    await ws.send(json.dumps({"type": "response.create"}))
    while True:
        event = json.loads(await ws.recv())
        if event["type"] == "response.output_audio.delta":
            return (time.perf_counter() - started) * 1000, event["response_id"]


async def cancel(ws: ClientConnection, response_id: str) -> None:
    """Cancel the response and read events until its `response.done`."""
    await ws.send(json.dumps({"type": "response.cancel", "response_id": response_id}))
    while True:
        event = json.loads(await ws.recv())
        if event["type"] == "response.done" and event["response"]["id"] == response_id:
            return


async def drain(ws: ClientConnection, seconds: float, pid: int) -> float:
    """Read events for `seconds`, sampling the server's RSS every 100 ms; the peak RSS (MB)."""
    peak = rss_mb(pid)
    deadline = time.perf_counter() + seconds
    while (left := deadline - time.perf_counter()) > 0:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(left, 0.1)):
                await ws.recv()
        peak = max(peak, rss_mb(pid))
    return peak


async def measure(args: argparse.Namespace, port: int, pid: int) -> None:
    """Run both prompt kinds and print the tables."""
    normal: list[float] = []
    run_on: list[float] = []
    async with connect(f"ws://127.0.0.1:{port}/v1/realtime", max_size=None) as ws:
        for index in range(args.prompts):
            long = index % args.every == args.every - 1
            text = RUN_ON if long else NORMAL[index % len(NORMAL)]
            elapsed, response_id = await first_audio_ms(ws, text)
            (run_on if long else normal).append(elapsed)
            await cancel(ws, response_id)
            await drain(ws, 1.0, pid)
        before = rss_mb(pid)
        _, response_id = await first_audio_ms(ws, RUN_ON)
        peak = await drain(ws, args.hold_s, pid)
        await cancel(ws, response_id)
    p95 = float(np.percentile(normal, 95))
    rows = [[name, len(values), float(np.percentile(values, 50)),
             float(np.percentile(values, 95)), max(values)]
            for name, values in (("normal say: sentence", normal), ("600-word run-on", run_on))]
    print_table("1. Time to first audio (ms), one session, each reply cancelled at its first "
                "audio", ("prompt", "n", "p50", "p95", "max"), rows)
    print_table(f"2. Server RSS while a 600-word run-on is spoken ({args.hold_s:.0f} s, real-time "
                "pacing, no ACKs)", ("RSS before MB", "peak MB", "growth MB"),
                [[before, peak, peak - before]])
    long_p95 = float(np.percentile(run_on, 95))
    checks = [
        (f"run-on first audio p95 <= normal p95 + {TARGET_FIRST_AUDIO_MARGIN_MS:.0f} ms",
         f"{long_p95:.0f} vs {p95:.0f} + {TARGET_FIRST_AUDIO_MARGIN_MS:.0f}",
         long_p95 <= p95 + TARGET_FIRST_AUDIO_MARGIN_MS),
        (f"RSS growth <= {TARGET_RSS_GROWTH_MB:.0f} MB", f"{peak - before:.1f} MB",
         peak - before <= TARGET_RSS_GROWTH_MB),
    ]
    print_table("3. Targets", ("target", "measured", "verdict"),
                [[name, measured, "PASS" if ok else "FAIL"] for name, measured, ok in checks])


def main(argv: Sequence[str] | None = None) -> None:
    """Start the server, wait for /healthz, measure, stop the server."""
    parser = argparse.ArgumentParser(prog="bench_runon", description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=30, help="prompts timed (default 30)")
    parser.add_argument("--every", type=int, default=3,
                        help="every Nth prompt is a run-on (default 3)")
    parser.add_argument("--hold-s", type=float, default=30.0,
                        help="seconds the first run-on reply plays before it is cancelled")
    args = parser.parse_args(argv)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "server", "--tts", "piper", "--deterministic", "--port", str(port),
         "--log-level", "warning"], env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        deadline = time.perf_counter() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.perf_counter() > deadline or server.poll() is not None:
                raise RuntimeError("the server did not start")
            time.sleep(0.5)
        load = os.getloadavg()
        flags = " ".join(argv if argv is not None else sys.argv[1:])
        print(f"command: {sys.executable} -m benchmarks.bench_runon {flags}")
        print(f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} at start")
        asyncio.run(measure(args, port, server.pid))
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
