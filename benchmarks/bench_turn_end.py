"""Turn-end benchmark: a pause inside a sentence, under `semantic_vad` and `server_vad`.

A real `DemoServer` (uniform voice, marks calibration, the in-process tiny.en ASR, Silero
server VAD and, for `semantic_vad`, the Smart Turn v3.2 end-of-turn model) and a protocol
client that streams the microphone in real time (40 ms appends). Each trial is one session
and one utterance: the first half of a sentence, a pause (`--pause-ms`, default 700), the rest
(issue 24, failing input 5: "I want to book a table for... two people tonight"). Eight
sentences, six of whose first halves end on a preposition, article or conjunction and two on
other words ("we could", "want is"), by Piper and two espeak-ng voices: 24 utterances.

Measured per trial: answered early (a turn ended, or a response was created, before the
sentence's audio ended, or the sentence became more than one user turn), and, from its end
(when the append holding its last sample was sent), the wall time to
`input_audio_buffer.speech_stopped` (end of turn) and to `response.created`. Target (issue
24): answered early <= 10 % of >= 20 utterances under `semantic_vad`; end-of-turn -> response
p50 reported. `server_vad` (OpenAI's defaults, silence 500 ms) is run on the same utterances
side by side. Prints the command, machine facts, one row per trial and a summary with
PASS/FAIL; exit status 1 when the target fails. About 4 minutes with `--parallel 2`.

Run from the project root: `.venv/bin/python -m benchmarks.bench_turn_end`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from benchmarks.measuring import percentile, print_run_header, verdict
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services
from server.speech.resampling import resample
from tests import speech_fixtures
from tests.realtime_client import RealtimeClient

HOST = "127.0.0.1"
FRAME_MS = 40
INPUT_RATE_HZ = 24000
LEAD_MS = 600
WAIT_S = 7.0
"""Longest wait for the response after the sentence's audio (s): medium's longest silence
(4 s) plus a transcription on a loaded machine."""
SENTENCES = (
    ("I want to book a table for", "two people tonight."),
    ("What is the capital of", "France?"),
    ("Could you remind me about the", "meeting tomorrow?"),
    ("Set a timer for", "ten minutes."),
    ("I need directions to", "the train station."),
    ("Tell me a joke about", "cats."),
    ("I was thinking that maybe we could", "go to the beach."),
    ("The thing I really want is", "a quiet weekend."),
)
VOICES = (("piper", None), ("espeak", "en-us"), ("espeak", "en-gb-x-rp"))
MODES = {
    "semantic_vad": {"type": "semantic_vad", "eagerness": "auto"},
    "server_vad": {"type": "server_vad", "silence_duration_ms": 500},
}


@dataclass
class Utterance:
    first: str
    rest: str
    voice: str
    pcm16: bytes
    sentence_end_ms: float
    """Where the sentence's audio ends in `pcm16` (ms)."""


@dataclass
class Trial:
    mode: str
    utterance: Utterance
    turns: list[str]
    early: bool
    stop_ms: float | None
    response_ms: float | None


def utterances(pause_ms: float) -> list[Utterance]:
    made = []
    for engine, voice in VOICES:
        for first, rest in SENTENCES:
            pcm = np.concatenate([speech_fixtures.speech(first, engine, voice),
                                  speech_fixtures.silence(pause_ms),
                                  speech_fixtures.speech(rest, engine, voice)])
            end_ms = LEAD_MS + speech_fixtures.active_span_ms(pcm)[1]
            mic = np.concatenate([speech_fixtures.silence(LEAD_MS), pcm,
                                  speech_fixtures.silence(WAIT_S * 1000)])
            pcm16 = speech_fixtures.to_pcm16(resample(mic, speech_fixtures.RATE_HZ,
                                                      INPUT_RATE_HZ))
            made.append(Utterance(first, rest, voice or engine, pcm16, end_ms))
    return made


