"""OpenAI's whole GA session schema: every field OpenAI accepts is applied or reported back,
only what OpenAI refuses is an error (naming every bad field at once), and the session updates
the real client frameworks send on connect are accepted (issue 25, failing inputs 1 and 2)."""

from __future__ import annotations

import json
import typing
from typing import Any

from openai.types.realtime.realtime_audio_config_input_param import (
    RealtimeAudioConfigInputParam,
)
from openai.types.realtime.realtime_audio_config_output_param import (
    RealtimeAudioConfigOutputParam,
)
from openai.types.realtime.realtime_session_create_request_param import (
    RealtimeSessionCreateRequestParam,
)
from openai.types.realtime.session_updated_event import SessionUpdatedEvent

from server.realtime.session import Session
from tests.realtime_client import RealtimeClient

EXAMPLES: dict[str, Any] = {
    "type": "realtime",
    "instructions": "Answer in one sentence.",
    "include": ["item.input_audio_transcription.logprobs"],
    "max_output_tokens": 200,
    "model": "gpt-realtime",
    "output_modalities": ["audio"],
    "parallel_tool_calls": False,
    "prompt": {"id": "pmpt_123", "variables": {"city": "Paris"}},
    "reasoning": {"effort": "low"},
    "tool_choice": "auto",
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {}}}],
    "tracing": {"workflow_name": "demo", "group_id": "g1", "metadata": {"a": "b"}},
    "truncation": {"type": "retention_ratio", "retention_ratio": 0.5},
}
"""A valid value of every top-level field of OpenAI's GA session object but `audio`."""

INPUT_EXAMPLES: dict[str, Any] = {
    "format": {"type": "audio/pcm", "rate": 24000},
    "noise_reduction": {"type": "far_field"},
    "transcription": {"model": "gpt-4o-transcribe", "language": "en", "prompt": "tides"},
    "turn_detection": {"type": "server_vad", "threshold": 0.6, "silence_duration_ms": 400},
}
OUTPUT_EXAMPLES: dict[str, Any] = {
    "format": {"type": "audio/pcm", "rate": 24000}, "speed": 1.25, "voice": "marin",
}

FRAMEWORK_UPDATES: dict[str, dict[str, Any]] = {
    "@openai/agents-realtime 0.20": {
        "type": "realtime", "instructions": "You are a helpful assistant.", "tracing": "auto",
        "output_modalities": ["audio"], "model": "gpt-realtime",
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                            "noise_reduction": None, "transcription": None,
                            "turn_detection": {"type": "server_vad"}},
                  "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "alloy",
                             "speed": 1}},
        "tools": [],
    },
    "openai-agents 0.24": {
        "type": "realtime", "model": "gpt-realtime", "instructions": "Be brief.",
        "tools": [], "tool_choice": "auto", "output_modalities": ["audio"],
        "audio": {"output": {"voice": "ash"}},
    },
    "livekit-plugins-openai 1.8.9": {
        "type": "realtime", "model": "gpt-realtime", "tool_choice": "auto",
        "max_output_tokens": "inf", "tracing": None, "output_modalities": ["audio"],
        "audio": {"output": {"voice": "marin", "speed": 1.0},
                  "input": {"transcription": {"model": "gpt-4o-mini-transcribe"},
                            "turn_detection": {"type": "server_vad", "threshold": 0.5,
                                               "prefix_padding_ms": 300,
                                               "silence_duration_ms": 500,
                                               "create_response": True,
                                               "interrupt_response": True}}},
    },
    "pipecat-ai 1.14": {"type": "realtime", "instructions": "Hi.", "tools": []},
    "openai SDK": {"type": "realtime", "audio": {"output": {"voice": "alloy"}}},
}
"""The `session` objects frameworks send on connect (issue 25's failing inputs; semantic_vad
aside, which the turn-detection parser owns)."""


def update(session: Session, fields: dict[str, Any]) -> dict[str, Any]:
    """Apply one `session.update`; return the single event it produced."""
    session.receive(json.dumps({"type": "session.update", "event_id": "e1",
                                "session": fields}))
    events = session.take_events()
    assert len(events) == 1, events
    return events[0]


def test_every_field_of_openais_schema_is_accepted_and_reported() -> None:
    """100 % of the GA session fields (top level, audio input and output) are accepted, one at
    a time and all at once; every one is reported back in `session.updated`, which validates
    against the `openai` package's model. New fields in the package make this test fail until
    they get an example (and a decision)."""
    schemas = [(RealtimeSessionCreateRequestParam, {**EXAMPLES, "audio": None}),
               (RealtimeAudioConfigInputParam, INPUT_EXAMPLES),
               (RealtimeAudioConfigOutputParam, OUTPUT_EXAMPLES)]
    for schema, examples in schemas:
        assert set(typing.get_type_hints(schema)) == set(examples), schema.__name__
    singles = [{key: value} for key, value in EXAMPLES.items()]
    singles += [{"audio": {"input": {key: value}}} for key, value in INPUT_EXAMPLES.items()]
    singles += [{"audio": {"output": {key: value}}} for key, value in OUTPUT_EXAMPLES.items()]
    everything = {**EXAMPLES, "audio": {"input": INPUT_EXAMPLES, "output": OUTPUT_EXAMPLES}}
    for fields in [*singles, everything]:
        event = update(Session(), fields)
        assert event["type"] == "session.updated", (fields, event)
        SessionUpdatedEvent.model_validate(event)
    reported = update(Session(), everything)["session"]
    for key in ("instructions", "include", "max_output_tokens", "prompt", "reasoning",
                "tool_choice", "tools", "tracing", "truncation", "parallel_tool_calls"):
        assert reported[key] == EXAMPLES[key], key
    assert reported["audio"]["input"]["noise_reduction"] == {"type": "far_field"}
    assert reported["audio"]["input"]["transcription"] == INPUT_EXAMPLES["transcription"]
    assert reported["audio"]["input"]["turn_detection"]["threshold"] == 0.6
    assert reported["audio"]["output"]["voice"] == Session().config.voice
    assert reported["audio"]["output"]["speed"] == 1.0
    assert reported["model"] == "duplex-demo"


