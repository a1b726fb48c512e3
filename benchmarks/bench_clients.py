"""Real OpenAI Realtime clients against the server: audio continuity, errors in a whole
conversation, and truncate -> heard latency (issue 25).

Starts a real `server.app.DemoServer` (Piper voice, `--calibration marks`) in this process on
127.0.0.1 and drives it over loopback:

1. Each real Python client of `tests/clients/` (the bare `openai` SDK, `openai-agents`'
   RealtimeAgent, Pipecat's `OpenAIRealtimeLLMService`; each in a child process of its own
   venv, `make clients`), none of which sends `playback.ack`, beside a plain `websockets`
   client that ACKs its simulated real-time playback every 150 ms: REPLIES replies each, each
   played out before the next; per reply, the longest time an audio delta arrived (the
   client's own clock) after a client playing from its first delta would have needed it ("gap
   beyond real time"). Target: p99 <= 20 ms for every client.
2. The tests' whole conversation (`tests/clients/script.py`: setup, a typed turn, a spoken
   turn of Piper audio, an interruption through the client's own API, a turn that knows the
   cut), CONVERSATIONS times per client: `error` events, errors the client raised or logged,
   and server events that fail strict validation against the `openai` package's models.
   Target: 0 per conversation.
3. `conversation.item.truncate` without a cancel, beside `barge_in`, on a reply still playing:
   time from sending it to the `conversation.item.heard` of the marks cut (target p95 <=
   20 ms).

Run from the project root (about 10 minutes with the defaults):
`.venv/bin/python -m benchmarks.bench_clients [--replies N] [--conversations N] [--cuts N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from benchmarks.audio_arrival import gap_beyond_real_time_ms
from benchmarks.measuring import print_run_header
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services
from tests import speech_fixtures
from tests.clients.launch import COMMANDS, run_client, version
from tests.test_openai_conversations import SERVER_EVENT
from tests.test_server_vad import mic_pcm16

HOST = "127.0.0.1"
REPLY = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen.")
"""16 words, about 6 s of Piper's audio (the cuts of table 3)."""
GAP_REPLY = "The quick brown fox jumps over the lazy dog, then runs into the quiet woods."
"""The reply of table 1: about 4 s of Piper's audio."""
ACK_INTERVAL_S = 0.150
PLAYBACK_JITTER_MS = 100
GAP_TARGET_MS = 20.0
HEARD_TARGET_MS = 20.0
CUT_AFTER_MS = 1500
"""Audio sent before the cut is made; the cut lands at CUT_AFTER_MS - 300."""


def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def reply_gaps_ms(lines: list[dict[str, Any]]) -> list[float]:
    """Per reply of a client's report (`tests/clients/script.py`), its gap beyond real time
    (ms), from the audio deltas' arrival on the client's clock."""
    arrivals: dict[str, list[tuple[float, int]]] = {}
    for line in lines:
        event = line.get("event") or {}
        if event.get("type") == "response.output_audio.delta":
            arrivals.setdefault(event["response_id"], []).append(
                (line["at"], event["audio_end_ms"]))
    return [gap_beyond_real_time_ms(deltas) for deltas in arrivals.values()]


def problems(lines: list[dict[str, Any]]) -> int:
    """Errors in a client's report: `error` events, errors it raised or logged, and server
    events that fail strict validation against the `openai` package's models."""
    count = sum(1 for line in lines if "error" in line or "log" in line)
    for line in lines:
        event = line.get("event")
        if event is None:
            continue
        if event.get("type") == "error":
            count += 1
            continue
        try:
            SERVER_EVENT.validate_python(event, strict=True)
        except ValueError:
            count += 1
    return count


async def receive_until(websocket: ClientConnection, event_type: str,
                        on_event: Any = None) -> dict[str, Any]:
    """Read events until one of `event_type`; `on_event` sees every event first."""
    while True:
        async with asyncio.timeout(30):
            event = json.loads(await websocket.recv())
        if on_event is not None:
            on_event(event)
        if event["type"] == event_type:
            return event


async def prompt(websocket: ClientConnection, text: str) -> dict[str, Any]:
    """Send a typed prompt and `response.create`; the `response.created` event."""
    await websocket.send(json.dumps({"type": "conversation.item.create",
                                     "item": user_item(text)}))
    await websocket.send(json.dumps({"type": "response.create"}))
    return await receive_until(websocket, "response.created")


async def acking_reply_gap(ws_url: str) -> float:
    """One reply to a client that ACKs its real-time playback; its gap (ms)."""
    async with connect(ws_url) as websocket:
        response_id = (await prompt(websocket, f"say: {GAP_REPLY}"))["response"]["id"]
        arrivals: list[tuple[float, int]] = []

        def note(event: dict[str, Any]) -> None:
            if event["type"] == "response.output_audio.delta":
                arrivals.append((time.monotonic(), event["audio_end_ms"]))

        async def ack_loop() -> None:
            while True:
                await asyncio.sleep(ACK_INTERVAL_S)
                if arrivals:
                    played = (time.monotonic() - arrivals[0][0]) * 1000 - PLAYBACK_JITTER_MS
                    played = int(min(max(played, 0), arrivals[-1][1]))
                    await websocket.send(json.dumps({"type": "playback.ack",
                                                     "response_id": response_id,
                                                     "played_ms": played}))

        acks = asyncio.create_task(ack_loop())
        try:
            await receive_until(websocket, "response.done", note)
        finally:
            acks.cancel()
    return gap_beyond_real_time_ms(arrivals)


