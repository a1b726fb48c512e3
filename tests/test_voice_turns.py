"""Fair turns at the TTS voice: `VoiceTurns` on its own, and on a real server on loopback (a
session's first piece is synthesized before the continuations of long replies that were
waiting before it)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

from server.speech.synthesizer import SpeechChunk, SpeechSynthesizer, StopSignal
from server.voice_turns import VoiceTurns
from tests.realtime_client import RealtimeClient

LONG_REPLY = " ".join(f"Sentence number {n} is here." for n in range(1, 25))
"""24 sentences of four words (1.6 s of uniform audio each): a reply that keeps asking for
the voice."""
SHORT_REPLY = "Hello there."


async def _grant_order(turns: VoiceTurns, requests: list[tuple[str, bool, int]]) -> list[str]:
    """Hold the voice, queue `requests` (name, first, ahead_ms) in order, then release it and
    let every waiter take and give back its turn; the names in the order they were served."""
    served: list[str] = []
    await turns.acquire(first=True)

    async def take(name: str, first: bool, ahead_ms: int) -> None:
        async with turns.turn(first=first, ahead_ms=ahead_ms):
            served.append(name)

    tasks = []
    for request in requests:
        tasks.append(asyncio.create_task(take(*request)))
        await asyncio.sleep(0)
    turns.release()
    await asyncio.gather(*tasks)
    return served


async def test_first_pieces_go_before_continuations_least_buffered_first() -> None:
    turns = VoiceTurns()
    served = await _grant_order(turns, [
        ("far ahead", False, 4000), ("near underrun", False, 200), ("first A", True, 0),
        ("middle", False, 1500), ("first B", True, 0), ("also near underrun", False, 200),
    ])
    assert served == ["first A", "first B", "near underrun", "also near underrun", "middle",
                      "far ahead"]
    assert not turns.locked() and turns.waiting() == 0


async def test_a_cancelled_waiter_leaves_the_queue_and_a_granted_one_passes_the_turn_on() -> None:
    turns = VoiceTurns()
    await turns.acquire(first=True)
    cancelled = asyncio.create_task(turns.acquire(first=True))
    later = asyncio.create_task(turns.acquire(first=False, ahead_ms=0))
    await asyncio.sleep(0)
    assert turns.waiting() == 2
    cancelled.cancel()
    await asyncio.sleep(0)
    assert turns.waiting() == 1
    turns.release()
    await later
    assert turns.locked()

    granted_then_cancelled = asyncio.create_task(turns.acquire(first=True))
    await asyncio.sleep(0)
    turns.release()  # grants the waiter, which is cancelled before it runs
    granted_then_cancelled.cancel()
    await asyncio.gather(granted_then_cancelled, return_exceptions=True)
    assert not turns.locked(), "a turn granted to a cancelled waiter is passed on"


class CallLog:
    """A voice that records (text, perf_counter() at start) of every `synthesize` call."""

    def __init__(self, inner: SpeechSynthesizer) -> None:
        self.inner = inner
        self.name = inner.name
        self.sample_rate_hz = inner.sample_rate_hz
        self.calls: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        self.inner.warm_up()

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        with self._lock:
            self.calls.append((text, time.perf_counter()))
        yield from self.inner.synthesize(text, stop)


async def test_a_first_piece_overtakes_the_continuations_of_long_replies(start_server) -> None:
    """Three sessions stream long replies (every piece takes 0.15 s of voice); a fourth asks
    for a short reply. Its piece is synthesized next: no long reply's piece started between
    its request for the voice and its own piece beyond one granted at that moment (first-come
    turns would put it behind the two queued continuations, or more)."""
    logs: list[CallLog] = []

    def wrap(inner: SpeechSynthesizer) -> SpeechSynthesizer:
        logs.append(CallLog(inner))
        return logs[0]

    server = await start_server(tts="uniform", tts_delay_s=0.15, wrap_tts=wrap)
    log = logs[0]
    turns = server.demo.services.tts_turn
    first_requests: list[float] = []
    acquire = turns.acquire

    async def watched_acquire(*, first: bool, ahead_ms: int = 0) -> None:
        if first:
            first_requests.append(time.perf_counter())
        await acquire(first=first, ahead_ms=ahead_ms)

    turns.acquire = watched_acquire  # type: ignore[method-assign]
    async with contextlib.AsyncExitStack() as stack:
        streams = [await stack.enter_async_context(RealtimeClient.connect(server.ws_url))
                   for _ in range(3)]
        for client in streams:
            response_id, _ = await client.prompt(f"say: {LONG_REPLY}")
            await client.wait_for("response.output_audio.delta",
                                  lambda e, r=response_id: e["response_id"] == r)
        async with RealtimeClient.connect(server.ws_url) as asking:
            calls_before = len(log.calls)
            asked_at = time.perf_counter()
            response_id, _ = await asking.prompt(f"say: {SHORT_REPLY}")
            await asking.wait_for("response.output_audio.delta",
                                  lambda e: e["response_id"] == response_id, 10)
            requested_at = next(at for at in first_requests if at >= asked_at)
            started = [text for text, at in log.calls[calls_before:] if at >= requested_at]
            assert SHORT_REPLY in started
            overtaken = started[: started.index(SHORT_REPLY)]
            assert len(overtaken) <= 1, overtaken
