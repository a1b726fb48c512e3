"""Part 2 of `bench_calibration`: a real server, a simulated listener who barges in, and the
exact wait before each prompt.

`instrumented` wraps `HistoryCalibration.before_prompt` and `HistoryCalibration.record`
in-process (no server code changed) to time the wait before each prompt and to check
`retained_bytes` after every record; `interactive` plays `say:` replies on a real-time clock,
ACKs, barges in and prompts again 300 ms later.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from benchmarks.calibration_corpus import SpokenReply
from benchmarks.calibration_scoring import CONTROLLER_BUDGET_MS, progress
from benchmarks.measuring import cpu_snapshot, other_load
from benchmarks.session_client import serving
from benchmarks.tables import print_table
from calibration.history_calibration import HistoryCalibration
from server.app import DemoServer
from server.config import ServerConfig, build_services
from server.speech.synthesizer import SpeechSynthesizer

ACK_INTERVAL_S = 0.150
FOLLOW_UP_S = 0.300
BARGE_WINDOW_S = (0.5, 10.0)
"""A barge-in comes uniformly in this window after the reply's first audio (bounded by the reply's
length minus 0.3 s), so a long reply costs at most 10 s of real time."""


@dataclass
class Probe:
    """What the wrapped controller methods observed in one server run."""

    waits_ms: list[float] = field(default_factory=list)
    records: int = 0
    max_retained: int = 0
    max_bytes: int = 0
    over_limit: int = 0
    dropped: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)


class _ControllerLog(logging.Handler):
    """Collects from the controller's log lines: every "history audio dropped" reason and
    every calibration status ("applied", "refused", "cancelled", "TimeoutError", ...)."""

    def __init__(self, probe: Probe) -> None:
        super().__init__(logging.INFO)
        self.probe = probe

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg.startswith("history audio dropped") and args:
            self.probe.dropped.append(str(args[-1]))
        elif record.msg.startswith("history calibration response=") and len(args) > 1:
            self.probe.statuses.append(str(args[1]))


@contextlib.contextmanager
def instrumented(probe: Probe) -> Iterator[None]:
    """Wrap `HistoryCalibration.before_prompt` (wall time of each call, ms) and `record`
    (`retained_bytes` checked against `max_bytes` after every call); restored on exit."""
    before_prompt = HistoryCalibration.before_prompt
    record = HistoryCalibration.record

    async def timed_before_prompt(self: HistoryCalibration) -> None:
        started = time.perf_counter()
        try:
            await before_prompt(self)
        finally:
            probe.waits_ms.append((time.perf_counter() - started) * 1000.0)

    def checked_record(self: HistoryCalibration, response_id: str, output: dict) -> None:
        record(self, response_id, output)
        probe.records += 1
        probe.max_bytes = self.max_bytes
        probe.max_retained = max(probe.max_retained, self.retained_bytes)
        probe.over_limit += self.retained_bytes > self.max_bytes

    logger = logging.getLogger("calibration.history_calibration")
    handler = _ControllerLog(probe)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    HistoryCalibration.before_prompt = timed_before_prompt  # type: ignore[method-assign]
    HistoryCalibration.record = checked_record  # type: ignore[method-assign]
    try:
        yield
    finally:
        HistoryCalibration.before_prompt = before_prompt  # type: ignore[method-assign]
        HistoryCalibration.record = record  # type: ignore[method-assign]
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


class FlowClient:
    """A minimal Realtime client: keeps every server event, waits for one matching a predicate."""

    def __init__(self, websocket: ClientConnection) -> None:
        self.websocket = websocket
        self.events: list[dict[str, Any]] = []
        self._arrived = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for frame in self.websocket:
            event = json.loads(frame)
            event["_t"] = time.perf_counter()
            async with self._arrived:
                self.events.append(event)
                self._arrived.notify_all()

    async def close(self) -> None:
        await self.websocket.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader

    async def wait(self, predicate: Callable[[dict[str, Any]], bool], start: int = 0,
                   timeout: float = 30.0) -> dict[str, Any]:
        """The first event at index >= `start` matching `predicate` (TimeoutError after
        `timeout` s)."""

        def found() -> dict[str, Any] | None:
            return next((e for e in self.events[start:] if predicate(e)), None)

        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: found() is not None)
            event = found()
        assert event is not None
        return event

    async def send(self, event: dict[str, Any]) -> None:
        """Send one client event as JSON."""
        await self.websocket.send(json.dumps(event))

    async def prompt(self, text: str) -> tuple[str, str, float]:
        """Send a typed prompt and `response.create`: (response id, item id, send time)."""
        start = len(self.events)
        await self.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]}})
        sent = time.perf_counter()
        await self.send({"type": "response.create"})
        added = await self.wait(lambda e: e["type"] == "response.output_item.added", start)
        return added["response_id"], added["item"]["id"], sent

    def audio_ms(self, response_id: str) -> int:
        """Audio received so far for a response (ms)."""
        return max((e["audio_end_ms"] for e in self.events
                    if e["type"] == "response.output_audio.delta"
                    and e["response_id"] == response_id), default=0)


@dataclass
class FlowResult:
    """One interactive run: the probe, client-side times to first audio and heard methods."""

    probe: Probe
    ttfa_ms: list[float]
    methods: list[str]


async def play_until_barge_in(client: FlowClient, response_id: str, barge_s: float) -> None:
    """Simulated playback from the first audio delta: played = min(elapsed, received); an ACK
    every ACK_INTERVAL_S; at `barge_s` a final ACK and `barge_in` at that position."""
    first = await client.wait(lambda e: e["type"] == "response.output_audio.delta"
                              and e["response_id"] == response_id)
    while True:
        elapsed = time.perf_counter() - first["_t"]
        played = min(int(min(elapsed, barge_s) * 1000), client.audio_ms(response_id))
        await client.send({"type": "playback.ack", "response_id": response_id,
                           "played_ms": played})
        if elapsed >= barge_s:
            await client.send({"type": "barge_in", "response_id": response_id,
                               "audio_end_ms": played, "source": "button"})
            return
        await asyncio.sleep(min(ACK_INTERVAL_S, barge_s - elapsed))


async def interactive(policy: str, synthesizer: SpeechSynthesizer,
                      spoken: Sequence[SpokenReply], rng: random.Random) -> FlowResult:
    """Prompt, play, barge in, prompt again 300 ms later: one chain of len(spoken) replies."""
    probe = Probe()
    ttfa: list[float] = []
    items: list[str] = []
    config = ServerConfig(port=0, tts="piper", calibration=policy, deterministic=True)
    services = await asyncio.to_thread(build_services, config, synthesizer=synthesizer)
    with instrumented(probe):
        async with (serving(DemoServer(services, config.allow_origin)) as url,
                    connect(url, max_size=None) as ws):
            client = FlowClient(ws)
            await client.wait(lambda e: e["type"] == "session.created")
            for item in spoken:
                response_id, item_id, sent = await client.prompt(f"say: {item.reply.text}")
                first = await client.wait(lambda e, r=response_id: e["type"] ==
                                          "response.output_audio.delta" and e["response_id"] == r)
                ttfa.append((first["_t"] - sent) * 1000.0)
                high = min(BARGE_WINDOW_S[1], item.total_ms / 1000 - 0.3)
                await play_until_barge_in(client, response_id, rng.uniform(BARGE_WINDOW_S[0],
                                                                           high))
                items.append(item_id)
                await asyncio.sleep(FOLLOW_UP_S)
            await asyncio.sleep(2 * CONTROLLER_BUDGET_MS / 1000)
            await client.close()
    methods = []
    for item_id in items:
        heard = [e for e in client.events
                 if e["type"] == "conversation.item.heard" and e["item_id"] == item_id]
        methods.append(heard[-1]["method"] if heard else "no event")
    return FlowResult(probe, ttfa, methods)


async def interactive_part(args: argparse.Namespace, synthesizer: SpeechSynthesizer,
                           spoken: Sequence[SpokenReply]) -> dict[str, FlowResult]:
    """Part 2 for the marks and asr policies; prints tables 2 and 2b."""
    flows: dict[str, FlowResult] = {}
    load = cpu_snapshot()
    for policy in ("marks", "asr"):
        rng = random.Random(args.seed)
        chain = [item for item in spoken if item.long]
        chain += rng.sample([item for item in spoken if not item.long],
                            max(0, args.trials + 1 - len(chain)))
        rng.shuffle(chain)
        progress(f"interactive {policy}: {len(chain)} replies")
        flows[policy] = await interactive(policy, synthesizer, chain, rng)
    rows = []
    for policy, flow in flows.items():
        waits = flow.probe.waits_ms[1:]
        rows.append([policy, len(waits), float(np.percentile(waits, 50)),
                     float(np.percentile(waits, 95)), max(waits),
                     float(np.percentile(flow.ttfa_ms[1:], 50)),
                     float(np.percentile(flow.ttfa_ms[1:], 95)),
                     tally(flow.methods), tally(flow.probe.statuses)])
    print_table(
        "2. Interactive: before_prompt wait (ms, exact, in-process) of each prompt sent 300 ms "
        f"after a barge-in, client time to first audio (ms) ({other_load(load)})",
        ("policy", "prompts", "wait p50", "wait p95", "wait max", "ttfa p50", "ttfa p95",
         "heard methods", "calibration statuses"), rows)
    print_table("2b. Retained audio, checked after every HistoryCalibration.record", (
        "policy", "records", "max retained B", "max_bytes", "over limit", "audio dropped"), [
        [policy, flow.probe.records, flow.probe.max_retained, flow.probe.max_bytes,
         flow.probe.over_limit, tally(flow.probe.dropped)] for policy, flow in flows.items()])
    return flows


def tally(values: Sequence[str]) -> str:
    """"a=2 b=1" counts of the distinct values, "-" when empty."""
    return " ".join(f"{v}={values.count(v)}" for v in sorted(set(values))) or "-"
