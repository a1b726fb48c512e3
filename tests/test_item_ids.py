"""Item and response ids: client-chosen ids never collide with the server's, and the server's
are unique across sessions (a prefix plus a random suffix, as OpenAI's)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from server.realtime.session import Session, SessionConfig
from tests.realtime_client import RealtimeClient
from tests.test_session import pcm_ms, send

SERVER_ID = re.compile(r"^(item|resp)_[0-9a-f]{20}$")


def user_item(item_id: str | None, text: str = "say: hello") -> dict[str, Any]:
    item: dict[str, Any] = {"type": "message", "role": "user",
                            "content": [{"type": "input_text", "text": text}]}
    if item_id is not None:
        item["id"] = item_id
    return {"type": "conversation.item.create", "item": item}


def created_ids(events: list[dict[str, Any]]) -> list[str]:
    return [e["item"]["id"] for e in events if e["type"] == "conversation.item.added"]


def test_client_ids_in_the_servers_old_format_do_not_collide() -> None:
    """The issue's input: a client item `item_0002`, then `response.create` (was: close 1011,
    `ValueError: duplicate item id`); and `item_0001` then a create without an id."""
    session = Session()
    for client_id in ("item_0001", "item_0002", "item_0003"):
        assert created_ids(send(session, **user_item(client_id))) == [client_id]
    events = send(session, type="response.create")
    assert "error" not in [e["type"] for e in events]
    [assistant_id] = created_ids(events)
    assert SERVER_ID.match(assistant_id)
    [generated] = created_ids(send(session, **user_item(None)))
    assert SERVER_ID.match(generated) and generated != assistant_id


def test_a_client_may_not_take_an_id_the_server_announced_for_a_speech_turn() -> None:
    """`speech_started` announces the user item's id before the commit adds it; a client
    create of that id is refused and the commit still succeeds."""
    session = Session(SessionConfig())
    session.receive(json.dumps({"type": "session.update", "session": {"audio": {"input": {
        "turn_detection": {"type": "server_vad"}}}}}))
    send(session, type="input_audio_buffer.append",
         audio=base64.b64encode(pcm_ms(400)).decode())
    session.turn_taking.on_speech_started(100)
    [started] = [e for e in session.take_events()
                 if e["type"] == "input_audio_buffer.speech_started"]
    reserved = started["item_id"]
    [error] = send(session, **user_item(reserved))
    assert error["type"] == "error" and error["error"]["code"] == "duplicate_item_id"
    session.turn_taking.on_speech_stopped(300)
    committed = [e for e in session.take_events()
                 if e["type"] == "input_audio_buffer.committed"]
    assert [e["item_id"] for e in committed] == [reserved]
    assert reserved in session.history


def test_server_ids_differ_between_sessions() -> None:
    ids = set()
    for _ in range(20):
        session = Session()
        events = send(session, type="response.create")
        ids.add(next(e["response"]["id"] for e in events if e["type"] == "response.created"))
    assert len(ids) == 20


async def test_a_client_item_named_like_a_server_item_works_end_to_end(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send(user_item("item_0002"))
        await client.send({"type": "response.create"})
        done = await client.wait_for("response.done")
        assert done["response"]["status"] == "completed"
        assert not client.of_type("error")
        await client.send(user_item(None, "say: again"))
        added = await client.wait_for("conversation.item.added",
                                      lambda e: e["item"]["role"] == "user"
                                      and e["item"]["id"] != "item_0002")
        assert SERVER_ID.match(added["item"]["id"])
        retrieved_ids = set()
        for item_id in ("item_0002", added["item"]["id"]):
            await client.send({"type": "conversation.item.retrieve", "item_id": item_id})
            retrieved = await client.wait_for("conversation.item.retrieved")
            retrieved_ids.add(retrieved["item"]["id"])
        assert retrieved_ids == {"item_0002", added["item"]["id"]}
