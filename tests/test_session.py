"""The sans-I/O session core: no sockets, no sleeps; events in, events out."""

from __future__ import annotations

import json
from typing import Any

from calibration.word_marks import WordMark
from server.realtime.effects import CancelGeneration, StartGeneration
from server.realtime.session import Session, SessionConfig

RATE = 24000


def pcm_ms(ms: int) -> bytes:
    """`ms` of silence as PCM16 at 24 kHz."""
    return b"\x00\x00" * (RATE * ms // 1000)


def send(session: Session, **event: Any) -> list[dict[str, Any]]:
    session.receive(json.dumps(event))
    return session.take_events()


def start_reply(session: Session, text: str, audio_ms: int, *, done: bool = True) -> str:
    """Create a response whose generation produced `text` and `audio_ms` of audio."""
    send(session, type="response.create")
    effects = session.take_effects()
    response_id = next(e.response_id for e in effects if isinstance(e, StartGeneration))
    session.generation.on_text(response_id, text)
    session.generation.on_speech(response_id, len(text), pcm_ms(audio_ms),
                                 [WordMark(0, len(text), 0, audio_ms)])
    if done:
        session.generation.on_done(response_id)
    return response_id


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_pacing_sends_at_most_the_lead_beyond_the_latest_ack() -> None:
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100))
    rid = start_reply(session, "a long reply", 3000)
    session.take_events()
    assert session.pull_outbound(now_ms=0.0) == 101.0, (
        "before the client's first ACK, real time releases the next frame")
    sent = [e["audio_end_ms"] for e in session.take_events()
            if e["type"] == "response.output_audio.delta"]
    assert sent[-1] == 500
    session.set_clock(200.0)
    send(session, type="playback.ack", response_id=rid, played_ms=400)
    session.pull_outbound(now_ms=300.0)
    sent = [e["audio_end_ms"] for e in session.take_events()
            if e["type"] == "response.output_audio.delta"]
    assert sent[-1] == 800, "after the first ACK: the lead only, no initial jitter buffer"


def test_without_acks_pacing_falls_back_to_real_time() -> None:
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100,
                                    ack_timeout_ms=1000))
    start_reply(session, "a long reply", 3000)
    deadline = session.pull_outbound(now_ms=0.0)
    assert deadline is not None and deadline > 0
    session.take_events()
    session.pull_outbound(now_ms=2000.0)
    sent = [e["audio_end_ms"] for e in session.take_events()
            if e["type"] == "response.output_audio.delta"]
    assert sent[-1] == 2400
    session.pull_outbound(now_ms=5000.0)
    assert "response.done" in types(session.take_events())


def test_late_output_of_a_cancelled_response_is_dropped() -> None:
    session = Session()
    rid = start_reply(session, "One moment please.", 1200, done=False)
    send(session, type="barge_in", response_id=rid, audio_end_ms=0)
    assert CancelGeneration(rid) in session.take_effects()
    assert session.generation.on_speech(rid, 18, pcm_ms(400), []) is False
    assert session.generation.on_text(rid, " more") is False
    session.generation.on_done(rid)
    assert session.responses[rid].cursor.generated_ms == 1200
    assert not session.responses[rid].cursor.audio_complete
    assert session.responses[rid].text == "One moment please."


def test_exactly_one_terminal_per_response() -> None:
    session = Session()
    rid = start_reply(session, "Hello.", 400)
    session.pull_outbound(now_ms=0.0)
    events = session.take_events()
    send(session, type="response.cancel", response_id=rid)
    send(session, type="barge_in", response_id=rid, audio_end_ms=0)
    session.generation.on_failed(rid, "late failure")
    events += session.take_events()
    assert types(events).count("response.done") == 1


def test_ack_for_an_old_response_after_a_new_one_started_touches_only_the_old() -> None:
    session = Session(SessionConfig(lead_ms=60_000))
    first = start_reply(session, "Okay.", 400)
    session.pull_outbound(now_ms=0.0)
    second = start_reply(session, "Let me read the disclaimer now.", 2400, done=False)
    session.pull_outbound(now_ms=1.0)
    session.take_events()
    events = send(session, type="playback.ack", response_id=first, played_ms=400)
    assert session.responses[first].cursor.played_ms == 400
    assert session.responses[second].cursor.played_ms == 0
    heard = [e for e in events if e["type"] == "conversation.item.heard"]
    assert [(e["response_id"], e["text"], e["method"]) for e in heard] == [
        (first, "Okay.", "full")]


def test_positions_beyond_the_audio_sent_are_clamped_and_counted() -> None:
    session = Session(SessionConfig(lead_ms=60_000))
    rid = start_reply(session, "Your order number is four two seven.", 2800)
    session.pull_outbound(now_ms=0.0)
    events = send(session, type="playback.ack", response_id=rid, played_ms=57340)
    cursor = session.responses[rid].cursor
    assert (cursor.played_ms, cursor.anomalies) == (2800, 1)
    assert [e["text"] for e in events if e["type"] == "conversation.item.heard"] == [
        "Your order number is four two seven."]


def test_truncate_is_a_cap_that_only_tightens() -> None:
    session = Session(SessionConfig(lead_ms=60_000))
    rid = start_reply(session, "one two three four five", 2000)
    session.pull_outbound(now_ms=0.0)
    item = session.responses[rid].item_id
    send(session, type="conversation.item.truncate", item_id=item, content_index=0,
         audio_end_ms=1200)
    send(session, type="conversation.item.truncate", item_id=item, content_index=0,
         audio_end_ms=1600)
    send(session, type="playback.ack", response_id=rid, played_ms=2000)
    cursor = session.responses[rid].cursor
    assert (cursor.hard_cap_ms, cursor.cutoff_ms) == (1200, 1200)
    send(session, type="conversation.item.truncate", item_id=item, content_index=0,
         audio_end_ms=400)
    assert cursor.cutoff_ms == 400
    assert session.history.get(item).text == ""


