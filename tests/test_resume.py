"""Resume after a dropped connection (issue 26), through a real server on loopback.

A client drops mid-reply after ACKs (its TCP connection aborted, no close frame), reconnects
with the token of its `session.created` and gets its session back: the history ends at the
text a barge-in at its last ACK gets (the same reply, cut the same way, in a control session
of the same deterministic server), its settings are kept, no item is duplicated, and
`session.resumed` lists the history. Tokens are single-use, bound to the API key, expire with
the window, and a refusal gives a fresh session with a clear `error`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter
from websockets.exceptions import InvalidStatus

from tests.realtime_client import RealtimeClient

REPLY = ("say: The harbour opens at seven, the ferry leaves at half past eight, and the "
         "museum by the lighthouse stays open until the evening tide comes in.")
SETTINGS = {"instructions": "Answer like a ship's pilot.",
            "interruption": {"mode": "cancel"}}


async def metrics(http_url: str) -> str:
    """The server's `/metrics` exposition."""
    async with httpx.AsyncClient() as http:
        return (await http.get(f"{http_url}/metrics")).text


def token_of(client: RealtimeClient) -> str:
    """The resume token of the client's latest `session.created`."""
    return client.of_type("session.created")[-1]["session"]["resume"]["token"]


def drop(client: RealtimeClient) -> None:
    """End the client's TCP connection without a close frame (a network drop)."""
    client.websocket.transport.abort()


async def reply_with_acks(client: RealtimeClient, acks_ms: list[int]) -> tuple[str, str]:
    """Prompt `REPLY`; ACK each position of `acks_ms` once its audio was sent. Returns
    (response_id, item_id)."""
    response_id, item_id = await client.prompt(REPLY)
    for played_ms in acks_ms:
        await client.wait_audio_until(response_id, played_ms)
        await client.ack(response_id, played_ms)
        await client.wait_for("playback.acknowledged",
                              lambda e, p=played_ms: e["played_ms"] == p)
    return response_id, item_id


async def barge_in_heard(url: str, played_ms: int) -> dict[str, Any]:
    """The settled `conversation.item.heard` of `REPLY` barged in on at `played_ms` in a
    session of its own (the control)."""
    async with RealtimeClient.connect(url) as client:
        response_id, item_id = await reply_with_acks(client, [played_ms])
        await client.barge_in(response_id, played_ms)
        return await client.heard(item_id, lambda e: e["elapsed_ms"] is not None)


async def resume(url: str, token: str, **kwargs: Any) -> RealtimeClient:
    """A client connected with `?resume=token`, after its `session.created`."""
    return await RealtimeClient.connect(f"{url}?resume={token}", extensions=None,
                                        **kwargs).__aenter__()


