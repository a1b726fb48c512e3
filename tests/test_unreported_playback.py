"""Clients that never send `playback.ack` (standard OpenAI Realtime clients, the `openai` SDK):
audio flows at real time plus the lead, a completed reply is kept in full unless a truncate cuts
it, and interruptions cut at the real-time position."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from openai import AsyncOpenAI

from server.realtime.session import Session, SessionConfig
from tests.test_session import send, start_reply, types

LEAD_MS, JITTER_MS, FRAME_MS, ACK_TIMEOUT_MS = 400, 100, 100, 1000
REPLY = "one two three four five six seven eight nine ten eleven twelve."


def new_session() -> Session:
    return Session(SessionConfig(lead_ms=LEAD_MS, jitter_ms=JITTER_MS, frame_ms=FRAME_MS,
                                 ack_timeout_ms=ACK_TIMEOUT_MS))


def sent_ms(events: list[dict[str, Any]]) -> int | None:
    ends = [e["audio_end_ms"] for e in events if e["type"] == "response.output_audio.delta"]
    return ends[-1] if ends else None


def test_without_acks_audio_flows_at_real_time_plus_the_lead() -> None:
    """The issue's input: the server sent the first 500 ms, then waited for its 1 s no-ACK
    timeout (0.5 s of silence 500 ms into every reply). Pulled at every deadline it returns,
    the client always holds at least the lead minus one frame beyond real time."""
    session = new_session()
    start_reply(session, "a long reply", 6000)
    session.take_events()
    now, sent, shortfalls = 0.0, 0, []
    while now < 7000:
        deadline = session.pull_outbound(now_ms=now)
        sent = sent_ms(session.take_events()) or sent
        if sent < 6000:
            shortfalls.append(now + LEAD_MS - FRAME_MS - sent)
        if deadline is None:
            break
        assert deadline > now
        now = deadline
    assert sent == 6000
    assert max(shortfalls) <= 0, "the client was never short of the lead by more than a frame"


def test_a_completed_reply_is_kept_in_full_once_the_client_is_known_not_to_ack() -> None:
    """The issue's input: a reply played to the end with no ACK and no truncate was stored as
    "" (uniform voice, 12 words, completed, retrieve -> ""). Conservative until the client
    could have ACKed (`ack_timeout_ms` after its first audio), then OpenAI's semantics."""
    session = new_session()
    rid = start_reply(session, REPLY, 4800)
    session.pull_outbound(now_ms=0.0)
    item_id = session.responses[rid].item_id
    assert session.history.get(item_id).text == ""
    deadline = session.pull_outbound(now_ms=500.0)
    assert deadline is not None and deadline <= ACK_TIMEOUT_MS + 1
    now = 500.0
    while (deadline := session.pull_outbound(now_ms=now)) is not None:
        now = deadline
    events = session.take_events()
    assert "response.done" in types(events)
    heard = [e for e in events if e["type"] == "conversation.item.heard"]
    assert [(e["text"], e["method"], e["interrupted"]) for e in heard] == [(REPLY, "full", False)]
    [retrieved] = send(session, type="conversation.item.retrieve", item_id=item_id)
    assert retrieved["item"]["content"][0]["transcript"] == REPLY
    assert session.reply_playback.playback_unreported()


def test_a_truncate_still_cuts_a_reply_kept_in_full() -> None:
    session = new_session()
    rid = start_reply(session, REPLY, 4800)
    for now in (0.0, 1500.0, 5000.0):
        session.pull_outbound(now_ms=now)
    item_id = session.responses[rid].item_id
    assert session.history.get(item_id).text == REPLY
    session.take_events()
    events = send(session, type="conversation.item.truncate", item_id=item_id,
                  content_index=0, audio_end_ms=1000)
    [truncated] = [e for e in events if e["type"] == "conversation.item.truncated"]
    assert truncated["audio_end_ms"] == 1000
    [heard] = [e for e in events if e["type"] == "conversation.item.heard"]
    assert heard["interrupted"] is True and heard["text"] != REPLY


def test_server_vad_cuts_an_unacknowledged_reply_at_its_real_time_position() -> None:
    """A soft cut at the estimated playing position: the client's truncate may still set it.
    (The audio is let out as pacing allows, every 100 ms: a client sent nothing for a while
    has played no further than what it had.)"""
    session = new_session()
    session.receive(json.dumps({"type": "session.update", "session": {"audio": {"input": {
        "turn_detection": {"type": "server_vad"}}}}}))
    rid = start_reply(session, REPLY, 4800)
    for now in range(0, 1700, 100):
        session.pull_outbound(now_ms=float(now))
    session.take_events()
    session.set_clock(1700.0)
    session.turn_taking.on_speech_started(0)
    events = session.take_events()
    assert "output_audio_buffer.cleared" in types(events)
    [heard] = [e for e in events if e["type"] == "conversation.item.heard"]
    assert (heard["item_id"], heard["played_ms"]) == (session.responses[rid].item_id,
                                                      1700 - JITTER_MS)
    assert heard["interrupted"] is True and heard["text"] == ""
    events = send(session, type="conversation.item.truncate",
                  item_id=session.responses[rid].item_id, content_index=0, audio_end_ms=1800)
    [truncated] = [e for e in events if e["type"] == "conversation.item.truncated"]
    assert truncated["audio_end_ms"] == 1800


