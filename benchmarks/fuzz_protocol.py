"""Protocol fuzz run: random client frames against a real server until >= N frames were sent.

Starts a real `server.app.DemoServer` in this process on 127.0.0.1 (a free port), as
`benchmarks/bench_server.py` does: `build_services` and `server_options` of a `ServerConfig`
with the uniform voice, `--calibration marks`, 60 s of pacing lead (replies go out at TTS
speed) and an event rate limit far above what the fuzzer sends (`MAX_EVENTS_PER_S`). One
stand-in: committed input audio is transcribed as "fuzz" at once (`InstantTranscriber`);
faster-whisper costs about 0.5 s CPU per committed buffer whatever its length, and the fuzzer
commits thousands, so the run would take several times as long and test no more of the
protocol (the CI slice, tests/test_protocol_fuzz.py, runs the real one).

Sessions over loopback send batches drawn by hypothesis from `tests.protocol_fuzz.frame_batches`
and check each with `tests.protocol_fuzz.run_batch`; a session is replaced after
`--batches-per-session` batches, or when the server closed it. Every log record at ERROR or
above is counted; tracebacks are those that carry an exception. Prints one table (method:
benchmarks/README.md); exit status 1 when anything in it is not 0.

Run from the project root: `.venv/bin/python -m benchmarks.fuzz_protocol --frames 100000`
(or `make fuzz`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings

from benchmarks.measuring import HOST, print_run_header
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services, server_options
from tests.fuzz_frames import FuzzFrame
from tests.protocol_fuzz import frame_batches, run_batch
from tests.realtime_client import RealtimeClient

EXAMPLES_PER_RUN = 100
"""Batches per hypothesis run; runs repeat (with the next seed) until enough frames were sent."""
MAX_EVENTS_PER_S = 100_000
"""`--max-events-per-s` of the server: no fuzzed frame is refused for its rate."""


class InstantTranscriber:
    """Input ASR stand-in: "fuzz" for any audio, "" for none (see the module docstring)."""

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        return "fuzz" if pcm_f32.size else ""


class ServerLog(logging.Handler):
    """Counts the server process's log records at ERROR or above; keeps the first few."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors = 0
        self.tracebacks = 0
        self.first: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.errors += 1
        self.tracebacks += record.exc_info is not None
        if len(self.first) < 3:
            self.first.append(self.format(record))


@dataclass(slots=True)
class Tally:
    """Totals over the run (see the table rows)."""

    frames: int = 0
    invalid: int = 0
    batches: int = 0
    sessions: int = 0
    killed: list[str] = field(default_factory=list)
    timed_out: int = 0
    unanswered: list[str] = field(default_factory=list)
    refused_valid: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    prompt_failures: list[str] = field(default_factory=list)


class Fuzzer:
    """Sends batches to the server at `url` over a session it replaces when needed."""

    def __init__(self, url: str, batches_per_session: int) -> None:
        self.url = url
        self.batches_per_session = batches_per_session
        self.tally = Tally()
        self.client: RealtimeClient | None = None
        self._session_stack = contextlib.AsyncExitStack()
        self._batches_in_session = 0

    async def _session(self) -> RealtimeClient:
        if self.client is None or self._batches_in_session >= self.batches_per_session:
            await self.close()
            self.client = await self._session_stack.enter_async_context(
                RealtimeClient.connect(self.url))
            self.tally.sessions += 1
            self._batches_in_session = 0
        self._batches_in_session += 1
        return self.client

    async def close(self) -> None:
        """Close the current session, if any."""
        await self._session_stack.aclose()
        self.client = None

    async def send(self, batch: list[FuzzFrame]) -> None:
        """Send one batch over the current session and add its outcome to the tally."""
        client = await self._session()
        tally = self.tally
        tally.batches += 1
        tally.frames += len(batch)
        tally.invalid += sum(frame.invalid for frame in batch)
        try:
            outcome = await run_batch(client, batch, f"b{tally.batches}")
        except TimeoutError:
            tally.timed_out += 1
            await self.close()
            return
        tally.unanswered += outcome.unanswered
        tally.refused_valid += outcome.refused_valid
        tally.duplicated += outcome.duplicated
        tally.server_errors += outcome.server_errors
        if outcome.prompt_failure:
            tally.prompt_failures.append(outcome.prompt_failure)
        if outcome.closed:
            tally.killed.append(outcome.closed)
            await self.close()


