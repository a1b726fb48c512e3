"""The real Python clients hold a whole conversation with the server, unchanged and with their
default settings (issue 25): the bare `openai` SDK, the `openai-agents` SDK's RealtimeAgent and
Pipecat's `OpenAIRealtimeLLMService`, each pointed at a real server on loopback (Piper voice,
faster-whisper, `marks` calibration).

Each runs `tests/clients/script.py` in a child process of its own venv (`make clients`): its
own session setup, a typed turn with audio, a spoken turn (Piper audio of a question) through
its voice-input path, an interruption through its own API, and a "Where did you stop?" turn.
Asserted: 0 `error` events, errors raised or logged by the client; every server event is one
of OpenAI's GA events and validates strictly against the `openai` package's models; the
server's history of the interrupted reply is exactly the words its marks place before the
position the client reported (`conversation.item.truncate`'s `audio_end_ms`); the next reply
knows that cut.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import speech_fixtures
from tests.clients.launch import COMMANDS, run_client
from tests.clients.script import RECALL
from tests.test_openai_conversations import GA_TYPES, SERVER_EVENT
from tests.test_server_vad import mic_pcm16

QUESTION = "Tell me about the planets."


def heard_by_marks(events: list[dict[str, Any]], response_id: str, transcript: str,
                   played_ms: int) -> str:
    """The written prefix of `transcript` whose words the response's audio-delta marks show
    ended by `played_ms` (the `marks` cut: a word counts when its `end_ms` <= played_ms)."""
    marks = [mark for e in events if e["type"] == "response.output_audio.delta"
             and e["response_id"] == response_id for mark in e.get("marks") or []]
    ends = [m["char_end"] for m in marks if m["end_ms"] <= played_ms]
    return transcript[:max(ends, default=0)]


@pytest.fixture(scope="module")
def spoken(tmp_path_factory) -> tuple[Path, Path]:
    """Piper's voice asking QUESTION and RECALL, as microphone PCM16 at 24 kHz with silence
    around each (two files)."""
    folder = tmp_path_factory.mktemp("speech")
    paths = folder / "question.pcm", folder / "recall.pcm"
    for path, text in zip(paths, (QUESTION, RECALL), strict=True):
        path.write_bytes(mic_pcm16(speech_fixtures.place(
            speech_fixtures.speech(text), lead_ms=600, tail_ms=1500)))
    return paths


@pytest.mark.parametrize("client", list(COMMANDS))
async def test_a_real_client_holds_a_whole_conversation(start_server, spoken, client) -> None:
    server = await start_server(tts="piper", calibration="marks")
    lines = await run_client(client, server.ws_url, [str(path) for path in spoken])
    events = [line["event"] for line in lines if "event" in line]
    steps = {line["step"]: line.get("response_id") for line in lines if "step" in line}
    problems = [line for line in lines if "error" in line or "log" in line]
    assert not problems + [e for e in events if e["type"] == "error"]
    assert {e["type"] for e in events} <= GA_TYPES
    for event in events:
        assert SERVER_EVENT.validate_python(event, strict=True).type == event["type"]
    assert list(steps) == ["setup", "typed", "interrupt", "recall"]
    done = {e["response"]["id"]: e["response"] for e in events if e["type"] == "response.done"}

    typed = done[steps["typed"]]
    assert typed["status"] == "completed"
    assert typed["output"][0]["content"][0]["transcript"] == "It is sunny today."
    assert any(e["type"] == "response.output_audio.delta" and e["response_id"] == typed["id"]
               for e in events)

    transcribed = [e["transcript"] for e in events
                   if e["type"] == "conversation.item.input_audio_transcription.completed"]
    assert "planet" in transcribed[0].lower(), transcribed

    spoken = done[steps["interrupt"]]
    assert spoken["status"] == "cancelled"
    # Pipecat without an output transport never hears that the typed reply stopped playing:
    # the spoken turn's speech_started truncates that item too, at its full length.
    # The same without an output transport for the spoken reply: when the recall question's
    # speech starts in time, Pipecat truncates it again at its wall-clock position, later than
    # the interruption's; a truncate only ever tightens, so the cut is the smallest position.
    truncated = [e for e in events if e["type"] == "conversation.item.truncated"
                 and e["item_id"] == spoken["output"][0]["id"]]
    assert truncated
    played_ms = min(e["audio_end_ms"] for e in truncated)
    assert played_ms == truncated[0]["audio_end_ms"], truncated
    assert 500 <= played_ms <= 4000, played_ms
    full = "".join(e["delta"] for e in events
                   if e["type"] == "response.output_audio_transcript.delta"
                   and e["response_id"] == spoken["id"])
    heard = heard_by_marks(events, spoken["id"], server.responder.inner.reply_text(
        server.responder.prompts[1]), played_ms)
    assert heard and full.startswith(heard)

    recall_prompt = server.responder.prompts[-1]
    assert "where did you stop" in recall_prompt.turns[-1].text.lower()
    first, cut = [turn for turn in recall_prompt.turns if turn.role == "assistant"]
    assert first.text == "It is sunny today."
    assert (cut.text, cut.interrupted) == (heard, True)
    recall = done[steps["recall"]]
    assert recall["status"] == "completed"
    quoted = " ".join(heard.rstrip(".,;:!?").split()[-3:])
    assert quoted in recall["output"][0]["content"][0]["transcript"]
