"""Fair turns at the TTS voice: `VoiceTurns` on its own, and on a real server on loopback (a
session's first piece is synthesized before the continuations of long replies that were
waiting before it)."""

from __future__ import annotations

import asyncio
import base64
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


async def test_a_first_piece_preempts_a_holder_that_offers_it_and_goes_first() -> None:
    turns = VoiceTurns()
    preempted: list[str] = []
    served: list[str] = []

    async def take(name: str, first: bool) -> None:
        async with turns.turn(first=first):
            served.append(name)

    async with turns.turn(first=False, ahead_ms=3000, preempt=lambda: preempted.append("A")):
        continuation = asyncio.create_task(take("continuation", False))
        await asyncio.sleep(0)
        assert preempted == [], "a continuation never preempts"
        first = asyncio.create_task(take("first", True))
        await asyncio.sleep(0)
        assert preempted == ["A"]
    await asyncio.gather(first, continuation)
    assert served == ["first", "continuation"]

    async with turns.turn(first=False):
        waiting = asyncio.create_task(take("first again", True))
        await asyncio.sleep(0)
    async with turns.turn(first=False, preempt=lambda: preempted.append("B")):
        pass
    await waiting
    assert preempted == ["A"], "no hook is called for a holder that offered none"

    await turns.acquire(first=True)
    offering = asyncio.create_task(_hold_offering(turns, preempted))
    await asyncio.sleep(0)
    turns.release()  # grants the offering continuation; a first piece asks before it runs
    asking = asyncio.create_task(take("asking", True))
    await asyncio.gather(offering, asking)
    assert preempted == ["A", "C"] and served[-1] == "asking"
    assert not turns.locked()


async def _hold_offering(turns: VoiceTurns, preempted: list[str]) -> None:
    async with turns.turn(first=False, ahead_ms=3000, preempt=lambda: preempted.append("C")):
        await asyncio.sleep(0.01)


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


class PatientVoice:
    """A real voice whose every piece first takes `delay_s`, cut short by its stop signal as
    Piper's ONNX run is (`StopSignal.interrupting`); logs (text, start) of every call."""

    def __init__(self, inner: SpeechSynthesizer, delay_s: float) -> None:
        self.inner = inner
        self.delay_s = delay_s
        self.name = inner.name
        self.sample_rate_hz = inner.sample_rate_hz
        self.calls: list[tuple[str, float]] = []

    def warm_up(self) -> None:
        self.inner.warm_up()

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        stop = stop or StopSignal()
        self.calls.append((text, time.perf_counter()))
        woken = threading.Event()
        with stop.interrupting(woken.set):
            woken.wait(self.delay_s)
        if not stop.is_set():
            yield from self.inner.synthesize(text, stop)


async def test_a_first_piece_preempts_a_continuation_far_ahead_which_is_redone(
    start_server,
) -> None:
    """A long reply is seconds ahead of playback; right after one of its pieces starts (0.6 s
    of voice each), another session asks. That piece gives the voice up at once, the asking
    session's piece is synthesized, and the stopped piece is synthesized again after it: no
    audio of the long reply is lost or doubled."""
    voices: list[PatientVoice] = []

    def wrap(inner: SpeechSynthesizer) -> SpeechSynthesizer:
        voices.append(PatientVoice(inner, 0.6))
        return voices[0]

    server = await start_server(tts="uniform", wrap_tts=wrap)
    voice = voices[0]
    async with RealtimeClient.connect(server.ws_url) as streaming, \
            RealtimeClient.connect(server.ws_url) as asking:
        long_id, _ = await streaming.prompt(f"say: {LONG_REPLY}")
        await streaming.wait_for("response.output_audio.delta",
                                 lambda e: e["response_id"] == long_id)
        await streaming.drain(3.5)
        calls = len(voice.calls)
        while len(voice.calls) == calls:
            await streaming.drain(0.005)
        running = voice.calls[-1][0]
        response_id, _ = await asking.prompt(f"say: {SHORT_REPLY}")
        await asking.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == response_id, 10)
        async with asyncio.timeout(10):
            while len(voice.calls) < calls + 3:
                await streaming.drain(0.05)
        texts = [text for text, _ in voice.calls[calls:]]
        assert texts[:3] == [running, SHORT_REPLY, running], texts
        await streaming.drain(1.0)
    audio = b"".join(base64.b64decode(e["delta"]) for e in streaming.of_type(
        "response.output_audio.delta", response_id=long_id))
    ends = [e["audio_end_ms"] for e in streaming.of_type("response.output_audio.delta",
                                                         response_id=long_id)]
    assert ends == sorted(ends) and len(audio) == ends[-1] * 24 * 2