def fuzz(args: argparse.Namespace) -> Tally:
    """Start the server, send batches until `args.frames` frames were sent, stop it."""
    loop = asyncio.new_event_loop()
    config = ServerConfig(port=0, tts="uniform", calibration="marks", lead_ms=60_000,
                          deterministic=True, max_events_per_s=MAX_EVENTS_PER_S)
    services = build_services(config, input_transcriber=InstantTranscriber())
    demo = DemoServer(services, config.allow_origin, server_options(config))
    loop.run_until_complete(demo.start(HOST, 0))
    fuzzer = Fuzzer(f"ws://{HOST}:{demo.port()}/v1/realtime", args.batches_per_session)
    run_settings = settings(max_examples=EXAMPLES_PER_RUN, phases=[Phase.generate],
                            derandomize=False, database=None, deadline=None,
                            suppress_health_check=list(HealthCheck))

    @run_settings
    @given(batch=frame_batches(*args.batch_frames))
    def send_batch(batch: list[FuzzFrame]) -> None:
        if fuzzer.tally.frames < args.frames:
            loop.run_until_complete(fuzzer.send(batch))

    run = 0
    while fuzzer.tally.frames < args.frames:
        seed(args.seed + run)(send_batch)()
        run += 1
        print(f"{fuzzer.tally.frames} frames sent", file=sys.stderr, flush=True)
    loop.run_until_complete(fuzzer.close())
    loop.run_until_complete(demo.shutdown())
    loop.close()
    return fuzzer.tally


def report(tally: Tally, log: ServerLog, wall_s: float) -> bool:
    """Print the table (and the first problems of each kind); True when nothing broke."""
    rows = [
        ("frames sent", tally.frames),
        ("  of which invalid (each must get one error)", tally.invalid),
        ("batches (each followed by a checked prompt)", tally.batches),
        ("sessions", tally.sessions),
        ("sessions killed (closed by the server)", len(tally.killed)),
        ("batches timed out", tally.timed_out),
        ("tracebacks in the server log", log.tracebacks),
        ("records at ERROR or above in the server log", log.errors),
        ("invalid frames not answered by error", len(tally.unanswered)),
        ("valid frames refused for their form", len(tally.refused_valid)),
        ("frames answered by more than one error", len(tally.duplicated)),
        ("server_error events (e.g. a failed generation)", len(tally.server_errors)),
        ("prompts after a batch without a whole reply", len(tally.prompt_failures)),
        ("wall time (s)", round(wall_s, 1)),
    ]
    print_table("Protocol fuzz", ["measure", "value"], rows)
    problems = {"killed": tally.killed, "server log": log.first, "unanswered": tally.unanswered,
                "refused valid": tally.refused_valid, "duplicated": tally.duplicated,
                "server errors": tally.server_errors,
                "prompt failures": tally.prompt_failures}
    for name, found in problems.items():
        for line in found[:3]:
            print(f"{name}: {line[:2000]}")
    return not (tally.killed or tally.timed_out or log.errors or tally.unanswered
                or tally.refused_valid or tally.duplicated or tally.server_errors
                or tally.prompt_failures)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000,
                        help="stop once this many frames were sent (default 100000)")
    parser.add_argument("--batch-frames", type=int, nargs=2, default=(30, 60),
                        metavar=("MIN", "MAX"), help="frames per batch (default 30 60)")
    parser.add_argument("--batches-per-session", type=int, default=5,
                        help="batches sent over one session before it is replaced (default 5)")
    parser.add_argument("--seed", type=int, default=int(time.time()),
                        help="hypothesis seed of the first run (default: the time)")
    args = parser.parse_args(argv)
    print_run_header()
    print(f"seed: {args.seed}", flush=True)
    log = ServerLog()
    logging.getLogger().addHandler(log)
    started = time.perf_counter()
    tally = fuzz(args)
    sys.exit(0 if report(tally, log, time.perf_counter() - started) else 1)


if __name__ == "__main__":
    main()
