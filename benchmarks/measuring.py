"""Measuring and reporting helpers shared by the benchmark scripts: percentiles, PASS/FAIL,
the machine's facts and load, and the command line of a run.

`print_run_header` starts every benchmark's report: the command that started it (as typed from
the project root) and the machine (cores, CPU, memory, load average, package versions).
`cpu_snapshot` + `other_load` say how many cores other processes used during a measurement
(the benchmarks share a 2-core machine; see benchmarks/README.md).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

HOST = "127.0.0.1"
PROJECT_ROOT = Path(__file__).resolve().parent.parent


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
