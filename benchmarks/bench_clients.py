"""Standard clients: audio continuity without ACKs, and truncate -> heard latency.

Starts a real `server.app.DemoServer` (uniform voice, `--calibration marks`) in this process on
127.0.0.1 and drives it over loopback:

1. The official `openai` realtime client, which never sends `playback.ack`, beside a plain
   `websockets` client that ACKs its simulated real-time playback every 150 ms: for each reply,
   the longest time an audio delta arrived after a client playing from its first delta would
   have needed it ("gap beyond real time"; target <= 20 ms for the client without ACKs).
2. `conversation.item.truncate` without a cancel, beside `barge_in`, on a reply still playing:
   time from sending it to the `conversation.item.heard` of the marks cut (target <= 20 ms).

Every loop is bounded (a run takes about a minute). Run from the project root:
`.venv/bin/python -m benchmarks.bench_clients [--replies N] [--cuts N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import replace
from typing import Any

import numpy as np
from openai import AsyncOpenAI
from websockets.asyncio.client import ClientConnection, connect

from benchmarks.bench_server import print_run_header
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services

HOST = "127.0.0.1"
REPLY = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen.")
"""16 words: 6.4 s of audio with the uniform voice (400 ms a word)."""
ACK_INTERVAL_S = 0.150
PLAYBACK_JITTER_MS = 100
GAP_TARGET_MS = 20.0
HEARD_TARGET_MS = 20.0
CUT_AFTER_MS = 1500
"""Audio sent before the cut is made; the cut lands at CUT_AFTER_MS - 300."""


def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def gap_beyond_real_time_ms(arrivals: list[tuple[float, int]]) -> float:
    """Longest wait (ms) past real time: a client playing from its first delta needs the
    delta that starts at `audio_end_ms` of the previous one at first arrival + that; arrivals
    are (clock s, audio_end_ms). 0 when audio always came in time."""
    first = arrivals[0][0]
    waits = [(arrived - first) * 1000.0 - previous_end
             for (arrived, _), (_, previous_end) in zip(arrivals[1:], arrivals[:-1], strict=True)]
    return max([0.0, *waits])


async def sdk_reply_gap(base_url: str) -> float:
    """One reply to the `openai` realtime client (no ACKs); its gap beyond real time (ms)."""
    sdk = AsyncOpenAI(api_key="unused", websocket_base_url=base_url)
    async with sdk.realtime.connect(model="duplex-demo") as connection:
        await connection.conversation.item.create(item=user_item(f"say: {REPLY}"))
        await connection.response.create()
        arrivals: list[tuple[float, int]] = []
        async for event in connection:
            if event.type == "response.output_audio.delta":
                arrivals.append((time.monotonic(), json.loads(event.to_json())["audio_end_ms"]))
            if event.type == "response.done":
                break
    return gap_beyond_real_time_ms(arrivals)


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
        response_id = (await prompt(websocket, f"say: {REPLY}"))["response"]["id"]
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
            max(values)]


async def run(replies: int, cuts: int) -> None:
    print_run_header()
    config = replace(ServerConfig(port=0, tts="uniform", calibration="marks",
                                  deterministic=True))
    services = await asyncio.to_thread(build_services, config)
    demo = DemoServer(services, config.allow_origin)
    await demo.start(HOST, 0)
    ws_url = f"ws://{HOST}:{demo.port()}/v1/realtime"
    try:
        sdk = [await sdk_reply_gap(ws_url.removesuffix("/realtime")) for _ in range(replies)]
        acking = [await acking_reply_gap(ws_url) for _ in range(replies)]
        print_table(
            f"1. Audio gap beyond real time per reply (ms), {len(REPLY.split())} words, "
            f"uniform voice; target <= {GAP_TARGET_MS:g} ms without ACKs",
            ["client", "replies", "p50", "p95", "max", "verdict"],
            [["openai SDK (no ACKs)", *summary(sdk),
              "PASS" if max(sdk) <= GAP_TARGET_MS else "FAIL"],
             ["ACKs every 150 ms", *summary(acking), "-"]])
        truncate = [await cut_to_heard_ms(ws_url, "truncate") for _ in range(cuts)]
        barge = [await cut_to_heard_ms(ws_url, "barge_in") for _ in range(cuts)]
        print_table(
            f"2. Cut -> conversation.item.heard (marks), ms; target p95 <= "
            f"{HEARD_TARGET_MS:g} ms for truncate",
            ["cut", "cuts", "p50", "p95", "max", "verdict"],
            [["conversation.item.truncate", *summary(truncate),
              "PASS" if np.percentile(truncate, 95) <= HEARD_TARGET_MS else "FAIL"],
             ["barge_in", *summary(barge), "-"]])
    finally:
        demo.server.close()
        await demo.server.wait_closed()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replies", type=int, default=8, help="replies per client kind")
    parser.add_argument("--cuts", type=int, default=20, help="cuts per kind")
    args = parser.parse_args()
    asyncio.run(run(args.replies, args.cuts))


if __name__ == "__main__":
    main()
