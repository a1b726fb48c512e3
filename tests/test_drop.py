"""A dropped connection applied to the sans-I/O session (`server.realtime.drop`): the reply
playing is cut as a `barge_in` at its last ACK would cut it, a finished or already cut reply
stays as it is, unsent input audio is dropped, and `session.resumed` lists the history."""

from __future__ import annotations

import base64
import json

from server.realtime.drop import DROP_SOURCE, cut_at_drop, resumed_fields
from server.realtime.session import Session, SessionConfig
from tests.test_session import pcm_ms, send, start_reply


def playing(ack_ms: int) -> tuple[Session, Session]:
    """Two identical sessions with a 3 s reply ACKed at `ack_ms` (sent up to its lead); the
    second one's client barges in there (the control). Returns (dropped, control)."""
    sessions = []
    for _ in range(2):
        session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100))
        send(session, type="conversation.item.create", item={
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "tell me"}]})
        rid = start_reply(session, "one two three four five six", 3000)
        played, now_ms = 0, 0.0
        while played < ack_ms:
            session.pull_outbound(now_ms=now_ms)
            sent = max(e["audio_end_ms"] for e in session.take_events()
                       if e["type"] == "response.output_audio.delta")
            played, now_ms = min(ack_ms, sent), now_ms + 100.0
            session.set_clock(now_ms)
            send(session, type="playback.ack", response_id=rid, played_ms=played)
        session.pull_outbound(now_ms=now_ms)
        session.take_events()
        sessions.append(session)
    send(sessions[1], type="barge_in", response_id=rid)
    return sessions[0], sessions[1]


def reply_id(session: Session) -> str:
    latest = session.lifecycle.latest()
    assert latest is not None
    return latest.id


def test_the_reply_playing_is_cut_like_a_barge_in_at_the_last_ack() -> None:
    dropped, control = playing(1200)
    rid = reply_id(dropped)
    drop = cut_at_drop(dropped)
    assert drop is not None and (drop.response_id, drop.audio_end_ms, drop.source) == (
        rid, None, DROP_SOURCE)
    response, expected = dropped.responses[rid], control.responses[reply_id(control)]
    assert response.status == expected.status == "cancelled"
    assert response.cursor.as_wire() == expected.cursor.as_wire()
    assert response.cursor.cutoff_ms == 1200
    item = dropped.history.get(response.item_id)
    assert item is not None and item.interrupted
    assert [(i.role, i.text, i.method, i.interrupted) for i in dropped.history] == [
        (i.role, i.text, i.method, i.interrupted) for i in control.history]


def test_a_reply_heard_to_its_end_or_already_cut_stays_as_it_is() -> None:
    _, control = playing(1200)
    assert cut_at_drop(control) is None  # the barge-in's cut stands
    assert control.responses[reply_id(control)].cursor.cutoff_ms == 1200
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100))
    assert cut_at_drop(session) is None  # nothing was said
    rid = start_reply(session, "short", 300)
    session.pull_outbound(now_ms=0.0)
    session.set_clock(400.0)
    send(session, type="playback.ack", response_id=rid, played_ms=300)
    session.pull_outbound(now_ms=500.0)
    assert cut_at_drop(session) is None
    assert session.history.get(session.responses[rid].item_id).text == "short"


def test_unsent_input_audio_is_dropped() -> None:
    session = Session(SessionConfig())
    session.receive(json.dumps({"type": "session.update", "session": {
        "audio": {"input": {"turn_detection": None}}}}))
    send(session, type="input_audio_buffer.append",
         audio=base64.b64encode(pcm_ms(200)).decode())
    assert session.input_turns.audio
    cut_at_drop(session)
    assert not session.input_turns.audio


def test_resumed_lists_the_history_as_heard() -> None:
    dropped, _ = playing(1200)
    rid = reply_id(dropped)
    cut_at_drop(dropped)
    response = dropped.responses[rid]
    fields = resumed_fields(dropped, 1234.4)
    assert (fields["session_id"], fields["parked_ms"]) == (dropped.id, 1234)
    assert [(item["role"], item["id"]) for item in fields["items"]] == [
        (item.role, item.id) for item in dropped.history]
    (heard,) = fields["heard"]
    item = dropped.history.get(response.item_id)
    assert heard == {"item_id": item.id, "response_id": rid, "text": item.text,
                     "full_text": "one two three four five six", "played_ms": 1200,
                     "method": item.method, "interrupted": True, "asr_text": None,
                     "marks_agree": None}
    assert fields["items"][1]["content"][0]["transcript"] == item.text