async def run_trial(ws_url: str, mode: str, utterance: Utterance) -> Trial:
    loop = asyncio.get_running_loop()
    frame = INPUT_RATE_HZ * 2 * FRAME_MS // 1000
    async with connect(ws_url, max_size=None) as websocket:
        client = TimedClient(websocket)
        await client.wait_for("session.created")
        await client.send({"type": "session.update", "session": {
            "audio": {"input": {"turn_detection": MODES[mode]}}}})
        await client.wait_for("session.updated")
        start = loop.time()
        sentence_end_s: float | None = None
        for offset in range(0, len(utterance.pcm16), frame):
            await client.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(
                utterance.pcm16[offset:offset + frame]).decode()})
            sent_ms = (offset + frame) * 1000 / (INPUT_RATE_HZ * 2)
            if sentence_end_s is None and sent_ms >= utterance.sentence_end_ms:
                sentence_end_s = loop.time()
            if sentence_end_s is not None and client.of_type("response.created"):
                break
            await client.drain(max(0.0, start + sent_ms / 1000 - loop.time()))
        await client.drain(1.5)
    assert sentence_end_s is not None
    created = [e for e in client.events if e["type"] == "response.created"]
    arrival = {id(e): t for e, t in zip(client.events, client.arrivals, strict=True)}
    turns = [e["transcript"] for e in client.of_type(
        "conversation.item.input_audio_transcription.completed")]
    stops = [arrival[id(e)] for e in client.of_type("input_audio_buffer.speech_stopped")]
    early = any(arrival[id(e)] < sentence_end_s for e in created) or any(
        stop < sentence_end_s for stop in stops)
    last_stop = max(stops) if stops else None
    after = [arrival[id(e)] for e in created if arrival[id(e)] >= sentence_end_s]
    return Trial(mode, utterance, turns, early or len(turns) > 1,
                 None if last_stop is None else (last_stop - sentence_end_s) * 1000,
                 None if not after else (min(after) - sentence_end_s) * 1000)


class TimedClient(RealtimeClient):
    """A `RealtimeClient` that records when each event arrived (loop time, s)."""

    def __init__(self, websocket: ClientConnection) -> None:
        super().__init__(websocket)
        self.arrivals: list[float] = []

    async def _receive(self, timeout: float) -> dict[str, Any]:
        event = await super()._receive(timeout)
        self.arrivals.append(asyncio.get_running_loop().time())
        return event


async def run_all(args: argparse.Namespace) -> list[Trial]:
    config = ServerConfig(port=0, tts="uniform", calibration="marks", deterministic=True)
    services = await asyncio.to_thread(build_services, config)
    made = await asyncio.to_thread(utterances, args.pause_ms)
    demo = DemoServer(services)
    server = await demo.start(HOST, 0)
    ws_url = f"ws://{HOST}:{demo.port()}/v1/realtime"
    slots = asyncio.Semaphore(args.parallel)

    async def one(mode: str, utterance: Utterance) -> Trial:
        async with slots:
            return await run_trial(ws_url, mode, utterance)

    try:
        return list(await asyncio.gather(*(one(mode, u) for u in made
                                           for mode in args.modes)))
    finally:
        server.close()
        await server.wait_closed()


def report(trials: list[Trial], modes: list[str]) -> bool:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    print_table("per utterance", ["mode", "voice", "first half", "turns", "early",
                                  "end -> stop ms", "end -> response ms", "transcripts"],
                [[t.mode, t.utterance.voice, t.utterance.first, len(t.turns),
                  "EARLY" if t.early else "-", ms(t.stop_ms), ms(t.response_ms),
                  " | ".join(t.turns)] for t in trials])
    rows = []
    ok = True
    for mode in modes:
        of_mode = [t for t in trials if t.mode == mode]
        early = sum(t.early for t in of_mode)
        share = early / len(of_mode)
        stops = [t.stop_ms for t in of_mode if not t.early and t.stop_ms is not None]
        responses = [t.response_ms for t in of_mode
                     if not t.early and t.response_ms is not None]
        passed = share <= 0.10 and len(of_mode) >= 20 if mode == "semantic_vad" else True
        ok = ok and passed
        rows.append([mode, f"{early}/{len(of_mode)} ({share:.0%})",
                     "<= 10 %" if mode == "semantic_vad" else "-",
                     f"{percentile(stops, 50):.0f} / {percentile(stops, 95):.0f}",
                     f"{percentile(responses, 50):.0f} / {percentile(responses, 95):.0f}",
                     verdict(passed)])
    print_table("summary (latencies over the utterances not answered early)",
                ["mode", "answered early", "target", "end -> stop p50 / p95 ms",
                 "end -> response p50 / p95 ms", "verdict"], rows)
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parallel", type=int, default=2,
                        help="sessions run at once (default 2)")
    parser.add_argument("--pause-ms", type=float, default=700.0,
                        help="the pause inside each sentence (default 700 ms)")
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES),
                        default=["semantic_vad", "server_vad"])
    args = parser.parse_args()
    print_run_header()
    trials = asyncio.run(run_all(args))
    sys.exit(0 if report(trials, args.modes) else 1)


if __name__ == "__main__":
    main()
