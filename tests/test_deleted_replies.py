"""A reply whose item the client deleted is freed (issue 26: every create / cancel / delete
cycle kept its response, about 8.7 kB, for the life of the session).

`ResponseLifecycle.release`: the response leaves the registry at once, or, when it is the
latest, once the next response starts. An event naming a freed response gets
`response_not_found` and changes nothing; the session carries on.
"""

from __future__ import annotations

from typing import Any

from server.realtime.session import Session
from tests.realtime_client import RealtimeClient
from tests.test_session import send

CYCLES = 50


def cycle(session: Session) -> tuple[str, str]:
    """`response.create`, `response.cancel`, `conversation.item.delete` of the reply's item
    (sans-I/O); returns the (response id, item id) deleted."""
    created = send(session, type="response.create")
    [response] = [e["response"] for e in created if e["type"] == "response.created"]
    [item_id] = [e["item"]["id"] for e in created if e["type"] == "conversation.item.added"]
    send(session, type="response.cancel")
    deleted = send(session, type="conversation.item.delete", item_id=item_id)
    assert [e["type"] for e in deleted] == ["conversation.item.deleted"], deleted
    return response["id"], item_id


def codes(events: list[dict[str, Any]]) -> list[str]:
    return [e["error"]["code"] for e in events if e["type"] == "error"]


def test_deleted_replies_leave_at_most_the_latest_behind() -> None:
    session = Session()
    deleted = [cycle(session) for _ in range(CYCLES)]
    assert list(session.responses) == [deleted[-1][0]]
    assert not list(session.history)


def test_an_event_naming_a_freed_reply_is_refused_and_changes_nothing() -> None:
    session = Session()
    first_id, _ = cycle(session)
    latest_id, _ = cycle(session)
    assert first_id not in session.responses
    events = send(session, type="playback.ack", response_id=first_id, played_ms=100)
    assert codes(events) == ["response_not_found"]
    events = send(session, type="response.cancel", response_id=first_id)
    assert codes(events) == ["response_not_found"]
    assert list(session.responses) == [latest_id]
    events = send(session, type="response.create")
    assert not codes(events)
    assert latest_id not in session.responses and len(session.responses) == 1


async def test_a_reply_deleted_while_it_is_spoken_is_freed_and_the_session_goes_on(
        start_server) -> None:
    """Real server, uniform voice: the item of a reply still generating and sending is
    deleted (its generation stops), then the next reply is spoken to its end."""
    server = await start_server(tts="uniform")
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt(
            "say: " + "A long sentence that keeps the voice busy. " * 8)
        await client.wait_for("response.output_audio.delta")
        await client.send({"type": "conversation.item.delete", "item_id": item_id})
        await client.wait_for("conversation.item.deleted")
        cancelled = await client.wait_for("response.done")
        assert cancelled["response"]["id"] == response_id
        assert cancelled["response"]["status"] == "cancelled"
        await client.prompt("say: Still here.")
        done = await client.wait_for("response.done")
        assert done["response"]["status"] == "completed"
        assert not client.of_type("error")
