"""`livekit-plugins-openai`'s `RealtimeModel` (livekit-agents 1.x, the `clients` extra) holds a
whole conversation with a real server on loopback, every setting at its default (issue 25),
driven without a LiveKit room through its `RealtimeSession` API as `AgentSession` drives it:
its own session.update with 0 `error` events, a text turn (`update_chat_ctx` +
`generate_reply`) with audio, a spoken turn through `push_audio` (real Piper audio of a question;
the server's VAD and faster-whisper), an interruption through `interrupt()` + `truncate()` at
the position the "player" reached, kept exactly there by the server, and a second turn whose
prompt knows the cut; and its tool path, with an LLM behind the server."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import llm
from livekit.plugins import openai as lk_openai

from server.realtime.openai_schema import response_errors
from tests import speech_fixtures
from tests.llm_proxy import RecordingProxy
from tests.test_agents_js import QUESTION, heard_prefix, recalled
from tests.test_function_calls import STREAMED_CALL
from tests.test_llm_stream_faults import NO_UPSTREAM, scripted_server
from tests.test_server_vad import mic_pcm16

RATE_HZ = 24_000
CHUNK_MS = 40
INTERRUPT_AFTER_MS = 1200
TURN_TIMEOUT_S = 60.0
LONG_REPLY = ("say: The first planet is Mercury, the smallest and the closest to the sun. "
              "Venus comes next, wrapped in thick clouds of acid. Then our own Earth, the only "
              "world we know with life.")


class LiveKitClient:
    """A LiveKit `RealtimeSession` with every server and client event it saw, and its errors."""

    def __init__(self, base_url: str) -> None:
        self.model = lk_openai.realtime.RealtimeModel(base_url=base_url, api_key="unused")
        self.session = self.model.session()
        self.received: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.errors: list[llm.RealtimeModelError] = []
        self.generations: list[llm.GenerationCreatedEvent] = []
        self._changed = asyncio.Event()
        self.session.on("openai_server_event_received", self._on_received)
        self.session.on("openai_client_event_queued", self.sent.append)
        self.session.on("error", self.errors.append)
        self.session.on("generation_created", self.generations.append)

    def _on_received(self, event: dict[str, Any]) -> None:
        self.received.append(event)
        self._changed.set()

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        """Received server events of `event_type`, in order."""
        return [event for event in self.received if event["type"] == event_type]

    async def wait_for(self, event_type: str, start: int = 0,
                       timeout_s: float = TURN_TIMEOUT_S) -> dict[str, Any]:
        """The first server event of `event_type` at index `start` or later, waiting for it.

        Raises:
            TimeoutError: none within `timeout_s`.
        """
        async with asyncio.timeout(timeout_s):
            while True:
                for event in self.received[start:]:
                    if event["type"] == event_type:
                        return event
                self._changed.clear()
                await self._changed.wait()

    async def say(self, text: str) -> llm.GenerationCreatedEvent:
        """A typed user turn as `AgentSession` sends one: the message added to the chat
        context, then `generate_reply()`; returns its generation once created."""
        chat_ctx = self.session.chat_ctx.copy()
        chat_ctx.add_message(role="user", content=text)
        await self.session.update_chat_ctx(chat_ctx)
        return await self.session.generate_reply()


async def play(generation: llm.GenerationCreatedEvent,
               stop_after_ms: float | None = None) -> tuple[str, str, float]:
    """Play a generation's first message as a speaker would: (message id, its text, audio ms
    played). With `stop_after_ms`, stop once that much time has passed since its first audio
    frame arrived (the playback position a player reports when interrupted)."""
    message = await anext(aiter(generation.message_stream))
    text_task = asyncio.create_task(_join(message.text_stream))
    played_ms = 0.0
    first_s: float | None = None
    async for frame in message.audio_stream:
        first_s = first_s or time.monotonic()
        played_ms += frame.samples_per_channel * 1000 / frame.sample_rate
        if stop_after_ms is not None and (time.monotonic() - first_s) * 1000 >= stop_after_ms:
            break
    if stop_after_ms is not None:
        assert first_s is not None
        return message.message_id, "", min(played_ms, (time.monotonic() - first_s) * 1000)
    return message.message_id, await text_task, played_ms


async def _join(stream: Any) -> str:
    return "".join([piece async for piece in stream])


async def test_livekit_realtime_model_converses_and_interrupts(start_server) -> None:
    server = await start_server(tts="piper", calibration="marks")
    question = np.frombuffer(mic_pcm16(speech_fixtures.place(
        speech_fixtures.speech(QUESTION), lead_ms=300, tail_ms=1500)),
        dtype=np.int16)
    client = LiveKitClient(server.http_url + "/v1")
    try:
        await client.wait_for("session.updated")
        await asyncio.sleep(0.5)

        _, text, audio_ms = await play(await client.say("say: It is sunny today."))
        assert text == "It is sunny today."
        assert audio_ms > 800
        await asyncio.sleep(1.0)  # the lead the server sent ahead of real time plays out

        samples = RATE_HZ * CHUNK_MS // 1000
        start = len(client.received)
        started = time.monotonic()
        for index, offset in enumerate(range(0, len(question), samples)):
            chunk = question[offset:offset + samples]
            client.session.push_audio(rtc.AudioFrame(chunk.tobytes(), RATE_HZ, 1, len(chunk)))
            await asyncio.sleep(max(0.0, started + (index + 1) * CHUNK_MS / 1000
                                    - time.monotonic()))
        await client.wait_for("response.created", start)
        _, spoken_text, spoken_ms = await play(client.generations[-1])
        assert spoken_text == ('I finished my last answer; it ended with "It is sunny today.". '
                               "Ask me about something else whenever you like.")
        assert spoken_ms > 2000

        generation = await client.say(LONG_REPLY)
        message_id, _, played_ms = await play(generation, stop_after_ms=INTERRUPT_AFTER_MS)
        start = len(client.received)
        client.session.interrupt()
        client.session.truncate(message_id=message_id, modalities=["audio"],
                                audio_end_ms=int(played_ms))
        await client.wait_for("conversation.item.truncated", start)
        await asyncio.sleep(0.5)
        second = await client.say("Where did you stop?")
        _, second_text, _ = await play(second)
    finally:
        await client.session.aclose()
        await client.model.aclose()

    assert client.errors == []
    assert client.of_type("error") == []
    update = next(e for e in client.sent if e["type"] == "session.update")["session"]
    assert update["audio"]["output"]["voice"] == "marin"
    heard = client.of_type("conversation.item.input_audio_transcription.completed")
    assert "where did you stop" in heard[0]["transcript"].lower()

    [truncate] = [e for e in client.sent if e["type"] == "conversation.item.truncate"]
    [truncated] = client.of_type("conversation.item.truncated")
    assert (truncated["item_id"], truncated["audio_end_ms"]) == (
        message_id, truncate["audio_end_ms"])
    cut_response = next(e["response"] for e in client.of_type("response.done")
                        if e["response"]["output"][0]["id"] == message_id)
    assert cut_response["status"] == "cancelled"
    full = "".join(e["delta"] for e in client.of_type("response.output_audio_transcript.delta")
                   if e["item_id"] == message_id)
    marks = [mark for e in client.of_type("response.output_audio.delta")
             if e["item_id"] == message_id for mark in e.get("marks") or []]
    expected = heard_prefix(full, marks, truncate["audio_end_ms"])
    assert expected.startswith("The first")
    assert second_text.startswith(recalled(expected))
    assert server.responder is not None
    prompt = server.responder.prompts[-1]
    cut_turn = prompt.turns[-2]
    assert (cut_turn.role, cut_turn.text, cut_turn.interrupted) == ("assistant", expected, True)
    assert {"role": "system", "content": prompt.interruption_note.replace(
        "{heard}", expected)} in prompt.as_messages()


def test_the_response_object_of_generate_reply_is_accepted() -> None:
    """LiveKit's `generate_reply()` sends `instructions: null` when it has none: a null field
    is not given (OpenAI takes it so); a wrong type is still refused."""
    assert response_errors({"instructions": None,
                            "metadata": {"client_event_id": "response_create_1"}}) == []
    [error] = response_errors({"instructions": 3, "metadata": None})
    assert (error.param, error.code) == ("response.instructions", "invalid_type")


async def test_livekit_runs_the_tool_the_model_calls(start_server) -> None:
    """LiveKit's tool path with an LLM behind the server (the recording proxy's scripted
    stream): `update_tools` offers its function tool, the model's call arrives on the
    generation's `function_stream`, its output goes back as `AgentSession` sends it (the chat
    context with a `FunctionCallOutput`, then `generate_reply()`), and the answer is spoken;
    0 `error` events."""

    @llm.function_tool
    async def get_weather(city: str) -> str:
        """The weather forecast for a city."""
        return f"Sunny and 21 degrees in {city}."

    with RecordingProxy(NO_UPSTREAM) as proxy:
        proxy.mode = "script"
        proxy.scripts = [STREAMED_CALL, ["It is sunny in Paris, ", "twenty one degrees."]]
        server = await scripted_server(start_server, proxy)
        client = LiveKitClient(server.http_url + "/v1")
        try:
            await client.wait_for("session.updated")
            await client.session.update_tools([get_weather])
            generation = await client.say("What is the weather in Paris?")
            [call] = [call async for call in generation.function_stream]
            output = await get_weather(**json.loads(call.arguments))
            chat_ctx = client.session.chat_ctx.copy()
            chat_ctx.items.append(llm.FunctionCallOutput(
                call_id=call.call_id, name=call.name, output=output, is_error=False))
            await client.session.update_chat_ctx(chat_ctx)
            _, answer, audio_ms = await play(await client.session.generate_reply())
        finally:
            await client.session.aclose()
            await client.model.aclose()
        requests = [request.body for request in proxy.wait_requests(2)]
    assert client.errors == []
    assert client.of_type("error") == []
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    assert [tool["function"]["name"] for tool in requests[0]["tools"]] == ["get_weather"]
    assert requests[1]["messages"][-2:] == [
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": call.call_id, "type": "function",
            "function": {"name": "get_weather", "arguments": call.arguments}}]},
        {"role": "tool", "content": output, "tool_call_id": call.call_id}]
    assert answer == "It is sunny in Paris, twenty one degrees."
    assert audio_ms > 1000
