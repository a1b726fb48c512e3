"""The parts `Session` hands its jobs to, each on its own: `SessionSettings` (the session object
and `session.update`), `Generation` (prompt in, generated output back), `ReplyPlayback` (where
the reply plays at the client), `TurnTaking` (the VAD's and transcriber's reports against the
replies) and `UserTranscripts` (committed turns awaiting their words). Sans-I/O plain objects:
called directly, no socket, no clock but the numbers given."""

from __future__ import annotations

import json
from typing import Any

import pytest

from server.listening.server_vad_settings import TurnDetection
from server.realtime import modalities, protocol
from server.realtime.effects import CancelGeneration, StartGeneration
from server.realtime.events import EventLog
from server.realtime.history import ConversationHistory, HistoryItem
from server.realtime.items import ConversationItems
from server.realtime.limits import MAX_STORED_SETTINGS_CHARS
from server.realtime.session import Session, SessionConfig
from server.realtime.user_transcripts import UserTranscripts
from tests.test_session import start_reply, types


def send(target: Session, **event: Any) -> list[dict[str, Any]]:
    target.receive(json.dumps(event))
    return target.take_events()


def started(session: Session) -> list[str]:
    """Response ids of the `StartGeneration` effects produced since the last call."""
    return [e.response_id for e in session.take_effects() if isinstance(e, StartGeneration)]


# ------------------------------------------------------------------ SessionSettings


def test_an_update_reaches_the_parts_that_own_each_setting_and_is_reported() -> None:
    session = Session()
    settings = session.settings
    settings.update(protocol.SessionUpdate("e1", {
        "stored": {"max_output_tokens": 50}, "instructions": "Be brief.",
        "output_modalities": modalities.TEXT, "turn_detection": None,
        "interruption": {"mode": "cancel"},
    }))
    assert settings.instructions == "Be brief."
    assert settings.output_modalities == modalities.TEXT
    assert settings.stored["max_output_tokens"] == 50
    assert session.input_turns.turn_detection is None
    assert session.pauses.settings.mode == "cancel"
    [updated] = session.take_events()
    assert updated["type"] == "session.updated" and updated["session"] == settings.wire()
    wire = updated["session"]
    assert (wire["instructions"], wire["output_modalities"], wire["max_output_tokens"]) == (
        "Be brief.", ["text"], 50)
    assert wire["audio"]["input"]["turn_detection"] is None
    assert wire["interruption"]["mode"] == "cancel"


def test_a_refused_update_changes_nothing_at_all() -> None:
    session = Session()
    settings = session.settings
    before = settings.wire()
    huge = [{"type": "function", "name": "f", "description": "d" * MAX_STORED_SETTINGS_CHARS}]
    with pytest.raises(protocol.ProtocolError) as refused:
        settings.update(protocol.SessionUpdate("e2", {
            "stored": {"tools": huge}, "instructions": "Changed.", "turn_detection": None}))
    assert (refused.value.code, refused.value.param) == ("invalid_value", "session.tools")
    assert settings.wire() == before
    assert session.input_turns.turn_detection == TurnDetection()
    assert session.take_events() == []


# ------------------------------------------------------------------ Generation


def test_a_prompt_uses_the_session_settings_unless_the_response_overrides_them() -> None:
    session = Session(SessionConfig(instructions="Session rules."))
    send(session, type="conversation.item.create", item={
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]})
    tool = {"type": "function", "name": "clock", "description": "the time",
            "parameters": {"type": "object", "properties": {}}}
    send(session, type="response.create", response={"instructions": "Reply rules.",
                                                      "tools": [tool]})
    [response_id] = started(session)
    prompt = session.generation.build_prompt(response_id)
    assert prompt is not None
    assert prompt.instructions == "Reply rules."
    assert [turn.text for turn in prompt.turns][-1] == "Hi"
    assert prompt.max_output_tokens is None, "'inf' is no bound"
    assert [t["function"]["name"] for t in prompt.tools] == ["clock"]
    assert session.generation.build_prompt("resp_unknown") is None


def test_a_failed_generation_ends_its_response_and_later_output_is_dropped() -> None:
    session = Session()
    response_id = start_reply(session, "Half a", 300, done=False)
    session.take_events()
    session.generation.on_failed(response_id, "TTS crashed")
    events = session.take_events()
    error = next(e for e in events if e["type"] == "error")
    assert (error["error"]["code"], error["error"]["message"]) == ("generation_failed",
                                                                   "TTS crashed")
    done = next(e for e in events if e["type"] == "response.done")
    assert done["response"]["status"] == "failed"
    assert session.generation.on_text(response_id, " more") is False
    assert session.generation.on_speech(response_id, 6, b"\0\0" * 240, []) is False
    item = session.history.get(session.responses[response_id].item_id)
    assert item is not None and session.generation.failed(item)


# ------------------------------------------------------------------ ReplyPlayback


def test_the_playback_position_follows_sending_acks_and_the_end_of_playback() -> None:
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100,
                                    ack_timeout_ms=1000))
    playback = session.reply_playback
    # positions asked for appends whose audio ends at the clock reading (an on-time stream)
    assert playback.position_ms(0) is None and not playback.assistant_playing()
    response_id = start_reply(session, "a short reply", 600)
    assert playback.assistant_playing(), "generating counts as playing"
    assert playback.position_ms(0) is None, "nothing sent yet"
    session.pull_outbound(now_ms=0.0)
    session.set_clock(300.0)
    send(session, type="playback.ack", response_id=response_id, played_ms=250)
    assert playback.position_ms(300) == (response_id, 250)
    session.pull_outbound(now_ms=700.0)
    assert [e for e in session.take_events() if e["type"] == "response.done"]
    assert playback.assistant_playing(), "the client has not played it all"
    assert playback.is_playing(session.responses[response_id])
    session.set_clock(600.0 + 1000.0 + 1.0)
    assert not playback.assistant_playing(), "played out by real time + ack_timeout_ms"
    assert playback.position_ms(1601) is None, "and more than the echo tail after its last ACK"


