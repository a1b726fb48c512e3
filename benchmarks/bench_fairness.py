"""Fairness benchmark: a session's first audio and audio pacing while other sessions flood server
VAD with noise (issue 26).

Starts a real `server.app.DemoServer` with the default services (`--tts piper --calibration
auto`, `server.config.build_services`, the default input bound: twice real time over 5 s) in
this process on 127.0.0.1. A measuring session in this process (one clock for every timestamp)
prompts `say:` and topic prompts alternately (`bench_server` table 1's), takes each reply's
audio for `--audio-ms` without ACKs (OpenAI's semantics: the server paces in real time plus the
lead) and cancels it. Meanwhile, in blocks that alternate side by side in one run, either
nothing else runs (idle) or a child process (this module, `--role noise`) runs `--sessions`
sessions that turn on server VAD and append white noise at `--speed` times real time in 500 ms
appends, reconnecting whenever the server closes them (a throttled session is closed after
10 s, `server.input_work.THROTTLED_CLOSE_S`: each reconnect brings a fresh 10 s burst).
Measurement starts `SETTLE_S` after the noise does. Prints the command, the machine facts and:

1. **First audio** (`response.create` sent -> first audio delta received, ms): p50, p95, max
   per condition. Target: flooded p95 <= idle p95 + 50 ms.
2. **Audio deltas: gap beyond real time** (ms, `benchmarks.audio_arrival`): per reply, the
   longest a listener playing from the first delta (with no buffer of its own) waits for audio,
   the measure `bench_clients` uses; p50, p95 and max over the replies. Target: flooded max
   <= 20 ms. Beside it, for information, the longest inter-arrival gap: (arrival of a delta -
   arrival of the one before) - (the audio the one before carried), from the third delta on,
   which also counts unevenness the pacing lead covers (with Piper, the pacer waits for the
   next sentence part with the lead still buffered).

A diagnosis block repeats the flooded condition with the input path back on the event loop
and no bound (`--diagnosis`; the layout before issue 26).

Run from the project root: `.venv/bin/python -m benchmarks.bench_fairness` (about 6 minutes;
`--rounds`, `--prompts` make it shorter). The issue's failing input: `--tts uniform --sessions 1
--speed 0 --append-ms 16000` (one session, 16 s appends as fast as the socket takes them).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from benchmarks.audio_arrival import gap_beyond_real_time_ms, longest_inter_arrival_gap_ms
from benchmarks.measuring import (
    PROJECT_ROOT,
    cpu_snapshot,
    other_load,
    percentile,
    print_run_header,
    verdict,
)
from benchmarks.prompts import SAY_PROMPTS, TOPIC_PROMPTS
from benchmarks.session_client import BenchClient, serving
from benchmarks.tables import print_table
from server import input_work
from server.app import DemoServer
from server.config import ServerConfig, build_services
from server.services import Services

FIRST_AUDIO_SLACK_MS = 50.0
"""Target of table 1: flooded p95 <= idle p95 + this."""
GAP_TARGET_MS = 20.0
"""Target of table 2: the longest gap beyond real time while flooded."""
SETTLE_S = 3.0
"""Wait after the noise starts before measuring: the sessions' 10 s bursts are spent."""
INPUT_RATE_HZ = 24_000
APPEND_MS = 500
"""Default noise per append (ms): at 10x real time, 20 appends per second per session, so
that the noise child's own CPU (it shares the 2 cores) stays small."""
NOISE_NICE = 19
"""The noise child's nice value: its clients stand for other machines' (in a deployment their
CPU is not the server's), so on this machine they take only CPU the server leaves."""
LAG_TICK_S = 0.01
"""The event loop's lag is sampled by a task sleeping this long, over and over."""
SERVER_VAD = {"type": "server_vad", "create_response": False}


# ---------------------------------------------------------------------------------- noise child


