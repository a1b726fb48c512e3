"""The OpenAI Agents JS SDK (`@openai/agents-realtime`, pinned in tests/agents_js/) holds a
whole conversation with a real server on loopback, every setting at its default (issue 25):
its own session setup with 0 `error` events, a text turn with audio, a spoken turn through
`session.sendAudio()` (real Piper audio of a question, the server's VAD and faster-whisper), an
interruption through `session.interrupt()` whose cut the server keeps exactly where the SDK's
truncate said, and a second turn whose prompt knows the cut; and its tool path, with an LLM
behind the server.

The SDK runs in node (tests/agents_js/conversation.mjs and tools.mjs describe the steps,
session_log.mjs the log)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from server.responders.demo import QUOTED_WORDS
from tests import speech_fixtures
from tests.llm_proxy import RecordingProxy
from tests.node_clients import NodeLog, run_script
from tests.test_function_calls import STREAMED_CALL
from tests.test_llm_stream_faults import NO_UPSTREAM, scripted_server
from tests.test_server_vad import mic_pcm16

SCRIPT_TIMEOUT_S = 180.0
QUESTION = "Where did you stop?"
"""The spoken question: the demo responder answers it from the heard text of its last reply
(short, unlike its topics)."""


def heard_prefix(text: str, marks: list[dict[str, Any]], audio_end_ms: int) -> str:
    """The written prefix of `text` that audio played up to `audio_end_ms` proves heard: up to
    the end of the last word whose mark ended by then (marks: the audio deltas' word marks,
    `end_ms` on the item's audio clock, `char_end` in code points)."""
    ends = [mark["char_end"] for mark in marks if mark["end_ms"] <= audio_end_ms]
    return text[:max(ends, default=0)]


def recalled(heard: str) -> str:
    """How the demo responder's answer to "Where did you stop?" begins after a reply of which
    `heard` was heard: its last QUOTED_WORDS words quoted."""
    words = heard.split()
    tail = " ".join(words[-QUOTED_WORDS:])
    return f'I was cut off after "{"... " if len(words) > QUOTED_WORDS else ""}{tail}"'


def reply_of(log: NodeLog, response_id: str) -> tuple[str, list[dict[str, Any]], float]:
    """(transcript, word marks, audio ms) the SDK received for `response_id`: the transcript
    from its deltas, the marks and the audio length (24 kHz PCM16) from its audio deltas."""
    transcript = "".join(e["delta"] for e in log.of_type("response.output_audio_transcript.delta")
                         if e["response_id"] == response_id)
    audio = [e for e in log.of_type("response.output_audio.delta")
             if e["response_id"] == response_id]
    marks = [mark for e in audio for mark in e.get("marks") or []]
    audio_ms = sum(len(e["delta"]) * 3 / 4 / 48 for e in audio)
    return transcript, marks, audio_ms


async def test_agents_js_default_session_converses_and_interrupts(
        start_server, tmp_path: Path) -> None:
    server = await start_server(tts="piper", calibration="marks")
    question = tmp_path / "question.pcm"
    question.write_bytes(mic_pcm16(speech_fixtures.place(
        speech_fixtures.speech(QUESTION), lead_ms=300, tail_ms=300)))
    log = await run_script("agents_js", "conversation.mjs", server.ws_url, str(question),
                           timeout_s=SCRIPT_TIMEOUT_S)
    assert log.returncode == 0, (log.records[-3:], log.stderr)
    assert [name for name, _ in log.steps] == [
        "connect", "text", "spoken", "interrupt", "second"]
    assert log.errors == []
    assert log.of_type("error") == []

    # Its own session setup applied whole: its instructions, its semantic_vad.
    # It sends its settings and its `tracing` in two updates, in either order.
    update = next(u["session"] for u in log.sent_of_type("session.update")
                  if "audio" in u["session"])
    assert update["audio"]["input"]["noise_reduction"] is None
    assert any(u["session"].get("tracing") == "auto" for u in log.sent_of_type("session.update"))
    session = log.of_type("session.updated")[-1]["session"]
    assert session["instructions"] == "You are a helpful voice assistant."
    assert session["audio"]["input"]["turn_detection"]["type"] == "semantic_vad"

    done = log.of_type("response.done")
    assert len(done) == 4, [e["response"]["status"] for e in done]
    text, spoken, interrupted, second = (e["response"] for e in done)

    assert text["status"] == "completed"
    transcript, _, audio_ms = reply_of(log, text["id"])
    assert transcript == "It is sunny today."
    assert text["output"][0]["content"][0]["transcript"] == transcript
    assert audio_ms > 800

    heard_question = log.of_type("conversation.item.input_audio_transcription.completed")
    assert len(heard_question) == 1
    assert "where did you stop" in heard_question[0]["transcript"].lower()
    assert spoken["status"] == "completed"
    assert spoken["output"][0]["content"][0]["transcript"] == (
        'I finished my last answer; it ended with "It is sunny today.". '
        "Ask me about something else whenever you like.")
    assert reply_of(log, spoken["id"])[2] > 2000

    assert interrupted["status"] == "cancelled"
    item_id = interrupted["output"][0]["id"]
    [truncate] = log.sent_of_type("conversation.item.truncate")
    assert truncate["item_id"] == item_id
    full, marks, _ = reply_of(log, interrupted["id"])
    expected = heard_prefix(full, marks, truncate["audio_end_ms"])
    assert expected.startswith("The first")
    [truncated] = log.of_type("conversation.item.truncated")
    assert (truncated["item_id"], truncated["audio_end_ms"]) == (
        item_id, truncate["audio_end_ms"])
    retrieved = [e["item"] for e in log.of_type("conversation.item.retrieved")
                 if e["item"]["id"] == item_id]
    assert [item["content"][0]["transcript"] for item in retrieved] == [expected]
    [in_sdk_history] = [item for item in log.record("history") if item["itemId"] == item_id]
    assert in_sdk_history["content"][0]["transcript"] == expected

    assert second["status"] == "completed"
    assert second["output"][0]["content"][0]["transcript"].startswith(recalled(expected))
    assert server.responder is not None
    prompt = server.responder.prompts[-1]
    cut_turn = prompt.turns[-2]
    assert (cut_turn.role, cut_turn.text, cut_turn.interrupted) == ("assistant", expected, True)
    assert {"role": "system", "content": prompt.interruption_note.replace(
        "{heard}", expected)} in prompt.as_messages()


async def test_agents_js_runs_the_tool_the_model_calls(start_server) -> None:
    """The SDK's tool path with an LLM behind the server (the recording proxy's scripted
    stream): its agent's tool reaches the model, the model's streamed call becomes a
    `function_call` the SDK runs itself, and its output (sent back by the SDK with
    `response.create`) reaches the model, whose answer is spoken; 0 `error` events."""
    with RecordingProxy(NO_UPSTREAM) as proxy:
        proxy.mode = "script"
        proxy.scripts = [STREAMED_CALL, ["It is sunny in Paris, ", "twenty one degrees."]]
        server = await scripted_server(start_server, proxy)
        log = await run_script("agents_js", "tools.mjs", server.ws_url,
                               timeout_s=SCRIPT_TIMEOUT_S)
        requests = [request.body for request in proxy.wait_requests(2)]
    assert log.returncode == 0, (log.records[-3:], log.stderr)
    assert log.errors == []
    assert log.of_type("error") == []
    assert [tool["function"]["name"] for tool in requests[0]["tools"]] == ["get_weather"]
    [call] = [item for e in log.of_type("response.done") for item in e["response"]["output"]
              if item["type"] == "function_call"]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Paris"})
    [output] = [e["item"] for e in log.sent_of_type("conversation.item.create")
                if e["item"]["type"] == "function_call_output"]
    assert (output["call_id"], output["output"]) == (
        call["call_id"], "Sunny and 21 degrees in Paris.")
    assert requests[1]["messages"][-1] == {"role": "tool", "content": output["output"],
                                           "tool_call_id": call["call_id"]}
    answer = log.of_type("response.done")[-1]["response"]
    assert answer["output"][0]["content"][0]["transcript"] == (
        "It is sunny in Paris, twenty one degrees.")
    assert reply_of(log, answer["id"])[2] > 1000
