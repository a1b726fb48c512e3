"""The server child process of `bench_load`: starting it, and reading its CPU, memory, threads
and open files from /proc (its worker processes included), optionally under cProfile.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.load_clients import CHILD
from benchmarks.measuring import HOST, PROJECT_ROOT, proc_field

SERVER_FLAGS = ("--tts", "uniform", "--calibration", "marks", "--host", HOST, "--port", "0",
                "--log-level", "warning")
"""The server's flags (`--max-sessions` and `--workers` are added per run)."""


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