def test_barge_in_after_the_end_of_playback_changes_nothing() -> None:
    session = Session(SessionConfig(lead_ms=60_000))
    rid = start_reply(session, "Hello! How can I help you today?", 2800)
    session.pull_outbound(now_ms=0.0)
    send(session, type="playback.ack", response_id=rid, played_ms=2800)
    assert send(session, type="barge_in", response_id=rid, audio_end_ms=1700) == []
    item = session.history.get(session.responses[rid].item_id)
    assert (item.text, item.interrupted) == ("Hello! How can I help you today?", False)


def test_barge_in_without_a_position_keeps_what_the_acks_reported_heard() -> None:
    """A tester's client ACKed 1300 ms and sent `{"type": "barge_in"}`: the reply was capped
    at 0 and its heard text lost. Without `audio_end_ms` the cap is the ACKed position (the
calibration then keeps "one two three")."""
    session = Session(SessionConfig(lead_ms=60_000))
    send(session, type="response.create")
    rid = next(e.response_id for e in session.take_effects() if isinstance(e, StartGeneration))
    text = "one two three four five six"
    session.generation.on_text(rid, text)
    marks = [WordMark(text.index(word), text.index(word) + len(word), 400 * i, 400 * i + 350)
             for i, word in enumerate(text.split())]
    session.generation.on_speech(rid, len(text), pcm_ms(2400), marks)
    session.pull_outbound(now_ms=0.0)
    send(session, type="playback.ack", response_id=rid, played_ms=1300)
    events = send(session, type="barge_in")
    truncated = [e for e in events if e["type"] == "conversation.item.truncated"]
    assert [e["audio_end_ms"] for e in truncated] == [1300]
    cursor = session.responses[rid].cursor
    assert (cursor.hard_cap_ms, cursor.cutoff_ms) == (1300, 1300)
    assert session.history.get(session.responses[rid].item_id).interrupted


def test_failed_generation_keeps_established_history() -> None:
    session = Session(SessionConfig(lead_ms=60_000))
    first = start_reply(session, "It is sunny today.", 1600)
    session.pull_outbound(now_ms=0.0)
    send(session, type="playback.ack", response_id=first, played_ms=1600)
    second = start_reply(session, "Tomorrow will", 800, done=False)
    session.generation.on_failed(second, "tts crashed")
    events = session.take_events()
    done = [e for e in events if e["type"] == "response.done"][-1]
    assert done["response"]["status"] == "failed"
    assert session.history.get(session.responses[first].item_id).text == "It is sunny today."
    assert session.history.get(session.responses[second].item_id).text == ""


def test_prompt_holds_heard_text_and_interruption_flags() -> None:
    session = Session(SessionConfig(lead_ms=60_000))
    send(session, type="conversation.item.create",
         item={"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": "Count down."}]})
    rid = start_reply(session, "10, 9, 8, 7, 6, 5, 4, 3, 2, 1, liftoff!", 4400)
    session.pull_outbound(now_ms=0.0)
    send(session, type="barge_in", response_id=rid, audio_end_ms=2000)
    next_id = start_reply(session, "", 0, done=False)
    prompt = session.generation.build_prompt(next_id)
    assert prompt is not None
    assert [(t.role, t.text, t.interrupted) for t in prompt.turns] == [
        ("user", "Count down.", False), ("assistant", "", True)]
    assert prompt.turns[1].full_text == "10, 9, 8, 7, 6, 5, 4, 3, 2, 1, liftoff!"


def test_a_client_caught_up_with_paced_audio_is_not_interrupted() -> None:
    """Generation ended, but pacing still holds audio back: an ACK of everything sent so far
    means the client is waiting for more, not that playback is over (reported by the local
    audio client on ALSA's null device: `conversation.item.heard` with `interrupted: true`)."""
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100))
    rid = start_reply(session, "a long reply", 3000)
    session.pull_outbound(now_ms=0.0)
    sent = [e["audio_end_ms"] for e in session.take_events()
            if e["type"] == "response.output_audio.delta"]
    events = send(session, type="playback.ack", response_id=rid, played_ms=sent[-1])
    assert "conversation.item.heard" not in types(events)
    item = session.history.get(session.responses[rid].item_id)
    assert not item.interrupted
    session.pull_outbound(now_ms=5000.0)
    send(session, type="playback.ack", response_id=rid, played_ms=3000)
    assert (item.text, item.interrupted) == ("a long reply", False)


def test_previous_item_id_inserts_where_it_says_or_is_refused() -> None:
    """OpenAI Realtime's `previous_item_id`: after that item, `"root"` first; an id that names
    no item is an `item_not_found` error and adds nothing (a tester's `"nope"` was appended)."""
    session = Session()

    def create(item_id: str, **extra: Any) -> list[dict[str, Any]]:
        return send(session, type="conversation.item.create", **extra, item={
            "id": item_id, "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": item_id}]})

    create("a")
    create("b")
    added = [e for e in create("c", previous_item_id="a")
             if e["type"] == "conversation.item.added"]
    assert [e["previous_item_id"] for e in added] == ["a"]
    added = [e for e in create("first", previous_item_id="root")
             if e["type"] == "conversation.item.added"]
    assert [e["previous_item_id"] for e in added] == [None]
    [error] = create("lost", previous_item_id="nope", event_id="ev1")
    assert (error["type"], error["error"]["code"], error["error"]["event_id"]) == (
        "error", "item_not_found", "ev1")
    assert session.history.ids() == ["first", "a", "c", "b"]
