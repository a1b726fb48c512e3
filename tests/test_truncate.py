"""`conversation.item.truncate` is an interruption source like `barge_in`: the reply stops and
its heard text is calibrated and announced at once, not when the next prompt is built."""

from __future__ import annotations

from tests.realtime_client import RealtimeClient

REPLY = "one two three four five six seven eight nine ten eleven twelve."


async def test_a_truncate_without_a_cancel_stops_the_reply_and_calibrates_at_once(
        start_server) -> None:
    """The issue's input: a truncate without a cancel left the stored text "" until the next
    prompt. Uniform voice (400 ms a word): 1000 ms sent, the client ACKs 700 ms, then truncates
    at 900 ms while the reply still plays."""
    server = await start_server(tts="uniform", calibration="marks")
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt(f"say: {REPLY}")
        await client.wait_audio_until(response_id, 1000)
        await client.ack(response_id, 700)
        await client.send({"type": "conversation.item.truncate", "item_id": item_id,
                           "content_index": 0, "audio_end_ms": 900})
        truncated = await client.wait_for("conversation.item.truncated")
        assert (truncated["item_id"], truncated["audio_end_ms"]) == (item_id, 900)
        done = await client.wait_for("response.done")
        assert done["response"]["status"] == "cancelled"
        heard = await client.wait_for("conversation.item.heard",
                                      lambda e: e["method"] == "marks", timeout=5.0)
        assert (heard["text"], heard["played_ms"], heard["interrupted"]) == ("one two", 900, True)
        await client.send({"type": "conversation.item.retrieve", "item_id": item_id})
        retrieved = await client.wait_for("conversation.item.retrieved")
        assert retrieved["item"]["content"][0]["transcript"] == "one two"
        assert not client.of_type("error")
