"""Echo detector CPU: what server VAD's echo gate costs per second of microphone audio.

The lag search (`server.listening.mic_timeline.LAG_RANGE_MS`) grows with the latencies it
covers; this measures its cost, side by side with another checkout (run this script in each).
Offline, one thread: the microphone of `tests/echo_microphone.py` (the Piper reply, its echo
`--lag-ms` late at `--gain-db` over a -70 dBFS pink floor, appended every 40 ms with the
playing position known to +-20 ms) fed to a `server.listening.echo.EchoDetector` that is asked
`is_echo` about the last 250 ms after every append from 1.3 s on (the worst case: server VAD
asks about a held candidate on every 32 ms window; the learning windows run as it asks).
`time.process_time()` per run; the table gives the min and median over `--runs` runs, in ms of
CPU per second of audio. No target: the cost is weighed against what the range buys
(benchmarks/README.md). About 30 s.

Run from the project root: `.venv/bin/python -m benchmarks.bench_echo_cpu`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.measuring import print_run_header
from server.listening.echo import EchoDetector
from server.listening.mic_timeline import LAG_RANGE_MS
from tests import speech_fixtures as fx
from tests.echo_microphone import APPEND_MS, microphone, playing_position, reference

JUDGED_FROM_MS = 1300
"""Microphone position (ms) from which every append asks `is_echo` (the reply starts at 1 s)."""
SPAN_MS = 250
"""Stretch asked about (ms), as server VAD's first question about a candidate."""


def cpu_seconds(mic: np.ndarray) -> float:
    """CPU time (s) of one `EchoDetector` fed `mic` (16 kHz) and asked after every append."""
    detector, recorded, rng = EchoDetector(), reference(), np.random.default_rng(1)
    step = fx.RATE_HZ * APPEND_MS // 1000
    started = time.process_time()
    for start in range(0, mic.size, step):
        end_ms = (start + step) * 1000 // fx.RATE_HZ
        detector.feed(mic[start:start + step], playing_position(end_ms, rng), recorded)
        if end_ms >= JUDGED_FROM_MS:
            detector.is_echo(end_ms - SPAN_MS, end_ms)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs (after one warm-up)")
    parser.add_argument("--lag-ms", type=float, default=400.0, help="the echo's lag (ms)")
    parser.add_argument("--gain-db", type=float, default=-20.0, help="the echo's gain (dB)")
    args = parser.parse_args()
    print_run_header()
    mic = microphone(args.lag_ms, args.gain_db)
    seconds = mic.size / fx.RATE_HZ
    cpu_seconds(mic)
    per_second = [cpu_seconds(mic) / seconds * 1000 for _ in range(args.runs)]
    print(f"lag range {LAG_RANGE_MS} ms, {seconds:.1f} s of audio, {args.runs} runs")
    print("echo detector CPU per second of audio (ms): "
          f"min {min(per_second):.1f}, median {float(np.median(per_second)):.1f}")


if __name__ == "__main__":
    main()
