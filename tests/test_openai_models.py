"""Every server event we emit validates against the `openai` package's realtime models.

Standard events are validated with `openai.types.realtime.RealtimeServerEvent`; our extensions
(`playback.acknowledged`, `conversation.item.heard`) are checked against PROTOCOL.md's fields.
"""

from __future__ import annotations

from typing import Any

from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from tests.realtime_client import RealtimeClient

SERVER_EVENT = TypeAdapter(RealtimeServerEvent)
EXTENSIONS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "playback.acknowledged": {"event_id": str, "response_id": str, "item_id": str,
                              "played_ms": int, "cursor": dict},
    "conversation.item.heard": {"event_id": str, "item_id": str, "response_id": str,
                                "text": str, "full_text": str, "played_ms": int, "method": str,
                                "asr_text": (str, type(None)), "interrupted": bool,
                                "elapsed_ms": (int, float, type(None))},
}
CURSOR_FIELDS = {"generated_ms", "sent_ms", "played_ms", "committed_ms", "audio_complete"}


def check_event(event: dict[str, Any]) -> None:
    """Raise if `event` does not match its model (standard) or its documented fields."""
    if event["type"] in EXTENSIONS:
        for name, kind in EXTENSIONS[event["type"]].items():
            assert isinstance(event.get(name), kind), (event["type"], name)
        if event["type"] == "playback.acknowledged":
            assert set(event["cursor"]) == CURSOR_FIELDS
        return
    model = SERVER_EVENT.validate_python(event)
    assert model.type == event["type"]


async def test_every_server_event_of_a_session_validates(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks", lead_ms=60_000)
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"type": "realtime", "instructions": "Be brief."}})
        await client.wait_for("session.updated")
        first, first_item = await client.prompt("say: It is sunny today.")
        await client.wait_for("response.done")
        await client.ack(first, 1600)
        await client.heard(first_item)
        second, second_item = await client.prompt("say: one two three four five six seven.")
        await client.wait_audio_until(second, 2000)
        await client.barge_in(second, 900)
        await client.heard(second_item, lambda e: e["method"] == "marks")
        third, third_item = await client.prompt("say: Truncate me please now.")
        await client.wait_for("response.done")
        await client.send({"type": "conversation.item.truncate", "item_id": third_item,
                           "content_index": 0, "audio_end_ms": 500})
        await client.wait_for("conversation.item.truncated")
        await client.send({"type": "output_audio_buffer.clear", "response_id": third})
        await client.wait_for("output_audio_buffer.cleared")
        await client.retrieve(second_item)
        await client.send({"type": "conversation.item.delete", "item_id": third_item})
        await client.wait_for("conversation.item.deleted")
        await client.send({"type": "input_audio_buffer.append", "audio": "AAAAAA=="})
        await client.send({"type": "input_audio_buffer.commit"})
        await client.wait_for("input_audio_buffer.committed")
        await client.send({"type": "input_audio_buffer.clear"})
        await client.wait_for("input_audio_buffer.cleared")
        await client.send({"type": "response.cancel"})
        await client.wait_for("error")
        await client.drain(0.3)
    seen = {event["type"] for event in client.events}
    assert {"session.created", "session.updated", "response.output_audio.delta",
            "response.done", "conversation.item.heard", "playback.acknowledged",
            "conversation.item.retrieved", "error"} <= seen
    for event in client.events:
        check_event(event)