def test_a_client_that_acks_late_is_not_taken_for_one_that_never_does() -> None:
    """A reply that completes before the client's first ACK stays conservative: the ACK then
    decides (the ACKing page and the local-audio client keep heard-text history)."""
    session = new_session()
    rid = start_reply(session, "Okay.", 400)
    session.pull_outbound(now_ms=0.0)
    session.set_clock(300.0)
    send(session, type="playback.ack", response_id=rid, played_ms=200)
    session.pull_outbound(now_ms=5000.0)
    assert not session.reply_playback.playback_unreported()
    assert session.history.get(session.responses[rid].item_id).text == ""


async def test_the_openai_sdk_keeps_its_replies_and_truncates_them(start_server) -> None:
    """End to end with the official `openai` realtime client, which never ACKs nor opts in to
    our extension events: the reply is kept in full (its `response.done` carries it), and
    `conversation.item.truncate` alone (no cancel) cuts it at once, calibrated ("one two"
    at 1000 ms, as `conversation.item.retrieve` shows)."""
    server = await start_server(tts="uniform", calibration="marks")
    base = server.ws_url.removesuffix("/realtime")
    sdk = AsyncOpenAI(api_key="unused", websocket_base_url=base)
    async with sdk.realtime.connect(model="duplex-demo") as connection:
        await connection.conversation.item.create(item={
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": f"say: {REPLY}"}]})
        await connection.response.create()
        item_id, done = None, None
        async for event in connection:
            assert not event.type.startswith(("conversation.item.heard", "playback."))
            if event.type == "response.output_item.added":
                item_id = event.item.id
            if event.type == "response.done":
                done = event
                break
        assert done.response.status == "completed"
        assert done.response.output[0].content[0].transcript == REPLY
        await connection.conversation.item.truncate(item_id=item_id, content_index=0,
                                                    audio_end_ms=1000)
        async for event in connection:
            if event.type == "conversation.item.truncated":
                assert event.audio_end_ms == 1000
                break
        transcripts = []
        while "one two" not in transcripts and len(transcripts) < 20:
            await asyncio.sleep(0.1)
            await connection.conversation.item.retrieve(item_id=item_id)
            async for event in connection:
                if event.type == "conversation.item.retrieved":
                    transcripts.append(event.item.content[0].transcript)
                    break
        assert transcripts[-1] == "one two", transcripts


def test_a_retrieve_right_after_the_ack_timeout_sees_the_reply_in_full() -> None:
    """No send-loop wake-up is needed: the frame itself settles the unreported client."""
    session = new_session()
    rid = start_reply(session, "Okay.", 400)
    session.pull_outbound(now_ms=0.0)
    assert "response.done" in types(session.take_events())
    session.set_clock(ACK_TIMEOUT_MS + 1.0)
    [retrieved] = [e for e in send(session, type="conversation.item.retrieve",
                                   item_id=session.responses[rid].item_id)
                   if e["type"] == "conversation.item.retrieved"]
    assert retrieved["item"]["content"][0]["transcript"] == "Okay."


def test_a_prompt_before_the_ack_timeout_does_not_cut_a_completed_reply() -> None:
    """A tester's `openai` SDK client: "say: alpha beta gamma." (1.2 s of audio), the next
    prompt sent on `response.done`, about 0.7 s after the first audio, within the 1 s no-ACK
    timeout: the reply was cut to "alpha" at its real-time position, for good. Only a client
    known to report playback has a completed reply cut by its next prompt (its ACKs say what
    it played); until it is known whether this one does, the reply keeps what the ACKs proved
    (nothing), and once the timeout says it does not, its text in full."""
    session = new_session()
    rid = start_reply(session, "alpha beta gamma.", 1200)
    now = 0.0
    while (deadline := session.pull_outbound(now_ms=now)) is not None and deadline < 800:
        now = deadline
    assert "response.done" in types(session.take_events())
    assert now < ACK_TIMEOUT_MS
    send(session, type="conversation.item.create", item={
        "type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "and then?"}]})
    events = send(session, type="response.create")
    assert not [e for e in events if e["type"] in ("conversation.item.truncated",
                                                   "conversation.item.heard")]
    session.pull_outbound(now_ms=ACK_TIMEOUT_MS + 50.0)
    item = session.history.get(session.responses[rid].item_id)
    assert (item.text, item.interrupted) == ("alpha beta gamma.", False)
    assert session.reply_playback.playback_unreported()