async def cut_to_heard_ms(ws_url: str, kind: str) -> float:
    """Prompt, wait for CUT_AFTER_MS of audio, ACK it, cut with `kind` ("truncate" or
    "barge_in") 300 ms earlier; ms from sending the cut to the marks `conversation.item.heard`."""
    async with connect(ws_url) as websocket:
        response_id = (await prompt(websocket, f"say: {REPLY}"))["response"]["id"]
        added = await receive_until(websocket, "response.output_item.added")
        item_id = added["item"]["id"]
        while (await receive_until(websocket, "response.output_audio.delta"))[
                "audio_end_ms"] < CUT_AFTER_MS:
            pass
        cut_ms = CUT_AFTER_MS - 300
        await websocket.send(json.dumps({"type": "playback.ack", "response_id": response_id,
                                         "played_ms": cut_ms}))
        if kind == "truncate":
            cut = {"type": "conversation.item.truncate", "item_id": item_id,
                   "content_index": 0, "audio_end_ms": cut_ms}
        else:
            cut = {"type": "barge_in", "response_id": response_id, "audio_end_ms": cut_ms}
        sent = time.perf_counter()
        await websocket.send(json.dumps(cut))
        while True:
            event = await receive_until(websocket, "conversation.item.heard")
            if event["method"] == "marks":
                return (time.perf_counter() - sent) * 1000.0


def summary(values: list[float]) -> list[object]:
    return [len(values), float(np.percentile(values, 50)), float(np.percentile(values, 95)),
            float(np.percentile(values, 99)), max(values)]


def spoken_files(folder: Path) -> list[str]:
    """The tests' spoken question and "Where did you stop?" (Piper, microphone PCM16 at
    24 kHz) written to `folder`; their paths."""
    paths = []
    for name, text in (("question", "Tell me about the planets."),
                       ("recall", "Where did you stop?")):
        path = folder / f"{name}.pcm"
        path.write_bytes(mic_pcm16(speech_fixtures.place(
            speech_fixtures.speech(text), lead_ms=600, tail_ms=1500)))
        paths.append(str(path))
    return paths


async def run(replies: int, conversations: int, cuts: int) -> None:
    print_run_header()
    config = replace(ServerConfig(port=0, tts="piper", calibration="marks",
                                  deterministic=True))
    services = await asyncio.to_thread(build_services, config)
    demo = DemoServer(services, config.allow_origin)
    await demo.start(HOST, 0)
    ws_url = f"ws://{HOST}:{demo.port()}/v1/realtime"
    try:
        gaps = {name: reply_gaps_ms(await run_client(
            name, ws_url, ["--replies", str(replies), f"say: {GAP_REPLY}"]))
            for name in COMMANDS}
        acking = [await acking_reply_gap(ws_url) for _ in range(replies)]
        print_table(
            f"1. Audio gap beyond real time per reply (ms), Piper, {replies} replies of "
            f"{len(GAP_REPLY.split())} words each; target p99 <= {GAP_TARGET_MS:g} ms",
            ["client", "version", "replies", "p50", "p95", "p99", "max", "verdict"],
            [*[[name, version(name), *summary(values),
                "PASS" if np.percentile(values, 99) <= GAP_TARGET_MS else "FAIL"]
               for name, values in gaps.items()],
             ["ACKs every 150 ms (reference)", "-", *summary(acking), "-"]])
        with tempfile.TemporaryDirectory() as folder:
            spoken = await asyncio.to_thread(spoken_files, Path(folder))
            errors = {name: [problems(await run_client(name, ws_url, spoken))
                             for _ in range(conversations)] for name in COMMANDS}
        print_table(
            "2. Errors in a full conversation (setup, typed turn, spoken turn, interruption "
            "through the client's API, a turn that knows the cut); target 0",
            ["client", "version", "conversations", "errors (total)", "max per conversation",
             "verdict"],
            [[name, version(name), len(counts), sum(counts), max(counts),
              "PASS" if max(counts) == 0 else "FAIL"] for name, counts in errors.items()])
        truncate = [await cut_to_heard_ms(ws_url, "truncate") for _ in range(cuts)]
        barge = [await cut_to_heard_ms(ws_url, "barge_in") for _ in range(cuts)]
        print_table(
            f"3. Cut -> conversation.item.heard (marks), ms; target p95 <= "
            f"{HEARD_TARGET_MS:g} ms for truncate",
            ["cut", "cuts", "p50", "p95", "p99", "max", "verdict"],
            [["conversation.item.truncate", *summary(truncate),
              "PASS" if np.percentile(truncate, 95) <= HEARD_TARGET_MS else "FAIL"],
             ["barge_in", *summary(barge), "-"]])
    finally:
        demo.server.close()
        await demo.server.wait_closed()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replies", type=int, default=20, help="replies per client")
    parser.add_argument("--conversations", type=int, default=1,
                        help="full conversations per client")
    parser.add_argument("--cuts", type=int, default=20, help="cuts per kind")
    args = parser.parse_args()
    asyncio.run(run(args.replies, args.conversations, args.cuts))


if __name__ == "__main__":
    main()