async def test_a_drop_mid_reply_resumes_with_the_history_cut_at_the_last_ack(
        start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    async with RealtimeClient.connect(server.ws_url) as first:
        await first.send({"type": "session.update", "session": SETTINGS})
        await first.wait_for("session.updated", lambda e: e["session"]["instructions"]
                             == SETTINGS["instructions"])
        response_id, item_id = await reply_with_acks(first, [600, 1300, 2100])
        before = first.of_type("session.updated")[-1]["session"]
        session_id = before["id"]
        token = token_of(first)
        user_id = first.of_type("conversation.item.added")[0]["item"]["id"]
        drop(first)
    control = await barge_in_heard(server.ws_url, 2100)
    second = await resume(server.ws_url, token)
    try:
        created = second.of_type("session.created")[0]
        resumed = await second.wait_for("session.resumed")
        assert second.events[:2] == [created, resumed]
        assert created["session"]["id"] == resumed["session_id"] == session_id
        assert created["session"]["resume"]["token"] != token
        for key in ("instructions", "interruption", "extensions", "audio"):
            assert created["session"][key] == before[key], key
        assert [item["id"] for item in resumed["items"]] == [user_id, item_id]
        assistant = resumed["items"][1]
        heard = resumed["heard"][0]
        assert heard["item_id"] == item_id and heard["response_id"] == response_id
        assert (heard["text"], heard["method"], heard["interrupted"]) == (
            control["text"], control["method"], True)
        assert heard["played_ms"] == 2100
        assert 0 < len(heard["text"]) < len(heard["full_text"])
        assert assistant["content"][0]["transcript"] == heard["text"]
        # The resumed session goes on from there: the next prompt is built on the heard text.
        await second.send({"type": "session.update", "session": {
            "extensions": True, "audio": {"input": {"turn_detection": None}}}})
        await second.prompt("say: Thank you.")
        prompt = server.responder.prompts[-1]
        assert [turn.text for turn in prompt.turns] == [REPLY, heard["text"], "say: Thank you."]
        assert prompt.turns[1].interrupted
        assert not second.of_type("error")
    finally:
        await second.websocket.close()
    scraped = await metrics(server.http_url)
    assert "duplex_sessions_resumed_total 1.0" in scraped
    assert "duplex_sessions_parked 0.0" in scraped
    assert 'duplex_barge_ins_total{source="disconnect"} 1.0' in scraped  # and the control's:
    assert 'duplex_barge_ins_total{source="barge_in:button"} 1.0' in scraped


async def test_a_token_resumes_once_and_a_refusal_starts_a_fresh_session(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    async with RealtimeClient.connect(server.ws_url) as first:
        await reply_with_acks(first, [500])
        token = token_of(first)
        session_id = first.of_type("session.created")[0]["session"]["id"]
        drop(first)
    second = await resume(server.ws_url, token)
    await second.wait_for("session.resumed")
    drop(second)
    for attempt in ("used", "malformed", "unknown"):
        url_token = {"used": token, "malformed": "x" * 8,
                     "unknown": "A" * 32}[attempt]
        third = await resume(server.ws_url, url_token)
        error = await third.wait_for("error")
        await third.drain(0.3)
        assert error["error"]["code"] == f"resume_token_{attempt}"
        assert error["error"]["param"] == "resume"
        assert third.of_type("session.created")[0]["session"]["id"] != session_id
        assert not third.of_type("session.resumed")
        assert third.events[0]["type"] == "session.created"
        await third.websocket.close()
    # The second connection's own token still resumes (the refusals did not touch it).
    fourth = await resume(server.ws_url, token_of(second))
    resumed = await fourth.wait_for("session.resumed")
    assert resumed["session_id"] == session_id
    await fourth.websocket.close()


async def test_a_closed_session_is_not_kept(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    async with RealtimeClient.connect(server.ws_url) as first:
        token = token_of(first)
    await asyncio.sleep(0.2)
    second = await resume(server.ws_url, token)
    assert (await second.wait_for("error"))["error"]["code"] == "resume_token_ended"
    await second.websocket.close()


async def test_a_token_expires_with_the_window(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks", resume_window_s=0.5)
    async with RealtimeClient.connect(server.ws_url) as first:
        await reply_with_acks(first, [500])
        token = token_of(first)
        assert first.of_type("session.created")[0]["session"]["resume"]["window_s"] == 0.5
        drop(first)
    await asyncio.sleep(1.0)
    assert server.demo.resumption.stats()["parked"] == 0
    second = await resume(server.ws_url, token)
    assert (await second.wait_for("error"))["error"]["code"] == "resume_token_expired"
    await second.websocket.close()
    scraped = await metrics(server.http_url)
    assert 'duplex_parked_sessions_dropped_total{reason="expired"} 1.0' in scraped
    assert 'duplex_resumes_refused_total{reason="expired"} 1.0' in scraped


async def test_parked_sessions_are_bounded_in_count(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks", max_parked_sessions=2)
    tokens = []
    for _ in range(3):
        async with RealtimeClient.connect(server.ws_url) as client:
            tokens.append(token_of(client))
            drop(client)
        await asyncio.sleep(0.2)
    assert server.demo.resumption.stats()["parked"] == 2
    oldest = await resume(server.ws_url, tokens[0])
    assert (await oldest.wait_for("error"))["error"]["code"] == "resume_token_evicted"
    await oldest.websocket.close()
    newest = await resume(server.ws_url, tokens[2])
    await newest.wait_for("session.resumed")
    await newest.websocket.close()


async def test_a_token_is_bound_to_the_api_key(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks", api_key="right-key")
    key = {"additional_headers": {"Authorization": "Bearer right-key"}}
    async with RealtimeClient.connect(server.ws_url, **key) as first:
        await reply_with_acks(first, [500])
        token = token_of(first)
        drop(first)
    for headers in ({"Authorization": "Bearer wrong-key"}, {}):
        with pytest.raises(InvalidStatus) as refused:
            await resume(server.ws_url, token, additional_headers=headers)
        assert refused.value.response.status_code == 401
    second = await resume(server.ws_url, token, **key)
    await second.wait_for("session.resumed")
    await second.websocket.close()


async def test_a_resume_takes_over_a_connection_the_server_still_holds(start_server) -> None:
    """The client saw the drop first (its socket is still open on the server): the resume
    ends that connection as a drop, cut at its last ACK, and claims the session."""
    server = await start_server(tts="uniform", calibration="marks")
    first = await RealtimeClient.connect(server.ws_url).__aenter__()
    _, item_id = await reply_with_acks(first, [700])
    second = await resume(server.ws_url, token_of(first))
    resumed = await second.wait_for("session.resumed")
    heard = resumed["heard"][0]
    assert (heard["item_id"], heard["played_ms"], heard["interrupted"]) == (item_id, 700, True)
    control = await barge_in_heard(server.ws_url, 700)
    assert heard["text"] == control["text"]
    await second.websocket.close()
    drop(first)


async def test_a_strict_openai_client_validates_the_token_and_never_sees_resumed(
        start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    adapter = TypeAdapter(RealtimeServerEvent)
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        created = client.of_type("session.created")[0]
        assert adapter.validate_python(created, strict=True).type == "session.created"
        await client.drain(0.3)
    assert {event["type"] for event in client.events} == {"session.created"}


async def test_a_route_key_from_the_proxy_prefixes_the_token_and_bad_ones_are_ignored(
        start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    route = "0123456789abcdef0123456789abcdef"
    for headers, prefix in (([("X-Duplex-Route", route)], f"{route}."),
                            ([("X-Duplex-Route", route), ("X-Duplex-Route", route)], None),
                            ([("X-Duplex-Route", "not-hex!")], None)):
        async with RealtimeClient.connect(server.ws_url, additional_headers=headers) as client:
            token = token_of(client)
            assert token.startswith(prefix) if prefix else "." not in token
            drop(client)
        again = await resume(server.ws_url, token)
        await again.wait_for("session.resumed")
        await again.websocket.close()
