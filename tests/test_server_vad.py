"""Server VAD and turn detection over the protocol: microphone audio in, turns and cuts out.

A plain `websockets` client plays the part of a page without a VAD of its own: it streams
microphone audio (generated speech or noise) with `input_audio_buffer.append` in real time,
ACKs the assistant's audio as a real-time player would, and stops playing when the server
interrupts it (`output_audio_buffer.cleared` / cancelled `response.done`), sending its final ACK.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import numpy as np

from server.tts import resample
from tests import speech_fixtures
from tests.realtime_client import RealtimeClient

FRAME_MS = 40
INPUT_RATE_HZ = 24000
SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
              "silence_duration_ms": 500, "create_response": True, "interrupt_response": True}
LONG_REPLY = ("say: one two three four five six seven eight nine ten eleven twelve thirteen "
              "fourteen fifteen sixteen seventeen eighteen nineteen twenty.")


def mic_pcm16(pcm_16k: np.ndarray) -> bytes:
    """Generated 16 kHz test audio as the page would send it: PCM16 at 24 kHz."""
    return speech_fixtures.to_pcm16(resample(pcm_16k, speech_fixtures.RATE_HZ, INPUT_RATE_HZ))


class SimulatedPage:
    """Plays one response in real time (ACK every 100 ms) until the server interrupts it."""

    def __init__(self, client: RealtimeClient, response_id: str) -> None:
        self.client = client
        self.response_id = response_id
        self.started = asyncio.get_running_loop().time()
        self.stopped_at_ms: int | None = None

    def played_ms(self) -> int:
        if self.stopped_at_ms is not None:
            return self.stopped_at_ms
        sent = [e["audio_end_ms"] for e in self.client.of_type(
            "response.output_audio.delta", response_id=self.response_id)]
        elapsed = (asyncio.get_running_loop().time() - self.started) * 1000 - 100
        return int(max(0, min(elapsed, max(sent, default=0))))

    def interrupted(self) -> bool:
        cleared = self.client.of_type("output_audio_buffer.cleared",
                                      response_id=self.response_id)
        cancelled = [e for e in self.client.of_type("response.done")
                     if e["response"]["id"] == self.response_id
                     and e["response"]["status"] == "cancelled"]
        return bool(cleared or cancelled)

    async def run(self) -> None:
        while self.stopped_at_ms is None:
            await asyncio.sleep(0.1)
            if self.interrupted():
                self.stopped_at_ms = self.played_ms()
            await self.client.ack(self.response_id, self.played_ms())


async def stream_mic(client: RealtimeClient, pcm16: bytes) -> None:
    """Append microphone audio in 40 ms frames, in real time."""
    frame = INPUT_RATE_HZ * 2 * FRAME_MS // 1000
    for start in range(0, len(pcm16), frame):
        await client.send({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(pcm16[start:start + frame]).decode()})
        await asyncio.sleep(FRAME_MS / 1000)


async def receive_while(client: RealtimeClient, task: asyncio.Task[Any]) -> None:
    """Keep reading server events until `task` is done."""
    while not task.done():
        await client.drain(0.05)
    await task


async def test_speech_during_playback_interrupts_calibrates_and_becomes_the_next_turn(
    start_server,
) -> None:
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    utterance = speech_fixtures.speech("What time does the museum open tomorrow?")
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=1500, tail_ms=1500))
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        await client.wait_for("session.updated")
        response_id, item_id = await client.prompt(LONG_REPLY)
        await client.wait_for("response.output_audio.delta")
        page = SimulatedPage(client, response_id)
        playing = asyncio.create_task(page.run())
        await receive_while(client, asyncio.create_task(stream_mic(client, mic)))
        started = await client.wait_for("input_audio_buffer.speech_started")
        onset_ms = 1500 + speech_fixtures.active_span_ms(utterance)[0]
        assert onset_ms - 300 - 100 <= started["audio_start_ms"] <= onset_ms
        done = await client.wait_for("response.done",
                                     lambda e: e["response"]["id"] == response_id)
        assert done["response"]["status"] == "cancelled"
        transcript = await client.wait_for(
            "conversation.item.input_audio_transcription.completed", timeout=30)
        assert "museum" in transcript["transcript"].lower()
        heard = await client.heard(item_id, lambda e: e["method"] == "marks")
        await playing
        words = LONG_REPLY.removeprefix("say: ").split()
        assert heard["text"] == " ".join(words[: page.stopped_at_ms // 400])
        next_response = await client.wait_for("response.created",
                                              lambda e: e["response"]["id"] != response_id)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == next_response["response"]["id"])
        turns = [(t.role, t.text, t.interrupted) for t in server.responder.prompts[-1].turns]
        assert turns[-2:] == [("assistant", heard["text"], True),
                              ("user", transcript["transcript"], False)]


async def test_noise_during_playback_does_not_interrupt(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    bursts = speech_fixtures.short_bursts(seed=7, count=8, max_ms=150)
    gaps = [speech_fixtures.silence(300) for _ in bursts]
    noise = np.concatenate([part for pair in zip(gaps, bursts, strict=True) for part in pair])
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        response_id, item_id = await client.prompt("say: one two three four five six seven.")
        await client.wait_for("response.output_audio.delta")
        page = SimulatedPage(client, response_id)
        playing = asyncio.create_task(page.run())
        await receive_while(client, asyncio.create_task(stream_mic(client, mic_pcm16(noise))))
        done = await client.wait_for("response.done",
                                     lambda e: e["response"]["id"] == response_id)
        assert done["response"]["status"] == "completed"
        await asyncio.sleep(0.2)
        page.stopped_at_ms = 2800
        await client.ack(response_id, 2800)
        heard = await client.heard(item_id)
        playing.cancel()
        assert (heard["text"], heard["method"]) == ("one two three four five six seven.", "full")
        assert not client.of_type("input_audio_buffer.speech_started")


async def test_spoken_prompt_is_transcribed_and_answered(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    utterance = speech_fixtures.speech("Tell me about the planets.")
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=800, tail_ms=1200))
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        await receive_while(client, asyncio.create_task(stream_mic(client, mic)))
        await client.wait_for("input_audio_buffer.speech_started")
        stopped = await client.wait_for("input_audio_buffer.speech_stopped")
        committed = await client.wait_for("input_audio_buffer.committed")
        assert committed["item_id"] == stopped["item_id"]
        transcript = await client.wait_for(
            "conversation.item.input_audio_transcription.completed", timeout=30)
        assert "planet" in transcript["transcript"].lower()
        created = await client.wait_for("response.created")
        reply = await client.wait_for(
            "response.output_audio_transcript.delta",
            lambda e: e["response_id"] == created["response"]["id"])
        assert "planet" in reply["delta"].lower()
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == created["response"]["id"])
        turns = [(t.role, t.text) for t in server.responder.prompts[-1].turns]
        assert turns == [("user", transcript["transcript"])]
