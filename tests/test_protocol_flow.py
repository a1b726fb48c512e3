"""The main flow over a real server on loopback with a plain `websockets` client."""

from __future__ import annotations

import asyncio

from tests.realtime_client import RealtimeClient

REPLY = "one two three four five six seven eight nine ten eleven twelve."

LIFECYCLE = [
    "response.created", "conversation.item.added", "response.output_item.added",
    "response.content_part.added",
]
TERMINALS = [
    "response.output_audio.done", "response.output_audio_transcript.done",
    "response.content_part.done", "response.output_item.done", "conversation.item.done",
    "response.done",
]


def _lifecycle(client: RealtimeClient, response_id: str) -> list[str]:
    """Event types from this response's `response.created` on, deltas and extensions left out."""
    start = next(i for i, e in enumerate(client.events)
                 if e["type"] == "response.created" and e["response"]["id"] == response_id)
    skip = ("response.output_audio.delta", "response.output_audio_transcript.delta",
            "playback.acknowledged", "conversation.item.heard")
    return [e["type"] for e in client.events[start:] if e["type"] not in skip]


async def test_typed_prompt_acks_barge_in_then_second_prompt(start_server) -> None:
    server = await start_server(tts="uniform", calibration="off")
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt(f"say: {REPLY}")
        first = await client.wait_for("response.output_audio.delta")
        assert first["marks"], "the first delta of a TTS chunk carries word marks"
        assert first["marks"][0]["text"] == "one"
        assert (first["marks"][0]["start_ms"], first["marks"][0]["end_ms"]) == (0, 400)
        for played in (300, 600, 900):
            await client.wait_audio_until(response_id, played)
            await client.ack(response_id, played)
            ack = await client.wait_for("playback.acknowledged")
            assert ack["played_ms"] == played
            assert ack["cursor"]["played_ms"] == played
        await client.barge_in(response_id, 1000)
        done = await client.wait_for("response.done")
        assert done["response"]["id"] == response_id
        assert done["response"]["status"] == "cancelled"
        truncated = await client.wait_for("conversation.item.truncated")
        assert (truncated["item_id"], truncated["audio_end_ms"]) == (item_id, 1000)
        heard = await client.heard(item_id)
        assert heard["text"] == ""
        assert heard["full_text"] == REPLY
        assert heard["interrupted"] is True
        await client.drain(0.6)
        done_index = client.events.index(done)
        assert not [e for e in client.events[done_index:]
                    if e["type"] == "response.output_audio.delta"
                    and e["response_id"] == response_id]
        assert len(client.of_type("response.done")) == 1
        sent = [e["audio_end_ms"] for e in client.of_type("response.output_audio.delta")]
        assert sent == sorted(sent) and sent[-1] <= 900 + 400 + 100 + 100
        item = await client.retrieve(item_id)
        assert item["content"][0]["transcript"] == ""

        second_id, _ = await client.prompt("say: Hello again.")
        assert second_id != response_id
        done2 = await client.wait_for("response.done", timeout=10)
        assert done2["response"]["id"] == second_id
        assert done2["response"]["status"] == "completed"
        assert _lifecycle(client, second_id) == LIFECYCLE + TERMINALS
        deltas = [e["type"] for e in client.events if e.get("response_id") == second_id
                  and e["type"].endswith(".delta")]
        assert deltas[0] == "response.output_audio_transcript.delta"
        assert "response.output_audio.delta" in deltas


async def test_full_ack_of_complete_reply_stores_full_text(start_server) -> None:
    server = await start_server(tts="uniform", calibration="off", lead_ms=60_000)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt("say: It is sunny today.")
        await client.wait_for("response.done")
        await client.ack(response_id, 1200)
        await client.drain(0.2)
        assert not client.of_type("conversation.item.heard")
        assert (await client.retrieve(item_id))["content"][0]["transcript"] == ""
        await client.ack(response_id, 1600)
        heard = await client.heard(item_id)
        assert (heard["text"], heard["method"], heard["interrupted"]) == (
            "It is sunny today.", "full", False)
        assert (await client.retrieve(item_id))["content"][0]["transcript"] == heard["text"]


async def test_partial_ack_of_complete_reply_is_not_stored(start_server) -> None:
    server = await start_server(tts="uniform", calibration="off", lead_ms=60_000)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt("say: It is sunny today.")
        await client.wait_for("response.done")
        await client.ack(response_id, 1599)
        await client.send({"type": "output_audio_buffer.clear", "response_id": response_id})
        heard = await client.heard(item_id)
        assert (heard["text"], heard["interrupted"]) == ("", True)
        assert (await client.retrieve(item_id))["content"][0]["transcript"] == ""


async def test_no_acks_still_finishes_in_real_time(start_server) -> None:
    server = await start_server(tts="uniform", calibration="off", lead_ms=200)
    async with RealtimeClient.connect(server.ws_url) as client:
        loop = asyncio.get_running_loop()
        started = loop.time()
        response_id, _ = await client.prompt("say: one two three four five.")
        done = await client.wait_for("response.done", timeout=10)
        elapsed = loop.time() - started
        assert done["response"]["status"] == "completed"
        assert len(client.audio_bytes(response_id)) == 2000 * 48
        assert elapsed >= 1.0, "with no ACKs the server paces in real time"
