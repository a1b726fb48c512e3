"""The work on the person's turns (`server.turn_work.TurnWork`), on a real server on loopback
with the real ASR of the person's turns (faster-whisper tiny.en) on Piper speech, committed
by hand (`input_audio_buffer.commit`):

- transcripts reach the session in the order the turns were spoken, also when the first one
  comes back last;
- a transcription that fails drops its turn (`conversation.item.deleted`, nothing claimed) and
  the next turn is transcribed as usual;
- a response asked for right after a commit waits for that turn's transcript: its prompt
  holds the words;
- a session closing before a decision transcription ran leaves no coroutine unawaited.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import numpy as np

from calibration.local_asr import person_transcriber
from server.realtime.effects import DecideTranscription
from server.turn_work import TurnWork
from tests import speech_fixtures
from tests.realtime_client import RealtimeClient
from tests.test_server_vad import mic_pcm16


class HeldTranscriber:
    """The real ASR of the person's turns; its n-th call (from 1) is held `hold_s[n]` seconds
    after it transcribed, or fails (`RuntimeError`) when n is in `failing`."""

    def __init__(self, hold_s: dict[int, float] | None = None,
                 failing: frozenset[int] = frozenset()) -> None:
        self.inner = person_transcriber()
        self.hold_s = hold_s or {}
        self.failing = failing
        self.calls = 0

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        self.calls += 1
        call = self.calls
        text = await self.inner.transcribe(pcm_f32, sample_rate_hz)
        await asyncio.sleep(self.hold_s.get(call, 0.0))
        if call in self.failing:
            raise RuntimeError("the ASR server went away")
        return text


async def say_and_commit(client: RealtimeClient, text: str) -> str:
    """Append Piper's `text` with 300 ms of silence each side as microphone audio and commit
    it; returns the committed item's id."""
    pcm = speech_fixtures.place(speech_fixtures.speech(text), lead_ms=300, tail_ms=300)
    await client.send({"type": "input_audio_buffer.append",
                       "audio": base64.b64encode(mic_pcm16(pcm)).decode()})
    await client.send({"type": "input_audio_buffer.commit"})
    committed = await client.wait_for("input_audio_buffer.committed", timeout=30)
    return committed["item_id"]


async def started(start_server: Any, transcriber: HeldTranscriber) -> Any:
    """A server with the uniform voice whose person ASR is `transcriber` (loaded first)."""
    await asyncio.to_thread(transcriber.inner.load)
    return await start_server(tts="uniform", input_transcriber=transcriber)


async def test_transcripts_reach_the_session_in_the_spoken_order(start_server: Any) -> None:
    server = await started(start_server, HeldTranscriber(hold_s={1: 3.0}))
    async with RealtimeClient.connect(server.ws_url) as client:
        first = await say_and_commit(client, "Okay, sounds good.")
        second = await say_and_commit(client, "Tell me about the planets.")
        for _ in range(2):
            await client.wait_for("conversation.item.input_audio_transcription.completed",
                                  timeout=60)
    completed = client.of_type("conversation.item.input_audio_transcription.completed")
    assert [e["item_id"] for e in completed] == [first, second]
    assert "good" in completed[0]["transcript"].lower()
    assert "planet" in completed[1]["transcript"].lower()


async def test_a_failed_transcription_drops_its_turn_and_the_next_goes_on(
    start_server: Any,
) -> None:
    server = await started(start_server, HeldTranscriber(failing=frozenset({1})))
    async with RealtimeClient.connect(server.ws_url) as client:
        first = await say_and_commit(client, "Okay, sounds good.")
        deleted = await client.wait_for("conversation.item.deleted", timeout=60)
        second = await say_and_commit(client, "Tell me about the planets.")
        completed = await client.wait_for(
            "conversation.item.input_audio_transcription.completed", timeout=60)
    assert deleted["item_id"] == first
    assert completed["item_id"] == second
    assert "planet" in completed["transcript"].lower()
    assert not client.of_type("conversation.item.input_audio_transcription.completed",
                              item_id=first)


async def test_a_response_right_after_a_commit_waits_for_its_transcript(
    start_server: Any,
) -> None:
    server = await started(start_server, HeldTranscriber(hold_s={1: 1.5}))
    async with RealtimeClient.connect(server.ws_url) as client:
        await say_and_commit(client, "Tell me about the planets.")
        await client.send({"type": "response.create"})
        created = await client.wait_for("response.created", timeout=60)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == created["response"]["id"], 60)
    completed = client.of_type("conversation.item.input_audio_transcription.completed")
    assert len(completed) == 1
    turns = [(turn.role, turn.text) for turn in server.responder.prompts[-1].turns]
    assert turns == [("user", completed[0]["transcript"])]
    assert "planet" in turns[0][1].lower()


async def test_a_decision_transcription_cancelled_before_it_ran_leaves_nothing_unawaited(
        monkeypatch: Any) -> None:
    """The connection cancels a session's tasks when it closes (`TurnWork.tasks`); one that
    had not run yet, a paused reply's decision transcription, held the coroutine of its
    recognition made beforehand, and that coroutine was never awaited: "RuntimeWarning:
    coroutine 'TurnWork._recognise' was never awaited" in a loaded run. Now no recognition is
    made before its task runs, and cancelled before it ran, the task made none (the work's
    other parts are never touched)."""
    made: list[int] = []

    async def recognise(self: TurnWork, pcm16: bytes, start_ms: int,
                        person_only: bool = False) -> str:
        return ""

    def making(self: TurnWork, pcm16: bytes, start_ms: int, person_only: bool = False) -> Any:
        made.append(start_ms)
        return recognise(self, pcm16, start_ms, person_only)

    monkeypatch.setattr(TurnWork, "_recognise", making)
    work = TurnWork(None, None, None, None)  # type: ignore[arg-type]
    work.apply(DecideTranscription("item_1", bytes(3200), 0, 100))
    assert made == []
    tasks = work.tasks()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert made == []
    assert [task.cancelled() for task in tasks] == [True]
