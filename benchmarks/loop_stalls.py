"""Event-loop stalls: which callbacks hold the server's event loop for milliseconds while the
metrics benchmark's sessions run (`bench_metrics --role clients`).

Runs the real server in this process (`--tts uniform --calibration marks`, as
`bench_metrics` does) with every event-loop callback timed: wall time, and the CPU time of
the loop's thread (`time.thread_time`; wall well above CPU means the thread was waiting for a
core or for the GIL, not working). A watchdog thread samples the loop thread's stack whenever
one callback has run longer than `--sample-after-ms`, naming the code that runs that long.
The timer replaces `asyncio.events.Handle._run` (CPython's pure-Python method every callback
goes through) for this process only. Tables: callbacks over `--threshold-ms` by task or
callback name, the loop's lag (a 5 ms sleep's overshoot), and the sampled stacks.

Run from the project root: `.venv/bin/python -m benchmarks.loop_stalls`.
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.events
import collections
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.measuring import PROJECT_ROOT, percentile, print_run_header
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import build_services, parse_config, server_options

LAG_PROBE_S = 0.005
"""The loop-lag probe sleeps this long and records how much later it woke up."""


class CallbackTimer:
    """Times every event-loop callback of this process (see the module docstring)."""

    def __init__(self, threshold_ms: float, sample_after_ms: float) -> None:
        self.threshold_s = threshold_ms / 1000
        self.sample_after_s = sample_after_ms / 1000
        self.long: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
        self.stacks: collections.Counter[str] = collections.Counter()
        self._started: float | None = None
        self._loop_thread = threading.get_ident()
        self._original = asyncio.events.Handle._run

    def install(self) -> None:
        """Time callbacks from now on and start the stack-sampling watchdog."""
        timer, original = self, self._original

        def timed_run(handle: asyncio.events.Handle) -> None:
            wall, cpu = time.perf_counter(), time.thread_time()
            timer._started = wall
            try:
                original(handle)
            finally:
                timer._started = None
                wall = time.perf_counter() - wall
                if wall > timer.threshold_s:
                    timer.long[_name(handle)].append((wall * 1000,
                                                      (time.thread_time() - cpu) * 1000))

        asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]
        threading.Thread(target=self._watch, name="stall-watchdog", daemon=True).start()

    def uninstall(self) -> None:
        """Stop timing."""
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]

    def _watch(self) -> None:
        while True:
            time.sleep(0.001)
            started = self._started
            if started is None or time.perf_counter() - started < self.sample_after_s:
                continue
            frame = sys._current_frames().get(self._loop_thread)
            if frame is not None:
                self.stacks[_project_frames(frame)] += 1


def _name(handle: asyncio.events.Handle) -> str:
    """A task's coroutine name, else the callback's qualified name."""
    callback = handle._callback  # type: ignore[attr-defined]
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        return task.get_coro().__qualname__  # type: ignore[union-attr]
    return getattr(callback, "__qualname__", type(callback).__name__)


def _project_frames(frame: Any) -> str:
    """The innermost frames of the project's own code (and the one it called), innermost
    first."""
    frames = traceback.extract_stack(frame)[::-1]
    root = str(PROJECT_ROOT)
    names, seen_project = [], False
    for entry in frames:
        ours = entry.filename.startswith(root)
        if ours or not seen_project:
            names.append(f"{Path(entry.filename).name}:{entry.name}")
        seen_project = seen_project or ours
        if len(names) == 4:
            break
    return " <- ".join(names)


async def run(args: argparse.Namespace, timer: CallbackTimer) -> list[float]:
    """Serve, run the clients child process against it, return the loop lags (ms)."""
    config = parse_config(["--tts", "uniform", "--calibration", "marks", "--host",
                           "127.0.0.1", "--port", "0", "--log-level", "warning"])
    services = await asyncio.to_thread(build_services, config)
    demo = DemoServer(services, config.allow_origin, server_options(config))
    await demo.start(config.host, 0)
    lags: list[float] = []

    async def probe() -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(LAG_PROBE_S)
            lags.append((time.perf_counter() - started - LAG_PROBE_S) * 1000)

    prober = asyncio.create_task(probe())
    timer.install()
    try:
        clients = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.bench_metrics", "--role", "clients", "--url",
            f"ws://127.0.0.1:{demo.port()}/v1/realtime", "--sessions", str(args.sessions),
            "--seconds", str(args.seconds), cwd=PROJECT_ROOT,
            stdout=asyncio.subprocess.DEVNULL)
        await clients.wait()
    finally:
        timer.uninstall()
        prober.cancel()
        await demo.shutdown()
    return lags


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--threshold-ms", type=float, default=1.0,
                        help="callbacks longer than this (wall) are listed")
    parser.add_argument("--sample-after-ms", type=float, default=3.0,
                        help="sample the stack of a callback running this long")
    args = parser.parse_args(argv)
    print_run_header()
    timer = CallbackTimer(args.threshold_ms, args.sample_after_ms)
    lags = asyncio.run(run(args, timer))
    rows = []
    for name, times in sorted(timer.long.items(), key=lambda kv: -sum(c for _, c in kv[1])):
        walls, cpus = [w for w, _ in times], [c for _, c in times]
        rows.append([name, len(times), percentile(walls, 50), max(walls), percentile(cpus, 50),
                     max(cpus), sum(1 for c in cpus if c > args.threshold_ms)])
    print_table(f"Event-loop callbacks over {args.threshold_ms:g} ms wall during "
                f"{args.sessions} sessions ({args.seconds:g} s; CPU = the loop thread's)",
                ["callback", "n", "wall p50", "wall max", "CPU p50", "CPU max",
                 f"n CPU > {args.threshold_ms:g} ms"], rows)
    print_table(f"Loop lag: how late a {LAG_PROBE_S * 1000:g} ms sleep woke up (ms)",
                ["probes", "p50", "p95", "p99", "max"],
                [[len(lags), percentile(lags, 50), percentile(lags, 95), percentile(lags, 99),
                  max(lags, default=float("nan"))]])
    print_table(f"Stacks of callbacks running over {args.sample_after_ms:g} ms (1 ms samples)",
                ["innermost frames", "samples"], timer.stacks.most_common(15))


if __name__ == "__main__":
    main()
