"""Where a reply's first audio goes: bench_server table 1's prompts, split into stages.

Runs the default server (`piper`, `auto` calibration) in this process with the client of
`benchmarks.bench_server` (table 1: one session, a warm-up prompt, then 20 `say:` and 20
topic prompts alternately, each stopped by `barge_in` at its first audio, the next prompt
1.0 s or 0.25 s later) and times, per prompt, on the server: the wait for the previous reply's
calibration (`HistoryCalibration.before_prompt`), the wait for the voice (`VoiceTurns`, first
pieces), the text preparation (phonemes and espeak-ng word events) before the first ONNX run,
the encoder part's run (`server.speech.piper_tts`: text encoder, duration predictor, flow over
the whole first sentence) and the decoder run of the first chunk (the sentence's head). The
stages are measured by wrapping those objects in this process (no server code changed); the
rest of the time to first audio (resampling, queueing, pacing, JSON, socket) is what is left.

Run from the project root: `.venv/bin/python -m benchmarks.bench_first_audio` (about 3 minutes);
`--intra-op-threads N` sets Piper's onnxruntime threads (`piper_tts.INTRA_OP_THREADS`) for a
comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from benchmarks.measuring import cpu_snapshot, other_load, percentile, print_run_header
from benchmarks.prompts import PAUSE_S, TYPING_S
from benchmarks.server_clients import CHILD
from benchmarks.session_client import run_clients, serving
from benchmarks.tables import print_table
from calibration.history_calibration import HistoryCalibration
from server.app import DemoServer
from server.config import ServerConfig, build_services
from server.services import Services
from server.speech import piper_tts
from server.speech.piper_tts import PiperSynthesizer
from server.speech.synthesizer import SpeechChunk, StopSignal
from server.voice_turns import VoiceTurns

STAGES = ("calibration wait", "voice wait", "text prep", "encoder run", "head decode",
          "first chunk", "time to first audio")


class _TimedRuns:
    """An onnxruntime session stand-in that adds each run's wall time (ms) to `times`."""

    def __init__(self, inner: Any, times: list[float]) -> None:
        self.inner = inner
        self.times = times

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def run(self, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.run(*args)
        finally:
            self.times.append((time.perf_counter() - started) * 1000)


class StageClock:
    """Per-prompt stage times (ms) of the first piece of each reply, in arrival order."""

    def __init__(self, services: Services) -> None:
        synthesizer = services.synthesizer
        piper = getattr(synthesizer, "main", synthesizer)  # inside the script voices
        if not isinstance(piper, PiperSynthesizer):
            raise TypeError("bench_first_audio measures the piper engine")
        self.stages: dict[str, list[float]] = {stage: [] for stage in STAGES}
        self._encoder: list[float] = []
        self._decoder: list[float] = []
        piper._encoder.session = _TimedRuns(piper._encoder.session, self._encoder)
        piper._decoder = _TimedRuns(piper._decoder, self._decoder)  # type: ignore[assignment]
        self._synthesize = synthesizer.synthesize
        synthesizer.synthesize = self._first_piece  # type: ignore[method-assign]
        self._first = True

    def _first_piece(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        first, self._first = self._first, False
        self._encoder.clear()
        self._decoder.clear()
        started = time.perf_counter()
        for chunk in self._synthesize(text, stop):
            if first:
                spent = (time.perf_counter() - started) * 1000
                encoder, head = sum(self._encoder), self._decoder[0] if self._decoder else 0.0
                self.stages["first chunk"].append(spent)
                self.stages["encoder run"].append(encoder)
                self.stages["head decode"].append(head)
                self.stages["text prep"].append(spent - encoder - head)
                first = False
            yield chunk

    def next_reply(self) -> None:
        """The next piece synthesized is a reply's first."""
        self._first = True


@contextlib.contextmanager
def timed_waits(clock: StageClock) -> Iterator[None]:
    """Time `before_prompt` and first-piece voice turns while the block runs."""
    before_prompt, acquire = HistoryCalibration.before_prompt, VoiceTurns.acquire

    async def timed_before_prompt(self: HistoryCalibration) -> None:
        started = time.perf_counter()
        clock.next_reply()
        try:
            await before_prompt(self)
        finally:
            clock.stages["calibration wait"].append((time.perf_counter() - started) * 1000)

    async def timed_acquire(self: VoiceTurns, *, first: bool, ahead_ms: int = 0) -> None:
        started = time.perf_counter()
        await acquire(self, first=first, ahead_ms=ahead_ms)
        if first:
            clock.stages["voice wait"].append((time.perf_counter() - started) * 1000)

    HistoryCalibration.before_prompt = timed_before_prompt  # type: ignore[method-assign]
    VoiceTurns.acquire = timed_acquire  # type: ignore[method-assign]
    try:
        yield
    finally:
        HistoryCalibration.before_prompt = before_prompt  # type: ignore[method-assign]
        VoiceTurns.acquire = acquire  # type: ignore[method-assign]


@contextlib.asynccontextmanager
async def measured(services: Services) -> AsyncIterator[tuple[StageClock, str]]:
    """Serve `services` with the stage clock on; yield (clock, realtime URL)."""
    clock = StageClock(services)
    with timed_waits(clock):
        async with serving(DemoServer(services)) as url:
            yield clock, url


async def bench() -> None:
    """Print one table per pause after a barge-in."""
    print_run_header()
    print(f"piper onnxruntime intra-op threads: {piper_tts.INTRA_OP_THREADS}")
    services = await asyncio.to_thread(build_services, ServerConfig(port=0, tts="piper"))
    for think_s in (TYPING_S, PAUSE_S):
        load = cpu_snapshot()
        async with measured(services) as (clock, url):
            result = await run_clients(CHILD, {"mode": "ttfa", "url": url, "think_s": think_s})
        clock.stages["time to first audio"] = [sample["ms"] for sample in result["samples"]]
        rows = []
        for stage in STAGES:
            values = clock.stages[stage][1:]  # the warm-up prompt left out
            rows.append([stage, len(values), percentile(values, 50), percentile(values, 95),
                         max(values, default=float("nan"))])
        print_table(
            f"First audio by stage, piper (auto), next prompt {think_s:.2f} s after the "
            f"barge-in (ms; p50/p95 of each stage on its own); "
            + other_load(load),
            ["stage", "n", "p50 ms", "p95 ms", "max ms"], rows)


def main() -> None:
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intra-op-threads", type=int, default=piper_tts.INTRA_OP_THREADS,
                        help="Piper's onnxruntime intra-op threads (default %(default)s)")
    piper_tts.INTRA_OP_THREADS = parser.parse_args().intra_op_threads
    asyncio.run(bench())


if __name__ == "__main__":
    main()
