"""The person's words first, in the order spoken, on a real server on loopback:

- a turn whose transcript comes late (it waited behind other work) still reaches the session
  before a newer turn's, and the newer turn does not start a response of its own behind it:
  one response answers both, in order (issue 13: a late "uh-huh" transcript landing after
  "What next?" started a second response);
- with `--calibration auto`, the person's turn is transcribed while the ASR cross-checks of
  interrupted replies wait: its transcript comes before the last cross-check's result.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any

import numpy as np

from calibration.asr_queue import AsrPriority
from calibration.local_asr import LocalWhisperTranscriber, person_transcriber
from calibration.policies import auto_policy
from server.app import DemoServer
from server.config import ServerConfig, build_services
from tests import speech_fixtures
from tests.conftest import loaded_synthesizer
from tests.realtime_client import RealtimeClient
from tests.test_server_vad import SERVER_VAD, mic_pcm16, receive_while, stream_mic

LATE_S = 4.0
"""How late the first turn's transcript is: past the second turn's commit."""


class LateFirstTranscriber:
    """The real ASR of the person's turns; the first call's transcript is held `LATE_S`."""

    def __init__(self) -> None:
        self.inner = person_transcriber()
        self.calls = 0

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        self.calls += 1
        first = self.calls == 1
        text = await self.inner.transcribe(pcm_f32, sample_rate_hz)
        if first:
            await asyncio.sleep(LATE_S)
        return text


async def test_a_late_transcript_is_placed_in_order_and_starts_no_stale_response(
    start_server,
) -> None:
    transcriber = LateFirstTranscriber()
    await asyncio.to_thread(transcriber.inner.load)
    server = await start_server(tts="uniform", calibration="marks",
                                input_transcriber=transcriber)
    first = speech_fixtures.speech("Okay, sounds good.")
    second = speech_fixtures.speech("Tell me about the planets.")
    mic = mic_pcm16(np.concatenate([speech_fixtures.place(first, lead_ms=600, tail_ms=1500),
                                    speech_fixtures.place(second, lead_ms=0, tail_ms=1500)]))
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        await receive_while(client, asyncio.create_task(stream_mic(client, mic)))
        created = await client.wait_for("response.created", timeout=30)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == created["response"]["id"], 30)
        await client.drain(1.0)
    committed = [e["item_id"] for e in client.of_type("input_audio_buffer.committed")]
    completed = client.of_type("conversation.item.input_audio_transcription.completed")
    assert len(committed) == 2
    assert [e["item_id"] for e in completed] == committed, "transcripts in the spoken order"
    assert len(client.of_type("response.created")) == 1, "no response behind the newer turn"
    turns = [(t.role, t.text) for t in server.responder.prompts[-1].turns]
    assert turns == [("user", e["transcript"]) for e in completed]
    assert "planet" in completed[1]["transcript"].lower()


CHECK_TIMEOUT_S = 120.0
"""Cross-checks are not cut short here (each takes about 0.5 s on an idle machine)."""
TALKERS = 5
"""Sessions whose cross-checks queue (one background transcription at a time, 0.3-0.5 s each):
the person's turn needs about 1 s of real time after the barge-ins (500 ms of silence, then its
transcription), so three queued checks left 0.6 s to spare on an idle machine and, on a faster
or busier one, none (CI failed by 25 ms); five leave about 1.5 s."""
INTERRUPTED_REPLY = ("say: The river rises in the hills and runs past the old mill, the bridge "
                     "and the market square before it reaches the sea at the harbour.")


async def _interrupt(client: RealtimeClient) -> str:
    """Prompt INTERRUPTED_REPLY, play 2.2 s of it and barge in; returns the reply's item id."""
    response_id, item_id = await client.prompt(INTERRUPTED_REPLY)
    await client.wait_audio_until(response_id, 2500)
    await client.ack(response_id, 2200)
    await client.barge_in(response_id, 2200)
    return item_id


async def _arrival(waiting: Awaitable[Any]) -> float:
    """Loop time at which `waiting` returned."""
    await waiting
    return asyncio.get_running_loop().time()


async def _cross_checked(client: RealtimeClient, item_id: str) -> None:
    """Wait for the cross-check's result: the marks result is announced, then announced again
    with the cross-check's evidence (whatever it is: a failed check is reported too)."""
    for _ in range(2):
        await client.heard(item_id, lambda e: e["method"] == "marks", CHECK_TIMEOUT_S)


async def test_the_persons_transcript_comes_before_queued_cross_checks() -> None:
    """`TALKERS` sessions interrupt Piper replies under `auto` (each marks result is
    cross-checked by ASR in the background; the budget is lifted so that none is skipped);
    while those cross-checks run and wait, another session's spoken turn ends. Its transcript
    arrives before the last cross-check's result (the marks result announced again with the ASR
    evidence): it was not queued behind them."""
    config = ServerConfig(port=0, tts="piper", calibration="marks", deterministic=True)
    services = await asyncio.to_thread(build_services, config,
                                       synthesizer=loaded_synthesizer("piper"))
    checker = LocalWhisperTranscriber(cpu_threads=1, priority=AsrPriority.BACKGROUND)
    demo = DemoServer(replace(services, policy=auto_policy(checker, asr_timeout_s=CHECK_TIMEOUT_S)))
    await demo.start("127.0.0.1", 0)
    url = f"ws://127.0.0.1:{demo.port()}/v1/realtime"
    utterance = speech_fixtures.speech("What time does the museum open tomorrow?")
    speech_end_ms = 300 + speech_fixtures.active_span_ms(utterance)[1]
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=300, tail_ms=1200))
    split = int(speech_end_ms) * 24 * 2
    try:
        async with contextlib.AsyncExitStack() as stack:
            talkers = [await stack.enter_async_context(RealtimeClient.connect(url))
                       for _ in range(TALKERS)]
            person = await stack.enter_async_context(RealtimeClient.connect(url))
            await person.send({"type": "session.update", "session": {
                "audio": {"input": {"turn_detection": SERVER_VAD}}}})
            await person.wait_for("session.updated")
            await receive_while(person, asyncio.create_task(stream_mic(person, mic[:split])))
            assert not person.of_type("input_audio_buffer.speech_stopped")
            items = await asyncio.gather(*(_interrupt(client) for client in talkers))
            tail = asyncio.create_task(stream_mic(person, mic[split:]))
            transcribed, *checked = await asyncio.gather(
                _arrival(person.wait_for(
                    "conversation.item.input_audio_transcription.completed",
                    timeout=CHECK_TIMEOUT_S)),
                *(_arrival(_cross_checked(client, item_id))
                  for client, item_id in zip(talkers, items, strict=True)))
            await tail
    finally:
        assert demo.server is not None
        demo.server.close()
        await demo.server.wait_closed()
    transcript = person.of_type("conversation.item.input_audio_transcription.completed")[0]
    assert "museum" in transcript["transcript"].lower()
    assert transcribed < max(checked), (transcribed, checked)