def test_what_openai_refuses_is_one_error_naming_every_field_and_changes_nothing() -> None:
    session = Session()
    before = session.settings.wire()
    event = update(session, {
        "instructions": "Never applied.", "tracing": "yes", "max_output_tokens": 0,
        "audio": {"output": {"speed": 3, "colour": "red"},
                  "input": {"noise_reduction": {"type": "underwater"}}},
        "tool_choice": 7,
    })
    assert event["type"] == "error"
    error = event["error"]
    assert (error["type"], error["event_id"]) == ("invalid_request_error", "e1")
    for param in ("session.tracing", "session.max_output_tokens", "session.audio.output.speed",
                  "session.audio.output.colour", "session.audio.input.noise_reduction.type",
                  "session.tool_choice"):
        assert f"'{param}'" in error["message"], (param, error["message"])
    assert error["param"] in error["message"]
    assert session.settings.wire() == before


def test_g711_formats_are_accepted_and_pcm_at_another_rate_is_refused() -> None:
    """G.711 (`audio/pcmu`, `audio/pcma`, valid for OpenAI) is applied and reported, for input
    and output apart (`tests/test_g711.py` speaks it); `audio/pcm` at a rate OpenAI refuses
    too gets a clear error naming the field."""
    for kind in ("audio/pcmu", "audio/pcma"):
        event = update(Session(), {"audio": {"input": {"format": {"type": kind}}}})
        audio = event["session"]["audio"]
        assert (audio["input"]["format"], audio["output"]["format"]) == (
            {"type": kind}, {"type": "audio/pcm", "rate": 24000})
    event = update(Session(), {"audio": {"output": {"format": {"type": "audio/pcm",
                                                               "rate": 16000}}}})
    assert event["error"]["param"] == "session.audio.output.format", event


async def test_the_updates_frameworks_send_on_connect_are_accepted(start_server) -> None:
    """Each framework's own session setup gets `session.updated` and no `error` over a real
    server; instructions apply, a voice it names is reported as the server's, and server VAD
    is on after an update that also carries `noise_reduction: null` (Agents JS)."""
    server = await start_server(tts="uniform")
    for name, fields in FRAMEWORK_UPDATES.items():
        async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
            await client.send({"type": "session.update", "session": fields})
            updated = (await client.wait_for("session.updated"))["session"]
            await client.drain(0.2)
            assert not client.of_type("error"), (name, client.of_type("error"))
            if "instructions" in fields:
                assert updated["instructions"] == fields["instructions"], name
            assert updated["audio"]["output"]["voice"] == "joe", name
            detection = fields.get("audio", {}).get("input", {}).get("turn_detection")
            if detection is not None:
                assert updated["audio"]["input"]["turn_detection"]["type"] == "server_vad"
            SessionUpdatedEvent.model_validate(client.of_type("session.updated")[-1])


async def test_response_create_accepts_openais_fields_and_echoes_metadata(start_server) -> None:
    """`response.create` with OpenAI's response fields (LiveKit's `metadata` among them) is
    accepted; `response.created` and `response.done` echo the metadata."""
    server = await start_server(tts="uniform", lead_ms=60_000)
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        await client.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "say: hi there"}]}})
        await client.send({"type": "response.create", "response": {
            "metadata": {"client_event_id": "lk_1"}, "conversation": "auto",
            "output_modalities": ["audio"], "tool_choice": "none", "tools": [],
            "max_output_tokens": "inf", "instructions": "Be brief."}})
        created = await client.wait_for("response.created")
        done = await client.wait_for("response.done")
        assert not client.of_type("error")
        for event in (created, done):
            assert event["response"]["metadata"] == {"client_event_id": "lk_1"}
        await client.send({"type": "response.create", "response": {"metadata": {"k": "v" * 600},
                                                                   "bogus": 1}})
        error = (await client.wait_for("error"))["error"]
        assert "'response.bogus'" in error["message"]


def test_a_system_item_mid_conversation_is_an_instruction_where_it_stands() -> None:
    """Pipecat appends `role: "system"` items mid-conversation: accepted (as OpenAI does), and
    the model gets them as system messages at their place in the prompt."""
    session = Session()
    for role, text in (("user", "Hello."), ("system", "Answer in French."), ("user", "Tides?")):
        session.receive(json.dumps({"type": "conversation.item.create", "item": {
            "type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}}))
    events = session.take_events()
    assert "error" not in [e["type"] for e in events]
    session.receive(json.dumps({"type": "response.create"}))
    response_id = session.current_response_id
    prompt = session.generation.build_prompt(response_id)
    assert prompt.as_messages()[1:] == [
        {"role": "user", "content": "Hello."}, {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Tides?"}]


def test_max_output_tokens_reaches_the_responders_prompt() -> None:
    """The session's `max_output_tokens` bounds the reply of a responder that counts tokens
    (the LLM responder asks for at most that many); "inf" leaves the server's own bound."""
    session = Session()
    limits = []
    for value in (25, "inf"):
        update(session, {"max_output_tokens": value})
        session.receive(json.dumps({"type": "response.create"}))
        limits.append(session.generation.build_prompt(session.current_response_id).max_output_tokens)
        session.receive(json.dumps({"type": "response.cancel"}))
        session.take_events()
    assert limits == [25, None]
