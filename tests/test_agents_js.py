"""The OpenAI Agents JS SDK (`@openai/agents-realtime`, pinned in tests/agents_js/) holds a
whole conversation with a real server on loopback, every setting at its default (issue 25):
its own session setup with 0 `error` events, a text turn with audio, a spoken turn through
`session.sendAudio()` (real Piper audio of a question, the server's VAD and faster-whisper), an
interruption through `session.interrupt()` whose cut the server keeps exactly where the SDK's
truncate said, and a second turn whose prompt knows the cut.

The SDK runs in node (tests/agents_js/conversation.mjs describes the steps and its log)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import speech_fixtures
from tests.node_clients import NodeLog, run_script
from tests.test_server_vad import mic_pcm16

SCRIPT_TIMEOUT_S = 180.0
QUESTION = "Tell me about the planets."


def heard_prefix(text: str, marks: list[dict[str, Any]], audio_end_ms: int) -> str:
    """The written prefix of `text` that audio played up to `audio_end_ms` proves heard: up to
    the end of the last word whose mark ended by then (marks: the audio deltas' word marks,
    `end_ms` on the item's audio clock, `char_end` in code points)."""
    ends = [mark["char_end"] for mark in marks if mark["end_ms"] <= audio_end_ms]
    return text[:max(ends, default=0)]


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
    update = log.sent_of_type("session.update")[-1]["session"]
    assert update["audio"]["input"]["noise_reduction"] is None
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
    assert "planet" in heard_question[0]["transcript"].lower()
    assert spoken["status"] == "completed"
    assert spoken["output"][0]["content"][0]["transcript"].startswith("Our solar system")
    assert reply_of(log, spoken["id"])[2] > 5000

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
    assert server.responder is not None
    prompt = server.responder.prompts[-1]
    cut_turn = prompt.turns[-2]
    assert (cut_turn.role, cut_turn.text, cut_turn.interrupted) == ("assistant", expected, True)
    assert {"role": "system", "content": prompt.interruption_note.replace(
        "{heard}", expected)} in prompt.as_messages()
