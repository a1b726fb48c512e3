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
import os
import pstats
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.load_clients import CHILD, CYCLE_KINDS, client_main
from benchmarks.load_server import SERVER_FLAGS, ServerProcess, profiled_server, server_process
from benchmarks.measuring import PROJECT_ROOT, cpu_snapshot, percentile, print_run_header, verdict
from benchmarks.session_client import PLAYBACK_JITTER_MS, run_clients
from benchmarks.tables import print_table

LATENCY_P99_MS = 20.0
RSS_GROWTH_PCT = 5.0
SETTLE_S = 2.0
"""Wait after the last cycle before reading the server's memory (its handlers finish)."""


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
        run_clients(CHILD, {"mode": "load", "url": server.url, "sessions": count,
                            "seed": args.seed, "first": first + offset}, during)
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
        result = await run_clients(CHILD, {"mode": "cycles", "url": server.url, "first": done,
                                           "count": checkpoint - done, "seed": args.seed,
                                           "concurrency": args.cycle_concurrency})
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
