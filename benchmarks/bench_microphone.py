"""Microphone benchmarks: barge-in speed and reliability of the page's client VAD in Chromium,
false and missed barge-ins (client and server VAD), spoken-turn reply latency, VAD / ASR CPU.

Browser part: Chromium takes one fake-microphone file per launch, so each run is one launch fed
one long WAV: a marker burst (its VAD onset tells where the file started on the page clock),
then the recordings separated by silences, while the assistant plays a long reply; events are
counted per segment. Protocol part: a plain `websockets` client in a child process
(`--role client`) streams generated microphone audio in real time to a real `DemoServer` in this
process, so `time.process_time()` of this process is the server's CPU. Prints the command,
machine facts and one table per measurement with its target and PASS/FAIL; exit status 1 when a
target fails. About 8 minutes on 2 cores. Method and caveats: benchmarks/README.md.

Run from the project root: `.venv/bin/python -m benchmarks.bench_microphone` (it imports the
`tests` helpers, so it must run as a module). `--grid all|people|false` runs only the page's
barge-in grids of issue 24 instead (benchmarks/page_grid.py: 66 real interruptions in three
voices at 11 positions with and without an echo, the page's own echo alone, babble and TV with
nobody speaking; one Chromium launch each, about 20 minutes on a loaded machine); `--grid
long` the long-latency grid alone (a loudspeaker 600-1250 ms late: its echo alone and a
person over it, about 5 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import page_grid
from benchmarks.measuring import HOST, cpu_snapshot, other_load, print_run_header
from benchmarks.mic_page import LONG_PROMPT, dump, page_run, report_false_alarms, report_speech
from benchmarks.mic_protocol import CLIENT_MODES, reply_16k, report_protocol
from benchmarks.mic_recordings import (
    ECHO_LEVELS_DBFS,
    NOISE_GAP_MS,
    SPEECH_GAP_MS,
    echo_recording,
    noise_recordings,
    speech_recordings,
)
from server.app import DemoServer
from server.config import ServerConfig, build_services
from tests.realtime_client import fetch_reply_audio


async def bench(args: argparse.Namespace) -> bool:
    """Run every measurement, printing each table when done; True when every target passed."""
    started = time.perf_counter()
    print_run_header()
    services = await asyncio.to_thread(
        build_services, ServerConfig(port=0, tts="piper", deterministic=True))
    speech = await asyncio.to_thread(speech_recordings)
    noise = await asyncio.to_thread(noise_recordings, args.seed)
    demo = DemoServer(services)
    server = await demo.start(HOST, 0)
    verdicts = []
    try:
        http_url = f"http://{HOST}:{demo.port()}"
        ws_url = f"ws://{HOST}:{demo.port()}/v1/realtime"
        reply = reply_16k(await fetch_reply_audio(ws_url, LONG_PROMPT))
        with tempfile.TemporaryDirectory() as workdir:
            snapshot = cpu_snapshot()
            speech_run = await page_run(http_url, speech, SPEECH_GAP_MS, Path(workdir), reply)
            verdicts += report_speech(speech_run, other_load(snapshot))
            snapshot = cpu_snapshot()
            alarm_runs = [await page_run(http_url, noise, NOISE_GAP_MS, Path(workdir), reply)]
            for dbfs in ECHO_LEVELS_DBFS:
                alarm_runs.append(await page_run(http_url, [echo_recording(dbfs)], 0.0,
                                                 Path(workdir), reply, marker=False))
            verdicts += report_false_alarms(alarm_runs, other_load(snapshot))
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            dump(speech_run, args.dump / "speech_run.json")
            for index, run in enumerate(alarm_runs):
                dump(run, args.dump / f"false_alarm_run_{index}.json")
        verdicts += await report_protocol(ws_url, args.seed)
    finally:
        server.close()
        await server.wait_closed()
    print(f"\ntotal wall time: {time.perf_counter() - started:.0f} s; "
          f"targets: {sum(verdicts)}/{len(verdicts)} PASS")
    return all(verdicts)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; see the module docstring. Exit status 1 when a target fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("main", "client"), default="main",
                        help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=sorted(CLIENT_MODES), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=23, help="seed of the noise bursts")
    parser.add_argument("--dump", type=Path, help="write the browser runs' raw page data "
                        "(JSON) into this directory")
    parser.add_argument("--grid", choices=("all", "people", "false", "long"),
                        help="run only the page's barge-in grids (benchmarks/page_grid.py, "
                        "issue 24): real interruptions, the page's own echo, the room; "
                        "long: a loudspeaker 600-1250 ms late (not part of all)")
    args = parser.parse_args(argv)
    if args.grid:
        print_run_header()
        verdicts = asyncio.run(page_grid.grid(args.seed, None if args.grid == "all"
                                              else args.grid))
        print(f"\ntargets: {sum(verdicts)}/{len(verdicts)} PASS")
        sys.exit(0 if all(verdicts) else 1)
    if args.role == "client":
        result = asyncio.run(CLIENT_MODES[args.mode](args.url, args.seed))
        print(json.dumps(result), flush=True)
        return
    sys.exit(0 if asyncio.run(bench(args)) else 1)


if __name__ == "__main__":
    main()
