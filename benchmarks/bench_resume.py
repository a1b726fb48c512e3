"""Resume benchmark (issue 26): reconnect within the window after a drop mid-reply.

Starts a real `server.app.DemoServer` on 127.0.0.1 in this process (`--tts uniform` by
default: exact, deterministic cuts; `--tts piper` for the real voice) and runs `--drops`
trials, each with a random seed-driven shape:

- a session sets its instructions, has one short reply played to its end (ACKed in full),
  then prompts a long reply and ACKs it at 1-4 increasing positions up to a random point
  (200 ms to most of the reply);
- the connection then ends one of three ways: *abort* (TCP aborted, no close frame: a network
  drop), *reload* (close code 1001, as a browser sends on reload), *takeover* (the client
  reconnects while the server still holds the old socket, a Wi-Fi blip the server has not
  seen);
- after a random 0-1500 ms the client reconnects with its resume token.

Per trial it checks: resumed (`session.resumed`, same session id); history kept (every item
of before the drop, in order, no duplicate, the first reply heard in full); cut at the last
ACK (the long reply's heard text and position are exactly those of a `barge_in` at the last
ACK in a control session of the same server); settings kept (instructions). *Resume latency*
is the reconnect's upgrade sent -> `session.resumed` received. Prints the table with targets
and PASS/FAIL; exit status 0.

Run from the project root: `.venv/bin/python -m benchmarks.bench_resume` (about a minute with
the uniform voice; it imports `tests.realtime_client`, so it must run as a module).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.measuring import percentile, print_run_header, verdict
from benchmarks.session_client import serving
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services, server_options
from server.speech.engines import create_synthesizer
from tests.realtime_client import RealtimeClient

SHORT = "say: Good morning to you."
LONG = ("say: The harbour opens at seven, the ferry leaves at half past eight, and the museum "
        "by the lighthouse stays open until the evening tide comes in, so there is time for "
        "lunch on the pier.")
INSTRUCTIONS = "Answer like a ship's pilot."
KINDS = ("abort", "reload", "takeover")


@dataclass(slots=True)
class Trial:
    """One drop and its reconnect."""

    kind: str
    last_ack_ms: int
    delay_ms: int
    resumed: bool = False
    kept: bool = False
    cut_at_ack: bool = False
    settings: bool = False
    latency_ms: float = float("nan")


async def played_in_full(client: RealtimeClient, text: str) -> list[str]:
    """Prompt `text`, ACK its audio as it arrives until done; returns [user id, item id]."""
    response_id, item_id = await client.prompt(text)
    while True:
        done = client.of_type("response.done")
        sent = max((e["audio_end_ms"] for e in client.of_type(
            "response.output_audio.delta", response_id=response_id)), default=0)
        if sent:
            await client.ack(response_id, sent)
        if any(e["response"]["id"] == response_id for e in done):
            break
        await client.drain(0.05)
    await client.heard(item_id, lambda e: e["method"] == "full")
    user = client.of_type("conversation.item.added")[-2]["item"]["id"]
    return [user, item_id]


async def ack_to(client: RealtimeClient, response_id: str, positions: list[int]) -> None:
    """ACK each of `positions` once its audio was sent."""
    for played_ms in positions:
        await client.wait_audio_until(response_id, played_ms, timeout=60)
        await client.ack(response_id, played_ms)
        await client.wait_for("playback.acknowledged",
                              lambda e, p=played_ms: e["played_ms"] == p)


async def control_heard(url: str, played_ms: int) -> tuple[str, int]:
    """(heard text, played_ms) of `LONG` barged in on at `played_ms` in a fresh session."""
    async with RealtimeClient.connect(url) as client:
        response_id, item_id = await client.prompt(LONG)
        await ack_to(client, response_id, [played_ms])
        await client.barge_in(response_id, played_ms)
        heard = await client.heard(item_id, lambda e: e["elapsed_ms"] is not None)
        return heard["text"], heard["played_ms"]


async def run_trial(url: str, rng: random.Random, kind: str, total_ms: int,
                    controls: dict[int, tuple[str, int]]) -> Trial:
    """One drop of `kind` mid-reply at a random position, and the resume."""
    last = rng.randrange(200, max(400, total_ms - 800))
    positions = sorted({*(rng.randrange(100, last) for _ in range(rng.randrange(0, 4))), last})
    trial = Trial(kind, last, rng.randrange(0, 1500))
    first = await RealtimeClient.connect(url).__aenter__()
    await first.send({"type": "session.update", "session": {"instructions": INSTRUCTIONS}})
    await first.wait_for("session.updated", lambda e: e["session"]["instructions"]
                         == INSTRUCTIONS)
    before = await played_in_full(first, SHORT)
    response_id, item_id = await first.prompt(LONG)
    before += [first.of_type("conversation.item.added")[-2]["item"]["id"], item_id]
    await ack_to(first, response_id, positions)
    token = first.of_type("session.created")[0]["session"]["resume"]["token"]
    session_id = first.of_type("session.created")[0]["session"]["id"]
    if kind == "abort":
        first.websocket.transport.abort()
    elif kind == "reload":
        await first.websocket.close(1001, "reload")
    await asyncio.sleep(trial.delay_ms / 1000)
    started = time.perf_counter()
    again = await RealtimeClient.connect(f"{url}?resume={token}", extensions=None).__aenter__()
    try:
        resumed = await again.wait_for("session.resumed", timeout=30)
        trial.latency_ms = (time.perf_counter() - started) * 1000
        created = again.of_type("session.created")[0]["session"]
        trial.resumed = resumed["session_id"] == session_id == created["id"]
        ids = [item["id"] for item in resumed["items"]]
        heard = {entry["item_id"]: entry for entry in resumed["heard"]}
        trial.kept = (ids == before and len(set(ids)) == len(ids)
                      and heard[before[1]]["method"] == "full")
        if last not in controls:
            controls[last] = await control_heard(url, last)
        cut = heard.get(item_id, {})
        trial.cut_at_ack = (cut.get("text"), cut.get("played_ms")) == controls[last] and (
            controls[last][1] == last and cut.get("interrupted") is True)
        trial.settings = created["instructions"] == INSTRUCTIONS
    finally:
        await again.websocket.close()
        if kind == "takeover":
            first.websocket.transport.abort()
    return trial


async def reply_ms(url: str) -> int:
    """The whole audio of `LONG` (ms)."""
    async with RealtimeClient.connect(url) as client:
        response_id, _ = await client.prompt(LONG)
        sent = 0
        while not any(e["response"]["id"] == response_id
                      for e in client.of_type("response.done")):
            await client.ack(response_id, sent)
            await client.drain(0.05)
            sent = max((e["audio_end_ms"] for e in client.of_type(
                "response.output_audio.delta", response_id=response_id)), default=0)
        return sent


async def main(args: argparse.Namespace) -> None:
    print_run_header()
    config = replace(ServerConfig(port=0, tts=args.tts, calibration="marks",
                                  deterministic=True), resume_window_s=args.window_s)
    synthesizer = create_synthesizer(args.tts, deterministic=True)
    synthesizer.warm_up()
    services = build_services(config, synthesizer=synthesizer)
    demo = DemoServer(services, (), server_options(config))
    rng = random.Random(args.seed)
    trials: list[Trial] = []
    controls: dict[int, tuple[str, int]] = {}
    async with serving(demo) as url:
        total_ms = await reply_ms(url)
        print(f"reply: {total_ms} ms of audio ({args.tts}); window {args.window_s:g} s; "
              f"seed {args.seed}")
        for index in range(args.drops):
            trials.append(await run_trial(url, rng, KINDS[index % len(KINDS)], total_ms,
                                          controls))
        parked = demo.resumption.stats()["parked"] if demo.resumption else 0
    rows: list[list[Any]] = []
    for kind in (*KINDS, "all"):
        chosen = [t for t in trials if kind in ("all", t.kind)]
        share = {name: 100.0 * sum(getattr(t, name) for t in chosen) / len(chosen)
                 for name in ("resumed", "kept", "cut_at_ack", "settings")}
        latencies = [t.latency_ms for t in chosen if t.resumed]
        rows.append([kind, len(chosen), f"{min(t.last_ack_ms for t in chosen)}-"
                     f"{max(t.last_ack_ms for t in chosen)}", share["resumed"], share["kept"],
                     share["cut_at_ack"], share["settings"], percentile(latencies, 50),
                     percentile(latencies, 95)])
    print_table("Reconnect within the window after a drop mid-reply",
                ["drop", "n", "last ACK ms", "resumed %", "history kept %",
                 "cut at last ACK %", "settings kept %", "resume p50 ms", "resume p95 ms"],
                rows)
    everything = all(t.resumed and t.kept and t.cut_at_ack and t.settings for t in trials)
    print(f"\ntarget: history kept 100 %, cut at the last ACK 100 % ({len(trials)} drops): "
          f"{verdict(everything and len(trials) >= 20)}")
    print(f"sessions still parked at the end: {parked} (the takeover's old socket is gone)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drops", type=int, default=24, help="trials (default 24)")
    parser.add_argument("--tts", default="uniform", choices=("uniform", "piper"))
    parser.add_argument("--window-s", type=float, default=60.0,
                        help="--resume-window-s of the server (default 60)")
    parser.add_argument("--seed", type=int, default=26)
    asyncio.run(main(parser.parse_args()))
