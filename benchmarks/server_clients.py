"""The client side of `bench_server`: its client modes, run in a child process (`--role client`).

`ttfa` (table 1): one session, prompts in turn, time to first audio; `barge` (tables 2-3):
concurrent sessions barging in at random moments of real-time-ACKed playback; `stream`
(table 4): concurrent sessions streaming long replies until told to stop.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks.prompts import LONG_PROMPTS, PAUSE_S, SAY_PROMPTS, TOPIC_PROMPTS, WARM_UP_PROMPT
from benchmarks.session_client import PLAYBACK_JITTER_MS, BenchClient
from server.sending import wait_set

CHILD = (sys.executable, "-m", "benchmarks.bench_server")
"""How the client and RSS child processes are started (with `cwd=PROJECT_ROOT`)."""
ACK_INTERVAL_S = 0.150
"""The simulated clients ACK their playback position this often (s)."""
BARGE_WINDOW_S = (0.05, 4.0)
"""A barge-in comes at a uniformly random moment this long after the first audio delta."""


async def client_ttfa(spec: dict[str, Any]) -> dict[str, Any]:
    """One session: a warm-up prompt, then say/topic prompts alternately. For each, the time
    from sending `response.create` to the first audio delta; then `barge_in` at 0 ms (the user
    stops it), wait for `response.done` and `spec["think_s"]` seconds."""
    client = await BenchClient.open(spec["url"])
    prompts = [("warm-up", WARM_UP_PROMPT)]
    for say, topic in zip(SAY_PROMPTS, TOPIC_PROMPTS, strict=True):
        prompts += [("say", say), ("topic", topic)]
    samples: list[dict[str, Any]] = []
    for kind, text in prompts:
        response_id, sent_at = await client.prompt(text)
        track = client.tracks[response_id]
        async with asyncio.timeout(30):
            await track.first_audio.wait()
        assert track.first_audio_at is not None
        samples.append({"kind": kind, "ms": (track.first_audio_at - sent_at) * 1000})
        await client.barge_in(response_id, 0)
        async with asyncio.timeout(10):
            await track.done.wait()
        await asyncio.sleep(spec["think_s"])
    await client.close()
    return {"samples": samples, "errors": client.errors}


async def _barge_session(url: str, rng: random.Random, count: int) -> tuple[list[Any], list[str]]:
    client = await BenchClient.open(url)
    records = []
    for _ in range(count):
        response_id, _sent = await client.prompt(rng.choice(TOPIC_PROMPTS))
        track = client.tracks[response_id]
        async with asyncio.timeout(30):
            await track.first_audio.wait()
        assert track.first_audio_at is not None
        barge_at = track.first_audio_at + rng.uniform(*BARGE_WINDOW_S)
        next_ack = track.first_audio_at + ACK_INTERVAL_S
        while (now := time.perf_counter()) < barge_at:
            if now >= next_ack:
                await client.ack(response_id, track.played_ms(now))
                next_ack += ACK_INTERVAL_S
            await asyncio.sleep(max(0.0, min(next_ack, barge_at) - time.perf_counter()))
        now = time.perf_counter()
        played, received = track.played_ms(now), track.max_end_ms
        sent_at = time.perf_counter()
        await client.barge_in(response_id, played)
        async with asyncio.timeout(10):
            await track.done.wait()
        assert track.done_at is not None
        records.append({
            "session_id": client.session_id, "response_id": response_id,
            "played_ms": played, "received_ms": received, "status": track.status,
            "done_ms": (track.done_at - sent_at) * 1000,
            "late_deltas": sum(1 for at, _end in track.deltas if at >= sent_at),
        })
        await asyncio.sleep(PAUSE_S)
    await client.close()
    return records, client.errors


async def client_barge(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec["sessions"]` concurrent sessions, each `spec["barges"]` times: a topic prompt,
    real-time ACKs, then `barge_in` at the simulated played position at a random moment."""
    results = await asyncio.gather(*(
        _barge_session(spec["url"], random.Random(spec["seed"] * 1000 + index), spec["barges"])
        for index in range(spec["sessions"])
    ))
    return {"barges": [r for records, _ in results for r in records],
            "errors": [e for _, errors in results for e in errors]}


async def _stream_session(url: str, rng: random.Random, ready: asyncio.Event,
                          stop: asyncio.Event) -> dict[str, int]:
    client = await BenchClient.open(url)
    underrun_ms, replies = 0, 0
    while not stop.is_set():
        response_id, _sent = await client.prompt(rng.choice(LONG_PROMPTS))
        track = client.tracks[response_id]
        async with asyncio.timeout(120):
            await track.first_audio.wait()
        assert track.first_audio_at is not None
        ready.set()
        while not stop.is_set() and not track.done.is_set():
            now = time.perf_counter()
            wanted = int((now - track.first_audio_at) * 1000) - PLAYBACK_JITTER_MS
            underrun_ms = max(underrun_ms, wanted - track.max_end_ms)
            await client.ack(response_id, track.played_ms(now))
            await wait_set(stop, ACK_INTERVAL_S)
        replies += track.done.is_set()
    await client.close()
    return {"underrun_ms": underrun_ms, "replies_completed": replies,
            "errors": len(client.errors)}


async def client_stream(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec["sessions"]` concurrent sessions streaming long replies with real-time ACKs.

    Prints "ready" once every session got audio, streams until a line arrives on stdin, then
    returns per-session stats (`underrun_ms`: worst shortfall of received audio behind the
    simulated playback clock, 0 or less when playback never starved).
    """
    stop = asyncio.Event()
    ready = [asyncio.Event() for _ in range(spec["sessions"])]
    tasks = [
        asyncio.create_task(_stream_session(spec["url"], random.Random(spec["seed"] + index),
                                            ready[index], stop))
        for index in range(spec["sessions"])
    ]
    async with asyncio.timeout(120):
        await asyncio.gather(*(event.wait() for event in ready))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    stop.set()
    return {"sessions": await asyncio.gather(*tasks)}


CLIENT_MODES: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "ttfa": client_ttfa, "barge": client_barge, "stream": client_stream,
}


def client_main(spec_json: str) -> None:
    """Child role: run one client mode (`spec["mode"]`) and print its result as JSON."""
    spec = json.loads(spec_json)
    result = asyncio.run(CLIENT_MODES[spec["mode"]](spec))
    print(json.dumps(result), flush=True)
