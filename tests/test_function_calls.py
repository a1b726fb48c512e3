"""Session tools reach an LLM responder, and its function calls reach the client as OpenAI
Realtime function calls (issue 25; issue 27's tool-call markup): streamed `tool_calls` and
markup the model writes in its content instead (`<tool_call>{...}</tool_call>`, a bare
`{"name": ..., "arguments": ...}`) become `function_call` items, never spoken; the client's
`function_call_output` and `response.create` continue the conversation.

The LLM is the recording proxy's scripted stream (tests/llm_proxy.py), over a real server on
loopback with Piper."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from server.realtime.session import Session
from server.responders.prompt import ConversationTurn, Prompt
from server.responders.tools import (
    StreamedToolCalls,
    ToolCall,
    ToolCallMarkup,
    chat_tool_choice,
    chat_tools,
)
from tests.llm_proxy import RecordingProxy
from tests.realtime_client import RealtimeClient
from tests.test_llm_stream_faults import NO_UPSTREAM, scripted_server

SERVER_EVENT = TypeAdapter(RealtimeServerEvent)
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}

MARKUP = [
    # (content as written, its text without the calls, the calls' (name, arguments))
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
     "", [("get_weather", {"city": "Paris"})]),
    ('Let me check. <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}'
     "</tool_call>", "Let me check. ", [("get_weather", {"city": "Oslo"})]),
    ('{"name": "get_weather", "parameters": {"city": "Rome"}}', "",
     [("get_weather", {"city": "Rome"})]),
    ('Checking.\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Lima\\"}"}', "Checking.\n",
     [("get_weather", {"city": "Lima"})]),
    ('<function_call>{"name": "get_weather", "arguments": {}}</function_call> Done.', " Done.",
     [("get_weather", {})]),
    ('{"name": "launch_rocket", "arguments": {}}', '{"name": "launch_rocket", "arguments": {}}',
     []),
    ("If 3 < 5 and {a} holds, <b>bold</b> stays.", "If 3 < 5 and {a} holds, <b>bold</b> stays.",
     []),
    ('Unfinished <tool_call>{"name": "get_weather"', 'Unfinished <tool_call>{"name": "get_weather"',
     []),
]


def pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start:start + size]


@pytest.mark.parametrize(("written", "text", "calls"), MARKUP)
@pytest.mark.parametrize("size", [1, 3, 1000])
def test_tool_call_markup_becomes_calls_however_it_streams(
        written: str, text: str, calls: list[tuple[str, dict[str, Any]]], size: int) -> None:
    markup = ToolCallMarkup(["get_weather"])
    out = "".join(markup.feed(piece) for piece in pieces(written, size)) + markup.flush()
    assert out == text
    assert [(call.name, json.loads(call.arguments)) for call in markup.calls] == calls
    assert all(call.call_id.startswith("call_") for call in markup.calls)


def test_streamed_tool_call_pieces_join_by_index() -> None:
    streamed = StreamedToolCalls()
    streamed.feed([{"index": 0, "id": "call_a", "type": "function",
                    "function": {"name": "get_weather", "arguments": ""}}])
    streamed.feed([{"index": 0, "function": {"arguments": '{"city": '}},
                   {"index": 1, "id": "call_b", "function": {"name": "get_time",
                                                             "arguments": "{}"}}])
    streamed.feed([{"index": 0, "function": {"arguments": '"Paris"}'}}])
    assert streamed.calls() == [
        ToolCall("call_a", "get_weather", '{"city": "Paris"}', ('{"city": ', '"Paris"}')),
        ToolCall("call_b", "get_time", "{}", ("{}",))]


def test_realtime_tools_and_calls_in_the_chat_completions_shape() -> None:
    assert chat_tools([WEATHER, {"type": "mcp", "server_label": "x"}]) == [{
        "type": "function", "function": {"name": "get_weather",
                                         "description": "Weather in a city.",
                                         "parameters": WEATHER["parameters"]}}]
    assert chat_tool_choice("required") == "required"
    assert chat_tool_choice({"type": "function", "name": "get_weather"}) == {
        "type": "function", "function": {"name": "get_weather"}}
    call = ToolCall("call_a", "get_weather", '{"city": "Paris"}')
    prompt = Prompt("", (ConversationTurn("user", "Weather in Paris?"),
                         ConversationTurn("assistant", "", tool_calls=(call,)),
                         ConversationTurn("tool", "Sunny", call_id="call_a")))
    assert prompt.as_messages() == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": "call_a", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "content": "Sunny", "tool_call_id": "call_a"}]


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    with RecordingProxy(NO_UPSTREAM) as recording:
        recording.mode = "script"
        yield recording


STREAMED_CALL = [
    {"tool_calls": [{"index": 0, "id": "call_w1", "type": "function",
                     "function": {"name": "get_weather", "arguments": ""}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
]
MARKUP_CALL = ["<tool", '_call>{"name": "get_w', 'eather", "arguments": {"city": "Paris"}}',
               "</tool_call>"]


@pytest.mark.parametrize("script", [STREAMED_CALL, MARKUP_CALL], ids=["streamed", "markup"])
async def test_a_function_call_round_trip(start_server, proxy: RecordingProxy,
                                          script: list[Any]) -> None:
    """The model calls get_weather (streamed, or as markup in its content); the client gets
    OpenAI's function-call events, answers with a function_call_output and response.create,
    and the model's next request holds the call and its output; nothing of the markup is
    spoken or kept as text."""
    proxy.script = script
    server = await scripted_server(start_server, proxy)
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        await client.send({"type": "session.update", "session": {
            "type": "realtime", "tools": [WEATHER], "tool_choice": "auto"}})
        await client.wait_for("session.updated")
        response_id, _ = await client.prompt("What is the weather in Paris?")
        done = (await client.wait_for("response.done",
                                      lambda e: e["response"]["id"] == response_id, 60))
        output = done["response"]["output"]
        assert done["response"]["status"] == "completed"
        [call] = [item for item in output if item["type"] == "function_call"]
        assert (call["name"], json.loads(call["arguments"]), call["status"]) == (
            "get_weather", {"city": "Paris"}, "completed")
        deltas = client.of_type("response.function_call_arguments.delta", item_id=call["id"])
        assert "".join(e["delta"] for e in deltas) == call["arguments"]
        [args_done] = client.of_type("response.function_call_arguments.done",
                                     item_id=call["id"])
        assert (args_done["call_id"], args_done["name"], args_done["arguments"]) == (
            call["call_id"], "get_weather", call["arguments"])
        assert client.of_type("response.output_audio.delta", response_id=response_id) == []
        assert "".join(e["delta"] for e in client.of_type(
            "response.output_audio_transcript.delta", response_id=response_id)) == ""

        proxy.script = ["It is sunny in Paris, ", "twenty one degrees."]
        await client.send({"type": "conversation.item.create", "item": {
            "type": "function_call_output", "call_id": call["call_id"],
            "output": '{"forecast": "sunny, 21 C"}'}})
        await client.send({"type": "response.create"})
        created = await client.wait_for("response.created",
                                        lambda e: e["response"]["id"] != response_id)
        second = await client.wait_for(
            "response.done", lambda e: e["response"]["id"] == created["response"]["id"], 60)
        assert second["response"]["output"][0]["content"][0]["transcript"] == (
            "It is sunny in Paris, twenty one degrees.")
        assert client.of_type("response.output_audio.delta",
                              response_id=created["response"]["id"])
        await client.drain(0.3)
    assert client.of_type("error") == []
    for event in client.events:
        SERVER_EVENT.validate_python(event)
    first, follow_up = (request.body for request in proxy.wait_requests(2))
    assert first["tools"] == chat_tools([WEATHER]) and first["tool_choice"] == "auto"
    assert follow_up["messages"][-2:] == [
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": call["call_id"], "type": "function",
            "function": {"name": "get_weather", "arguments": call["arguments"]}}]},
        {"role": "tool", "content": '{"forecast": "sunny, 21 C"}',
         "tool_call_id": call["call_id"]}]


async def test_without_tools_no_tools_are_sent_and_markup_stays_unspoken(
        start_server, proxy: RecordingProxy) -> None:
    """No session tools: the model is offered none, and markup it writes anyway is no call
    (the speech layer keeps it silent, issue 27)."""
    proxy.script = ["Sure. ", *MARKUP_CALL]
    server = await scripted_server(start_server, proxy)
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        response_id, _ = await client.prompt("What is the weather in Paris?")
        done = await client.wait_for("response.done",
                                     lambda e: e["response"]["id"] == response_id, 60)
    assert [item["type"] for item in done["response"]["output"]] == ["message"]
    assert "tools" not in proxy.wait_requests(1)[0].body
    assert client.of_type("error") == []


def create(session: Session, item: dict[str, Any]) -> list[dict[str, Any]]:
    """Send one `conversation.item.create` of `item`; return the events it produced."""
    session.receive(json.dumps({"type": "conversation.item.create", "item": item}))
    return session.take_events()


def test_function_items_a_client_creates_reach_the_prompt_and_bad_ones_are_refused() -> None:
    """A framework that keeps its own chat context (LiveKit) creates the `function_call` item
    too; with its output, the model gets both as OpenAI tool messages. A function item with a
    missing, empty, mistyped or unknown field is one `error` that adds nothing."""
    session = Session()
    create(session, {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "Weather in Oslo?"}]})
    made = create(session, {"type": "function_call", "id": "item_call", "call_id": "call_o",
                            "name": "get_weather", "arguments": '{"city": "Oslo"}'})
    assert made[0]["item"] == {"id": "item_call", "object": "realtime.item",
                               "type": "function_call", "status": "completed",
                               "call_id": "call_o", "name": "get_weather",
                               "arguments": '{"city": "Oslo"}'}
    create(session, {"type": "function_call_output", "call_id": "call_o", "output": "Snow"})
    for bad, param in (
            ({"type": "function_call_output", "output": "x"}, "item.call_id"),
            ({"type": "function_call_output", "call_id": "", "output": "x"}, "item.call_id"),
            ({"type": "function_call_output", "call_id": "c", "output": 3}, "item.output"),
            ({"type": "function_call_output", "call_id": "c", "output": "x", "role": "tool"},
             "item.role"),
            ({"type": "function_call", "call_id": "c", "arguments": "{}"}, "item.name"),
            ({"type": "function_call_output", "call_id": "c" * 65, "output": "x"},
             "item.call_id")):
        [error] = create(session, bad)
        assert (error["type"], error["error"]["param"]) == ("error", param), bad
    session.receive(json.dumps({"type": "response.create"}))
    prompt = session.generation.build_prompt(session.current_response_id)
    assert prompt is not None
    assert prompt.as_messages()[1:] == [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": "call_o", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "content": "Snow", "tool_call_id": "call_o"}]


def test_response_create_tools_override_the_sessions_for_that_response() -> None:
    """`response.create`'s `tools` and `tool_choice` apply to that response only, as OpenAI's
    do (LiveKit's `generate_reply(tools=..., tool_choice=...)`); without them the session's
    are offered."""
    session = Session()
    session.receive(json.dumps({"type": "session.update", "session": {
        "type": "realtime", "tools": [WEATHER], "tool_choice": "required"}}))
    offered = []
    for response in ({"tools": [], "tool_choice": "none"},
                     {"tool_choice": {"type": "function", "name": "get_weather"}}, None):
        event: dict[str, Any] = {"type": "response.create"}
        if response is not None:
            event["response"] = response
        session.receive(json.dumps(event))
        prompt = session.generation.build_prompt(session.current_response_id)
        assert prompt is not None
        offered.append((prompt.tools, prompt.tool_choice))
        session.receive(json.dumps({"type": "response.cancel"}))
    assert "error" not in [e["type"] for e in session.take_events()]
    assert offered == [
        ((), "none"),
        (tuple(chat_tools([WEATHER])), {"type": "function", "function": {"name": "get_weather"}}),
        (tuple(chat_tools([WEATHER])), "required")]
