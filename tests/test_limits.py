"""Limits a client cannot get past, each on a real server on loopback: frame size, concurrent
sessions, event rate, idle timeout, keepalive, history size and reply length.

Each limit is set low through the same `ServerConfig` field its flag fills, then exceeded, and the
test checks the documented outcome (close code, HTTP status or `error` event) and that the server
and the other sessions carry on.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.frames import Close, Opcode
from websockets.uri import parse_uri

from server.realtime import protocol
from server.realtime.effects import Transcribe
from server.realtime.limits import MAX_STORED_SETTINGS_CHARS, Admission, EventRateLimiter
from server.realtime.session import Session, SessionConfig
from server.responders.prompt import ConversationTurn, Prompt
from server.responders.reply_limit import ReplyLengthLimit, word_prefix
from tests.realtime_client import RealtimeClient
from tests.test_session import send

pytestmark = pytest.mark.timeout(60)


async def closed_with(client: RealtimeClient, timeout: float = 10.0) -> tuple[int, str]:
    """Read until the server closes the connection; returns the (code, reason) it sent."""
    with pytest.raises(ConnectionClosed) as closed:
        async with asyncio.timeout(timeout):
            while True:
                await client._receive(timeout)
    assert closed.value.rcvd is not None, "the server sent no close frame"
    return closed.value.rcvd.code, closed.value.rcvd.reason


# ---------------------------------------------------------------------- frame size


async def test_frame_above_max_frame_bytes_closes_1009(start_server) -> None:
    server = await start_server(max_frame_bytes=64 * 1024)
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send(user_item("word " * 2000))  # a 10 kB frame is fine
        await client.wait_for("conversation.item.done")
        await client.send_raw('{"type": "response.create", "pad": "' + "x" * 70_000 + '"}')
        code, _ = await closed_with(client)
    assert code == 1009
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.prompt("say: Still serving.")
        assert (await client.wait_for("response.done"))["response"]["status"] == "completed"


# ---------------------------------------------------------------------- concurrent sessions


async def test_sessions_beyond_max_sessions_are_refused_with_503(start_server) -> None:
    server = await start_server(max_sessions=2)
    async with RealtimeClient.connect(server.ws_url), RealtimeClient.connect(server.ws_url):
        with pytest.raises(InvalidStatus) as refused:
            async with RealtimeClient.connect(server.ws_url):
                pass
        response = refused.value.response
        assert response.status_code == 503
        assert b"too many sessions" in response.body and b"at most 2" in response.body
        assert response.headers["Retry-After"].isdigit()
    async with asyncio.timeout(5):
        while server.demo.open_sessions:
            await asyncio.sleep(0.02)
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.prompt("say: Room again.")
        assert (await client.wait_for("response.done"))["response"]["status"] == "completed"


async def test_simultaneous_handshakes_never_exceed_max_sessions(start_server) -> None:
    server = await start_server(max_sessions=2)

    async def attempt() -> str:
        try:
            async with RealtimeClient.connect(server.ws_url) as client:
                await client.drain(1.0)
                return "session"
        except InvalidStatus as exc:
            return f"http {exc.response.status_code}"
        except ConnectionClosed as exc:
            return f"closed {exc.rcvd.code if exc.rcvd else None}"

    outcomes = await asyncio.gather(*(attempt() for _ in range(6)))
    assert outcomes.count("session") == 2, outcomes
    assert set(outcomes) <= {"session", "http 503", "closed 1013"}, outcomes


# ---------------------------------------------------------------------- event rate


def test_rate_limiter_counts_a_sliding_window() -> None:
    limiter = EventRateLimiter(3, window_ms=1000)
    assert [limiter.admit(t) for t in (0, 100, 200)] == [Admission.ACCEPT] * 3
    assert limiter.admit(300) is Admission.REFUSE
    assert limiter.admit(1000.5) is Admission.ACCEPT  # the frame at 0 left the window
    assert limiter.admit(1050) is Admission.REFUSE
    assert limiter.admit(1060) is Admission.CLOSE  # 3 refused within one window


async def test_events_above_the_rate_get_an_error_and_change_nothing(start_server) -> None:
    server = await start_server(max_events_per_s=20)
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        sent = [await client.send({"type": "session.update", "session": {
            "type": "realtime", "instructions": f"version {i}"}}) for i in range(25)]
        updated = [await client.wait_for("session.updated") for _ in range(20)]
        errors = [await client.wait_for("error") for _ in range(5)]
        assert [e["error"]["code"] for e in errors] == ["rate_limit_exceeded"] * 5
        assert [e["error"]["event_id"] for e in errors] == sent[20:]
        assert "20 events per second" in errors[0]["error"]["message"]
        assert updated[-1]["session"]["instructions"] == "version 19"
        assert not await client.drain(0.2)
        await asyncio.sleep(1.0)
        await client.send({"type": "session.update", "session": {"type": "realtime"}})
        assert (await client.wait_for("session.updated"))["session"]["instructions"] == (
            "version 19")


async def test_twice_the_rate_closes_1008(start_server) -> None:
    server = await start_server(max_events_per_s=20)
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        for _ in range(45):
            await client.send({"type": "input_audio_buffer.clear"})
        code, reason = await closed_with(client)
        assert (code, reason) == (1008, "event rate limit exceeded")
        assert len(client.of_type("input_audio_buffer.cleared")) == 20
        assert len(client.of_type("error")) == 20


# ---------------------------------------------------------------------- idle timeout


async def test_idle_session_is_closed_1000_with_a_reason(start_server) -> None:
    server = await start_server(idle_timeout_s=0.6)
    async with RealtimeClient.connect(server.ws_url) as client:
        for _ in range(4):  # events keep it open past the timeout
            await asyncio.sleep(0.3)
            await client.send({"type": "input_audio_buffer.clear"})
        started = time.monotonic()
        code, reason = await closed_with(client)
        assert (code, reason) == (1000, "idle timeout: no client event for 0.6 s")
        assert 0.5 < time.monotonic() - started < 3.0
        assert len(client.of_type("input_audio_buffer.cleared")) == 4


# ---------------------------------------------------------------------- keepalive


async def raw_session_without_pongs(ws_url: str, seconds: float) -> tuple[list[object], float]:
    """Open `/v1/realtime` by hand and read for up to `seconds` without ever answering a ping;
    returns the frames received after the handshake and when the server closed (s)."""
    protocol = ClientProtocol(parse_uri(ws_url))
    protocol.send_request(protocol.connect())
    url = urlsplit(ws_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    started = time.monotonic()
    writer.write(b"".join(protocol.data_to_send()))
    frames: list[object] = []
    try:
        async with asyncio.timeout(seconds):
            while data := await reader.read(65536):
                protocol.receive_data(data)
                frames.extend(protocol.events_received())
    finally:
        writer.close()
    return frames[1:], time.monotonic() - started


async def test_unanswered_pings_close_the_session_1011(start_server) -> None:
    server = await start_server(ping_interval_s=0.3, ping_timeout_s=0.3)
    frames, closed_after = await raw_session_without_pongs(server.ws_url, 10.0)
    opcodes = [frame.opcode for frame in frames]  # type: ignore[attr-defined]
    assert Opcode.PING in opcodes and opcodes[-1] is Opcode.CLOSE
    close = Close.parse(frames[-1].data)  # type: ignore[attr-defined]
    assert close.code == 1011 and "keepalive" in close.reason
    assert closed_after < 3.0


async def test_a_client_answering_pings_stays(start_server) -> None:
    server = await start_server(ping_interval_s=0.2, ping_timeout_s=0.2)
    async with RealtimeClient.connect(server.ws_url) as client:
        await asyncio.sleep(1.2)
        await client.prompt("say: Still here.")
        assert (await client.wait_for("response.done"))["response"]["status"] == "completed"


# ---------------------------------------------------------------------- history size


def user_item(text: str, item_id: str | None = None) -> dict[str, object]:
    item: dict[str, object] = {"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": text}]}
    if item_id is not None:
        item["id"] = item_id
    return {"type": "conversation.item.create", "item": item}


async def test_items_past_max_history_items_are_refused(start_server) -> None:
    server = await start_server(max_history_items=3)
    async with RealtimeClient.connect(server.ws_url) as client:
        for text in ("one", "two", "three"):
            await client.send(user_item(text))
            await client.wait_for("conversation.item.done")
        event_id = await client.send(user_item("four"))
        error = (await client.wait_for("error", timeout=5))["error"]
        assert (error["code"], error["event_id"]) == ("history_limit_exceeded", event_id)
        assert "3 items" in error["message"] and "conversation.item.delete" in error["message"]
        await client.send({"type": "response.create"})
        assert (await client.wait_for("error"))["error"]["code"] == "history_limit_exceeded"
        assert len(client.of_type("conversation.item.added")) == 3
        assert not client.of_type("response.created")
        for done in client.of_type("conversation.item.done")[:2]:
            await client.send({"type": "conversation.item.delete", "item_id": done["item"]["id"]})
            await client.wait_for("conversation.item.deleted")
        await client.send(user_item("say: Room again."))
        await client.wait_for("conversation.item.done")
        await client.send({"type": "response.create"})
        assert (await client.wait_for("response.done"))["response"]["status"] == "completed"


async def test_items_past_max_history_chars_are_refused(start_server) -> None:
    server = await start_server(max_history_chars=100)
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send(user_item("x" * 56, "idx1"))  # ids count: 4 + 56
        await client.wait_for("conversation.item.done")
        event_id = await client.send(user_item("y" * 37, "idy1"))
        error = (await client.wait_for("error", timeout=5))["error"]
        assert (error["code"], error["event_id"]) == ("history_limit_exceeded", event_id)
        assert "60 characters" in error["message"]
        await client.send(user_item("y" * 36, "idy2"))
        await client.wait_for("conversation.item.done")
        assert len(client.of_type("conversation.item.done")) == 2


def function_tools(count: int, description_chars: int) -> list[dict[str, Any]]:
    """`count` OpenAI function tools, each with a description of `description_chars`."""
    return [{"type": "function", "name": f"tool_{index}", "description": "d" * description_chars,
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
            for index in range(count)]


async def test_session_settings_kept_as_given_are_bounded(start_server) -> None:
    """Issue 26's kind "state outside the limits": `tools` (and the other fields kept as given)
    took any size a frame holds; a 900 kB tools list was kept and echoed. Now together at
    most `MAX_STORED_SETTINGS_CHARS`: 120 tools of 350-character descriptions fit; 900 kB, or
    a prompt under the bound that would take the kept settings over it, are refused and
    change nothing."""
    server = await start_server()
    async with RealtimeClient.connect(server.ws_url) as client:
        fitting = function_tools(120, 350)
        await client.send({"type": "session.update", "session": {"tools": fitting}})
        first = (await client.wait_for("session.updated"))["session"]
        assert first["tools"] == fitting
        for session in ({"tools": function_tools(900, 1000)},
                        {"prompt": {"id": "pmpt_1", "variables": {"v": "p" * 20_000}}}):
            event_id = await client.send({"type": "session.update", "session": session})
            error = (await client.wait_for("error", timeout=10))["error"]
            assert (error["code"], error["event_id"]) == ("invalid_value", event_id)
            assert str(MAX_STORED_SETTINGS_CHARS) in error["message"]
        assert error["param"] == "session.prompt"
        await client.send({"type": "session.update", "session": {"instructions": "Be brief."}})
        updated = await client.wait_for("session.updated")
        assert updated["session"]["tools"] == fitting
        assert updated["session"]["prompt"] == first["prompt"]
        assert all(len(e["session"]["tools"]) <= len(fitting)
                   and e["session"]["prompt"] == first["prompt"]
                   for e in client.of_type("session.updated"))


@pytest.mark.parametrize("field", ["item.id", "previous_item_id"])
async def test_a_huge_client_id_is_refused_and_ids_count_toward_history_chars(
        start_server, field: str) -> None:
    """Issue 26: 150 items with a 1 MB `item.id` were all accepted (+143 MB in one session),
    and `--max-history-chars 1000` still let 40 MB of ids in."""
    server = await start_server(max_history_chars=1000)
    async with RealtimeClient.connect(server.ws_url) as client:
        huge = "i" * 1_000_000
        for _ in range(3):
            event = user_item("hi", huge if field == "item.id" else None)
            if field == "previous_item_id":
                event["previous_item_id"] = huge
            event_id = await client.send(event)
            error = (await client.wait_for("error", timeout=5))["error"]
            assert error["event_id"] == event_id
            assert (error["code"], error["param"]) == ("invalid_value", field)
        longest = "i" * protocol.MAX_ID_CHARS
        for index in range(20):
            await client.send(user_item("", longest[:-2] + f"{index:02d}"))
        await client.send({"type": "fuzz.probe", "event_id": "probe"})
        await client.wait_for("error", lambda e: e["error"]["event_id"] == "probe")
        created = client.of_type("conversation.item.done")
        assert len(created) == 1000 // protocol.MAX_ID_CHARS
        assert all(len(done["item"]["id"]) == protocol.MAX_ID_CHARS for done in created)
        refused = [e["error"]["code"] for e in client.of_type("error")][3:-1]
        assert refused == ["history_limit_exceeded"] * (20 - len(created))


# ---------------------------------------------------------------------- reply length


class Streamed:
    """A responder that yields fixed deltas (to cut replies split in any way)."""

    def __init__(self, *deltas: str) -> None:
        self.deltas = deltas

    async def respond(self, prompt: Prompt) -> AsyncIterator[str]:
        for delta in self.deltas:
            yield delta


@pytest.mark.parametrize(("deltas", "max_chars", "reply"), [
    (("one two three four",), 12, "one two"),
    (("one two three four",), 13, "one two three"),
    (("one two ", "three four"), 9, "one two "),
    (("one two th", "ree four"), 11, "one two "),
    (("one", " two"), 3, "one"),
    (("abcdefghij",), 4, "abcd"),
    (("ab ", "cdefghij"), 4, "ab "),
    (("Short. ", "Reply."), 100, "Short. Reply."),
])
async def test_reply_length_limit_cuts_at_a_word_boundary(
        deltas: tuple[str, ...], max_chars: int, reply: str) -> None:
    prompt = Prompt(instructions="", turns=(ConversationTurn(role="user", text="hi"),))
    limited = ReplyLengthLimit(Streamed(*deltas), max_chars)
    out = [delta async for delta in limited.respond(prompt)]
    assert "".join(out) == reply and len(reply) <= max_chars
    assert word_prefix("hello world", 7) == "hello"


async def test_long_reply_is_cut_and_completes_normally(start_server) -> None:
    server = await start_server(max_reply_chars=20)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt("say: one two three four five six seven.")
        done = await client.wait_for("response.done")
        assert done["response"]["status"] == "completed"
        transcript = await client.wait_for("response.output_audio_transcript.done")
        assert transcript["transcript"] == "one two three four"
        sent_ms = client.of_type("response.output_audio.delta")[-1]["audio_end_ms"]
        await client.ack(response_id, sent_ms)
        heard = await client.heard(item_id)
        assert (heard["method"], heard["text"]) == ("full", "one two three four")


async def test_far_from_the_limit_a_reply_is_not_held_back() -> None:
    """A reply's last word reaches TTS as soon as the responder wrote it: far from the limit,
    nothing waits for the next delta (a held-back "minutes." cut a reply's full text short when
    a barge-in came while the previous sentence was being spoken)."""
    pulled: list[str] = []

    class Recorded:
        async def respond(self, prompt: Prompt) -> AsyncIterator[str]:
            for delta in ("The tour lasts 90 minutes.", " Bye."):
                pulled.append(delta)
                yield delta

    prompt = Prompt(instructions="", turns=(ConversationTurn(role="user", text="hi"),))
    replies = ReplyLengthLimit(Recorded(), 4000).respond(prompt)
    assert await anext(replies) == "The tour lasts 90 minutes."
    assert pulled == ["The tour lasts 90 minutes."]
    assert [delta async for delta in replies] == [" Bye."]


def spoken_session(**limits: int) -> Session:
    """A sans-I/O session under server VAD with the given history limits."""
    session = Session(SessionConfig(**limits))
    session.receive(json.dumps({"type": "session.update", "session": {"audio": {"input": {
        "turn_detection": {"type": "server_vad", "create_response": True}}}}}))
    session.take_events()
    return session


def speak(session: Session, start_ms: int) -> list[dict[str, Any]]:
    """One spoken turn of 1 s at `start_ms` of input audio, as server VAD reports it."""
    pcm16 = b"\x01\x00" * (24 * 1500)
    session.receive(json.dumps({"type": "input_audio_buffer.append",
                                "audio": base64.b64encode(pcm16).decode()}))
    session.turn_taking.on_speech_started(start_ms)
    session.turn_taking.on_speech_stopped(start_ms + 1000)
    return session.take_events()


def test_spoken_turns_and_their_replies_keep_to_max_history_items() -> None:
    """A tester's server VAD session with `--max-history-items 2` grew to 4-6 items: spoken
    turns and their automatic replies were never checked. A turn that finds the history full
    is refused with an `error` and leaves no item; a reply that would not fit is not started."""
    session = spoken_session(max_history_items=2)
    session.receive(json.dumps(user_item("one")))
    session.take_events()
    events = speak(session, 0)
    [committed] = [e for e in events if e["type"] == "input_audio_buffer.committed"]
    session.take_effects()
    session.turn_taking.on_transcription(committed["item_id"], "And two.")
    events = session.take_events()
    assert [e["error"]["code"] for e in events if e["type"] == "error"] == [
        "history_limit_exceeded"]
    assert not session.take_effects(), "no reply was started"
    assert len(session.history.ids()) == 2
    events = speak(session, 1500)
    assert [e["type"] for e in events] == ["input_audio_buffer.speech_started",
                                           "input_audio_buffer.speech_stopped", "error"]
    assert events[-1]["error"]["code"] == "history_limit_exceeded"
    assert not any(isinstance(e, Transcribe) for e in session.take_effects())
    assert len(session.history.ids()) == 2


def test_a_spoken_turn_whose_words_overflow_max_history_chars_is_dropped() -> None:
    session = spoken_session(max_history_chars=20)
    [committed] = [e for e in speak(session, 0) if e["type"] == "input_audio_buffer.committed"]
    session.turn_taking.on_transcription(committed["item_id"],
                                         "Far too many words for this history.")
    events = session.take_events()
    assert [e["type"] for e in events] == ["conversation.item.deleted", "error"]
    assert session.history.ids() == []


def test_function_items_count_their_call_id_and_name_toward_max_history_chars() -> None:
    """A function item's `call_id` and `name` (up to 64 characters each) count with its id
    and its output or arguments: one accounting of what a client makes the history hold."""
    session = Session(SessionConfig(max_history_chars=200))

    def output(item_id: str, call_id: str, text: str) -> list[dict[str, Any]]:
        return send(session, type="conversation.item.create", item={
            "type": "function_call_output", "id": item_id, "call_id": call_id,
            "output": text})

    assert [e["type"] for e in output("f1", "c" * 64, "o" * 120)] == [
        "conversation.item.added", "conversation.item.done"]  # 2 + 64 + 120 = 186
    [error] = output("f2", "d" * 10, "o" * 3)  # 186 + 2 + 10 + 3 = 201 > 200
    assert error["error"]["code"] == "history_limit_exceeded"
    assert "186 characters" in error["error"]["message"]
    called = send(session, type="conversation.item.create", item={
        "type": "function_call", "id": "f3", "call_id": "e", "name": "n" * 9,
        "arguments": "{}"})  # 186 + 2 + 1 + 9 + 2 = 200
    assert [e["type"] for e in called] == ["conversation.item.added", "conversation.item.done"]