async def _noisy_session(url: str, speed: float, append_ms: int, seed: int, vad: bool,
                         stop: asyncio.Event, counts: dict[str, int]) -> None:
    """One session flooding server VAD (`vad`; else turned off: the control) with noise at
    `speed` times real time (0: as fast as the socket takes it) in appends of `append_ms`;
    reconnects when closed, until `stop`."""
    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(max(1, 5000 // append_ms)):
        pcm = (rng.standard_normal(INPUT_RATE_HZ * append_ms // 1000) * 3000).astype("<i2")
        frames.append(json.dumps({"type": "input_audio_buffer.append",
                                  "audio": base64.b64encode(pcm.tobytes()).decode()}))
    interval_s = append_ms / 1000 / speed if speed else 0.0
    while not stop.is_set():
        try:
            async with connect(url, max_size=None, compression=None) as websocket:
                await websocket.recv()
                await websocket.send(json.dumps({"type": "session.update", "session": {
                    "audio": {"input": {"turn_detection": SERVER_VAD if vad else None}}}}))
                reader = asyncio.create_task(_discard(websocket))
                next_at = time.perf_counter()
                index = 0
                try:
                    while not stop.is_set():
                        await websocket.send(frames[index % len(frames)])
                        counts["appends"] += 1
                        index += 1
                        next_at += interval_s
                        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
                finally:
                    reader.cancel()
                    # drop what the socket buffers still hold: the server ends the session now
                    websocket.transport.abort()
        except Exception:  # closed by the server (1008), or refused: open another
            counts["closed"] += 1
            await asyncio.sleep(0.1)


async def _discard(websocket: Any) -> None:
    with contextlib.suppress(ConnectionClosed):
        async for _ in websocket:
            pass


async def noise_main(url: str, sessions: int, speed: float, append_ms: int,
                     nice: int, vad: bool) -> None:
    """The child: flood until a line on stdin, then print the counts as JSON; at `nice` (the
    flooding clients stand for other machines' clients: their own CPU is not the server's)."""
    os.nice(nice)
    stop = asyncio.Event()
    counts = {"appends": 0, "closed": 0}
    tasks = [asyncio.create_task(_noisy_session(url, speed, append_ms, seed, vad, stop,
                                                          counts))
             for seed in range(sessions)]
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps(counts), flush=True)


@contextlib.asynccontextmanager
async def noise(url: str, args: argparse.Namespace,
                vad: bool = True) -> AsyncIterator[dict[str, Any]]:
    """Run the noise child (`args.sessions`, `args.speed`, `args.append_ms`, server VAD on
    with `vad`) while the block runs; yields its counts (filled in at the end, with its CPU
    seconds meanwhile under "cpu_s")."""
    counts: dict[str, Any] = {}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.bench_fairness", "--role", "noise", "--url", url,
        "--sessions", str(args.sessions), "--speed", str(args.speed),
        "--append-ms", str(args.append_ms), "--noise-nice", str(args.noise_nice),
        "--noise-vad" if vad else "--no-noise-vad",
        cwd=PROJECT_ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    try:
        async with asyncio.timeout(60):
            line = await process.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"noise process did not get ready: {line!r}")
        await asyncio.sleep(SETTLE_S)
        cpu_before = process_cpu_s(process.pid)
        yield counts
        counts["cpu_s"] = process_cpu_s(process.pid) - cpu_before
    finally:
        process.stdin.write(b"stop\n")
        await process.stdin.drain()
        async with asyncio.timeout(60):
            output = await process.stdout.read()
        await process.wait()
        with contextlib.suppress(json.JSONDecodeError, IndexError):
            counts.update(json.loads(output.decode().strip().splitlines()[-1]))


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` used so far (/proc/PID/stat)."""
    return process_cpu_s_of(f"/proc/{pid}/stat")


def stage_cpu_s() -> dict[str, float]:
    """CPU seconds this process's threads used so far, by stage: "input" (the input workers),
    "loop" (the main thread: the event loop), "rest" (synthesis, ASR, onnxruntime's threads)."""
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    main_id = threading.main_thread().native_id
    stages = {"input": 0.0, "loop": 0.0, "rest": 0.0}
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            cpu = process_cpu_s_of(f"/proc/self/task/{task}/stat")
            name = names.get(int(task), "")
            stage = ("loop" if int(task) == main_id
                     else "input" if name.startswith("input") else "rest")
            stages[stage] += cpu
    return stages


def process_cpu_s_of(path: str) -> float:
    """CPU seconds of the /proc stat file `path` (a process's or a thread's)."""
    with open(path, encoding="utf-8") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------- measuring


class Probe(BenchClient):
    """The measuring session: first audio and delta arrivals per reply."""

    async def reply(self, text: str, audio_ms: int) -> tuple[float, float, float]:
        """Prompt `text`, take `audio_ms` of its audio, cancel it; returns (first audio ms,
        gap beyond real time ms, longest inter-arrival gap ms) (`benchmarks.audio_arrival`)."""
        response_id, sent_at = await self.prompt(text)
        track = self.tracks[response_id]
        async with asyncio.timeout(60):
            await track.first_audio.wait()
            while track.max_end_ms < audio_ms and not track.done.is_set():
                await asyncio.sleep(0.05)
            await self.send({"type": "response.cancel"})
            await track.done.wait()
        assert track.first_audio_at is not None
        return ((track.first_audio_at - sent_at) * 1000, gap_beyond_real_time_ms(track.deltas),
                longest_inter_arrival_gap_ms(track.deltas))


async def measure_block(probe: Probe, texts: list[str], audio_ms: int,
                        samples: dict[str, list[float]]) -> None:
    """Each of `texts` as a reply (`Probe.reply`) into samples["first"], ["gap"] and
    ["inter_arrival"], and
    meanwhile the event loop's lag (how late a `LAG_TICK_S` sleep wakes up, ms: the loop
    busy, or waiting for the GIL) into samples["lag"], and the block's wall time and CPU by
    stage (`stage_cpu_s`) into samples["wall_s"] and ["cpu_<stage>"]."""
    lagging = asyncio.create_task(_loop_lag(samples["lag"]))
    cpu_before, started = stage_cpu_s(), time.perf_counter()
    try:
        for text in texts:
            first_ms, gap_ms, inter_arrival_ms = await probe.reply(text, audio_ms)
            samples["first"].append(first_ms)
            samples["gap"].append(gap_ms)
            samples["inter_arrival"].append(inter_arrival_ms)
            await asyncio.sleep(0.5)
    finally:
        lagging.cancel()
    samples["wall_s"].append(time.perf_counter() - started)
    for stage, cpu in stage_cpu_s().items():
        samples[f"cpu_{stage}"].append(cpu - cpu_before[stage])


async def _loop_lag(lags: list[float]) -> None:
    while True:
        before = time.perf_counter()
        await asyncio.sleep(LAG_TICK_S)
        lags.append((time.perf_counter() - before - LAG_TICK_S) * 1000)


async def run(services: Services, args: argparse.Namespace) -> None:
    """Tables 1 and 2."""
    load = cpu_snapshot()
    texts = [text for pair in zip(SAY_PROMPTS, TOPIC_PROMPTS, strict=True) for text in pair]
    speed = f"{args.speed:g}x real time" if args.speed else "full speed"
    flooded = f"while {args.sessions} sessions flood server VAD at {speed}"
    conditions: dict[str, tuple[int, bool] | None] = {
        "idle": None, flooded: (input_work.INPUT_NICE, True)}
    for nice in args.compare_nice:
        label = "before" if nice == 0 else "compared"
        conditions[f"{label}, input workers at nice {nice}: {flooded}"] = (nice, True)
    if args.control:
        conditions[f"control, the same flood with server VAD off (no input work): {flooded}"] = (
            input_work.INPUT_NICE, False)
    runs = {label: _samples() for label in conditions}
    noise_counts: list[dict[str, int]] = []
    async with serving(DemoServer(services)) as url:
        probe = await Probe.open(url)
        await probe.reply(texts[0], args.audio_ms)  # warm-up: the session's ACK mode settles
        turn = 0
        for _ in range(args.rounds):
            for label, condition in conditions.items():
                block = [texts[(turn + i) % len(texts)] for i in range(args.prompts)]
                turn += args.prompts
                if condition is None:
                    await measure_block(probe, block, args.audio_ms, runs[label])
                    continue
                nice, vad = condition
                with input_nice(nice):
                    async with noise(url, args, vad) as counts:
                        await measure_block(probe, block, args.audio_ms, runs[label])
                noise_counts.append(counts)
                runs[label]["cpu_noise"].append(counts.get("cpu_s", 0.0))
        await probe.close()
    if args.diagnosis:
        label = "diagnosis, input path on the event loop, no bound: " + flooded
        runs[label] = _samples()
        inline = replace(services, input_speed=None)
        with on_the_event_loop():
            async with serving(DemoServer(inline)) as url:
                probe = await Probe.open(url)
                await probe.reply(texts[0], args.audio_ms)
                async with noise(url, args) as counts:
                    await measure_block(probe, texts[:args.prompts], args.audio_ms, runs[label])
                noise_counts.append(counts)
                runs[label]["cpu_noise"].append(counts.get("cpu_s", 0.0))
                await probe.close()
    report(runs, noise_counts, args, load)


def _samples() -> dict[str, list[float]]:
    return {"first": [], "gap": [], "inter_arrival": [], "lag": [], "wall_s": [], "cpu_input": [],
            "cpu_loop": [],
            "cpu_rest": [], "cpu_noise": []}


@contextlib.contextmanager
def input_nice(nice: int) -> Any:
    """The input workers run at `nice` (`server.input_work.INPUT_NICE`) meanwhile."""
    original = input_work.INPUT_NICE
    input_work.INPUT_NICE = nice
    input_work.reset_input_executor()
    try:
        yield
    finally:
        input_work.INPUT_NICE = original
        input_work.reset_input_executor()


class _InlineExecutor(concurrent.futures.Executor):
    """Diagnosis: runs each job at once on the calling thread (the event loop)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future


@contextlib.contextmanager
def on_the_event_loop() -> Any:
    """Diagnosis: the input lanes run their jobs on the event loop, as before issue 26."""
    original = input_work._input_executor
    input_work._input_executor = _InlineExecutor  # type: ignore[assignment]
    try:
        yield
    finally:
        input_work._input_executor = original  # type: ignore[assignment]


def report(runs: dict[str, dict[str, list[float]]], noise_counts: list[dict[str, int]],
           args: argparse.Namespace, load: tuple[float, float, float]) -> None:
    idle_first_p95 = percentile(runs["idle"]["first"], 95)
    appends = sum(c.get("appends", 0) for c in noise_counts)
    closed = sum(c.get("closed", 0) for c in noise_counts)
    rows = []
    for label, samples in runs.items():
        first = samples["first"]
        p95 = percentile(first, 95)
        judged = label.startswith("while")
        rows.append([label, len(first), percentile(first, 50), p95, max(first),
                     p95 - idle_first_p95, p95 / idle_first_p95,
                     f"p95<=idle p95+{FIRST_AUDIO_SLACK_MS:.0f}" if judged else "info",
                     verdict(p95 <= idle_first_p95 + FIRST_AUDIO_SLACK_MS) if judged else "-"])
    print_table(
        f"1. First audio (response.create -> first audio delta, ms) of a session ({args.tts}, "
        "auto; say: and topic prompts alternately) idle and while other sessions flood server "
        f"VAD with noise ({args.append_ms} ms appends, blocks of {args.prompts} prompts "
        f"alternating, {args.rounds} rounds; noise: {appends} appends sent, {closed} sessions "
        "closed by the server and reopened); " + other_load(load),
        ["condition", "n", "p50 ms", "p95 ms", "max ms", "p95 - idle p95 ms",
         "p95 / idle p95", "target", "PASS/FAIL"], rows)
    rows = []
    for label, samples in runs.items():
        gaps, uneven = samples["gap"], samples["inter_arrival"]
        judged = label.startswith("while")
        rows.append([label, len(gaps), percentile(gaps, 50), percentile(gaps, 95), max(gaps),
                     f"max<={GAP_TARGET_MS:.0f}" if judged else "info",
                     verdict(max(gaps) <= GAP_TARGET_MS) if judged else "-",
                     percentile(uneven, 95), max(uneven)])
    print_table(
        "2. Audio deltas of the same replies: gap beyond real time per reply (ms a listener "
        "playing from the first delta, with no buffer of its own, waits for audio; "
        f"{args.audio_ms} ms of each reply, no ACKs: real-time pacing plus the lead), and "
        "the longest inter-arrival gap (arrival - previous arrival - audio of the previous "
        "delta, from the third delta: uneven arrival the pacing lead covers; info)",
        ["condition", "replies", "p50 ms", "p95 ms", "max ms", "target", "PASS/FAIL",
         "inter-arrival p95 ms", "inter-arrival max ms"], rows)
    print_table(
        f"3. Event loop lag meanwhile (ms a {LAG_TICK_S * 1000:.0f} ms sleep on the server's "
        "loop woke up late: the loop busy, or waiting for the GIL; diagnosis only)",
        ["condition", "ticks", "p50 ms", "p99 ms", "max ms"],
        [[label, len(samples["lag"]), percentile(samples["lag"], 50),
          percentile(samples["lag"], 99), max(samples["lag"], default=0.0)]
         for label, samples in runs.items()])
    print_table(
        "4. CPU meanwhile (cores: CPU s over wall s of the condition's blocks) of the server's "
        "input workers, its event loop and the rest (synthesis, onnxruntime), and of the noise "
        f"child (the flooding clients, at nice {args.noise_nice})",
        ["condition", "wall s", "input", "loop", "rest", "noise child"],
        [[label, sum(samples["wall_s"])] + [
            sum(samples[key]) / max(sum(samples["wall_s"]), 1e-9)
            for key in ("cpu_input", "cpu_loop", "cpu_rest", "cpu_noise")]
         for label, samples in runs.items()])


async def bench(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    print_run_header()
    services = await asyncio.to_thread(build_services, ServerConfig(port=0, tts=args.tts))
    await run(services, args)
    print(f"\ntotal wall time: {time.perf_counter() - started:.0f} s")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4,
                        help="rounds of one idle and one flooded block")
    parser.add_argument("--prompts", type=int, default=5, help="prompts per block")
    parser.add_argument("--sessions", type=int, default=10, help="flooding sessions")
    parser.add_argument("--speed", type=float, default=10.0,
                        help="flooding speed, times real time (0: as fast as it goes)")
    parser.add_argument("--append-ms", type=int, default=APPEND_MS,
                        help="noise per append (ms; 16000: the failing input's)")
    parser.add_argument("--tts", default="piper", help="the voice (uniform: the test voice)")
    parser.add_argument("--audio-ms", type=int, default=3000,
                        help="audio taken of each reply before it is cancelled")
    parser.add_argument("--diagnosis", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the flooded block with the input path on the loop")
    parser.add_argument("--noise-nice", type=int, default=NOISE_NICE,
                        help="nice value of the noise child (the flooding clients)")
    parser.add_argument("--compare-nice", type=int, nargs="*", default=[0],
                        help="also run flooded blocks with the input workers at these nice "
                        "values (0: before the input workers were niced)")
    parser.add_argument("--control", action=argparse.BooleanOptionalAction, default=True,
                        help="also run flooded blocks with server VAD off (no input work)")
    parser.add_argument("--noise-vad", action=argparse.BooleanOptionalAction, default=True,
                        help=argparse.SUPPRESS)
    parser.add_argument("--role", choices=("bench", "noise"), default="bench",
                        help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "noise":
        asyncio.run(noise_main(args.url, args.sessions, args.speed, args.append_ms,
                               args.noise_nice, args.noise_vad))
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
