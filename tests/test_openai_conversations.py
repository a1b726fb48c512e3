"""A default-settings OpenAI client's whole conversation is OpenAI's GA event set, every event
valid against the `openai` package's typed server-event models (issue 25, failing inputs 3 to
5): a typed turn, a spoken turn under the default server VAD, and a spoken interruption, over
a real server on loopback with real Piper audio and real faster-whisper transcription."""

from __future__ import annotations

import asyncio
import typing

from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from tests import speech_fixtures
from tests.realtime_client import RealtimeClient
from tests.test_server_vad import mic_pcm16, receive_while, stream_mic

SERVER_EVENT = TypeAdapter(RealtimeServerEvent)
GA_TYPES = {member.model_fields["type"].annotation.__args__[0]
            for member in typing.get_args(typing.get_args(RealtimeServerEvent)[0])}
"""Every server event type of OpenAI's GA protocol."""


async def test_a_default_client_gets_valid_ga_events_only(start_server) -> None:
    server = await start_server(tts="piper", calibration="marks")
    planets = mic_pcm16(speech_fixtures.place(
        speech_fixtures.speech("Tell me about the planets."), lead_ms=600, tail_ms=1200))
    museum = mic_pcm16(speech_fixtures.place(
        speech_fixtures.speech("What time does the museum open tomorrow?"),
        lead_ms=1500, tail_ms=1200))
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        await client.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "say: It is sunny."}]}})
        await client.send({"type": "response.create",
                           "response": {"metadata": {"turn": "typed"}}})
        typed = await client.wait_for("response.done", timeout=30)
        await client.drain(2.5)  # its audio plays out (in real time: the client does not ACK)
        await receive_while(client, asyncio.create_task(stream_mic(client, planets)))
        spoken = await client.wait_for(
            "response.created", lambda e: e["response"]["id"] != typed["response"]["id"], 30)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == spoken["response"]["id"])
        await receive_while(client, asyncio.create_task(stream_mic(client, museum)))
        cut = await client.wait_for("response.done",
                                    lambda e: e["response"]["id"] == spoken["response"]["id"],
                                    timeout=30)
        truncated = await client.wait_for("conversation.item.truncated")
        await client.wait_for("response.created", lambda e: e["response"]["id"] not in (
            typed["response"]["id"], spoken["response"]["id"]), 30)
        await client.send({"type": "response.cancel"})
        await client.wait_for("response.done",
                              lambda e: e["response"]["status"] == "cancelled"
                              and e["response"]["id"] != spoken["response"]["id"])
        await client.drain(0.5)
    assert not client.of_type("error")
    assert {e["type"] for e in client.events} <= GA_TYPES
    for event in client.events:
        assert SERVER_EVENT.validate_python(event, strict=True).type == event["type"]
    assert typed["response"]["status"] == "completed"
    assert typed["response"]["metadata"] == {"turn": "typed"}
    assert client.of_type("response.created")[0]["response"]["metadata"] == {"turn": "typed"}
    typed_id = typed["response"]["id"]
    transcripts = [
        typed["response"]["output"][0]["content"][0]["transcript"],
        *[e["item"]["content"][0]["transcript"] for e in client.events
          if e["type"] in ("response.output_item.done", "conversation.item.done")
          and e["item"]["role"] == "assistant"
          and e["item"]["id"] == typed["response"]["output"][0]["id"]],
        *[e["transcript"] for e in client.of_type("response.output_audio_transcript.done",
                                                  response_id=typed_id)]]
    assert transcripts == ["It is sunny."] * 4, transcripts
    completed = client.of_type("conversation.item.input_audio_transcription.completed")
    assert "planet" in completed[0]["transcript"].lower()
    assert all(e["usage"]["type"] == "duration" and e["usage"]["seconds"] > 1
               for e in completed)
    assert (cut["response"]["status"], cut["response"]["status_details"]["reason"]) == (
        "cancelled", "turn_detected")
    assert truncated["item_id"] == cut["response"]["output"][0]["id"]
    assert len(client.of_type("conversation.item.truncated")) == 1
