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
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.measuring import cpu_snapshot, other_load, percentile, print_run_header, verdict
from benchmarks.prompts import PAUSE_S, TYPING_S
from benchmarks.server_clients import BARGE_WINDOW_S, CHILD, client_main
from benchmarks.server_probes import ProbedServer, ResponseProbe
from benchmarks.server_resources import measure_cpu, measure_rss, rss_main
from benchmarks.session_client import run_clients, serving
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services
from server.realtime.session import SessionConfig
from server.services import Services

TTFA_P50_MS = 200.0
TTFA_P95_MS = 350.0
"""Warm first audio, default config, quiet machine (issue 12): p50 / p95 targets (ms), also
for a prompt 0.25 s after a barge-in."""
STOP_P99_MS = 5.0
FRAME_MS = 100
"""Audio per `response.output_audio.delta` (server.realtime.session.SessionConfig.frame_ms)."""

BARGE_SESSIONS = 5
BARGES_PER_SESSION = 6


async def measure_ttfa(runs: dict[str, tuple[Services, float]]) -> None:
    """Table 1: time from `response.create` sent to the first audio delta received (warm);
    `runs`: label -> (services, seconds between a stopped reply and the next prompt)."""
    rows = []
    load = cpu_snapshot()
    for label, (services, think_s) in runs.items():
        async with serving(DemoServer(services)) as url:
            result = await run_clients(CHILD, {"mode": "ttfa", "url": url, "think_s": think_s})
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
            result = await run_clients(CHILD, {"mode": "barge", "url": url, "seed": seed,
                                               "sessions": BARGE_SESSIONS,
                                               "barges": BARGES_PER_SESSION})
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