def test_a_client_without_acks_is_known_not_to_report_playback_after_the_timeout() -> None:
    session = Session(SessionConfig(ack_timeout_ms=1000))
    start_reply(session, "a reply", 500)
    session.pull_outbound(now_ms=100.0)
    assert not session.reply_playback.playback_unreported()
    session.set_clock(1099.0)
    assert not session.reply_playback.playback_unreported()
    session.set_clock(1100.0)
    assert session.reply_playback.playback_unreported()


# ------------------------------------------------------------------ TurnTaking


@pytest.mark.parametrize("mode", ["cancel", "pause"])
def test_speech_over_a_playing_reply_cancels_or_pauses_it(mode: str) -> None:
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100))
    send(session, type="session.update", session={"interruption": {"mode": mode}})
    response_id = start_reply(session, "a long reply to talk over", 3000, done=False)
    session.pull_outbound(now_ms=0.0)
    session.set_clock(300.0)
    send(session, type="playback.ack", response_id=response_id, played_ms=300)
    session.take_effects()
    session.turn_taking.on_speech_started(0)
    events = types(session.take_events())
    if mode == "cancel":
        assert events[0] == "input_audio_buffer.speech_started"
        assert {"response.done", "output_audio_buffer.cleared",
                "conversation.item.truncated"} <= set(events)
        assert CancelGeneration(response_id) in session.take_effects()
        assert session.responses[response_id].status == "cancelled"
        assert session.history.get(session.responses[response_id].item_id).interrupted
    else:
        assert events == ["input_audio_buffer.speech_started", "response.paused"]
        assert session.responses[response_id].paused
        assert session.responses[response_id].active


@pytest.mark.parametrize("create_response", [True, False])
def test_a_transcribed_turn_starts_a_response_only_under_create_response(
        create_response: bool) -> None:
    session = Session()
    send(session, type="session.update", session={"audio": {"input": {"turn_detection": {
        "type": "server_vad", "create_response": create_response}}}})
    session.input_turns.audio.append(b"\x10\x00" * 24000)
    session.turn_taking.on_speech_started(100)
    session.turn_taking.on_speech_stopped(900)
    [item_id] = [e["item_id"] for e in session.take_events()
                 if e["type"] == "input_audio_buffer.committed"]
    session.take_effects()
    session.turn_taking.on_transcription(item_id, "What time is it?")
    assert session.history.get(item_id).text == "What time is it?"
    assert len(started(session)) == (1 if create_response else 0)


def test_a_wordless_transcript_is_no_turn_and_starts_nothing() -> None:
    session = Session()
    session.input_turns.audio.append(b"\x10\x00" * 24000)
    session.turn_taking.on_speech_started(100)
    session.turn_taking.on_speech_stopped(900)
    [item_id] = [e["item_id"] for e in session.take_events()
                 if e["type"] == "input_audio_buffer.committed"]
    session.take_effects()
    session.turn_taking.on_transcription(item_id, " ... ")
    assert item_id not in session.history
    assert types(session.take_events()) == ["conversation.item.deleted"]
    assert started(session) == []


# ------------------------------------------------------------------ UserTranscripts


def pending_user_item(max_chars: int = 1000) -> tuple[ConversationItems, UserTranscripts,
                                                        EventLog]:
    """Items, transcripts and outbox with one committed user item `item_a` (1.5 s of audio)
    awaiting its transcript."""
    log = EventLog()
    items = ConversationItems(ConversationHistory(), log, lambda: False, max_items=10,
                              max_chars=max_chars)
    items.add(HistoryItem(id="item_a", role="user", text="", content_type="input_audio"),
              status="in_progress")
    transcripts = UserTranscripts(items, log)
    transcripts.expect("item_a", 1.5)
    log.take_events()
    return items, transcripts, log


def test_a_transcript_completes_its_user_item() -> None:
    items, transcripts, log = pending_user_item()
    assert transcripts.pending
    assert transcripts.transcribed("item_a", "  Hello there. ")
    assert not transcripts.pending
    completed, done = log.take_events()
    assert completed["type"] == "conversation.item.input_audio_transcription.completed"
    assert (completed["transcript"], completed["usage"]) == (
        "Hello there.", {"type": "duration", "seconds": 1.5})
    assert done["type"] == "conversation.item.done"
    assert items.history.get("item_a").text == "Hello there."


@pytest.mark.parametrize(("transcript", "max_chars", "events"), [
    ("...", 1000, ["conversation.item.deleted"]),
    ("Far too many words for this history.", 20, ["conversation.item.deleted", "error"]),
])
def test_a_transcript_without_words_or_room_deletes_its_item(
        transcript: str, max_chars: int, events: list[str]) -> None:
    items, transcripts, log = pending_user_item(max_chars)
    assert not transcripts.transcribed("item_a", transcript)
    assert "item_a" not in items.history
    assert types(log.take_events()) == events


def test_a_withdrawn_turn_is_deleted_and_its_late_transcript_ignored() -> None:
    items, transcripts, log = pending_user_item()
    transcripts.withdraw("item_a")
    assert not transcripts.pending and "item_a" not in items.history
    assert types(log.take_events()) == ["conversation.item.deleted"]
    assert not transcripts.transcribed("item_a", "Uh-huh.")
    assert log.take_events() == []
