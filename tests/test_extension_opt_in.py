"""Extension events are opt-in (issue 25, failing input 3): a client that never opts in sees
OpenAI's GA events only; `session.extensions` or a first `playback.ack` opts in; an opted-in
client gets one `conversation.item.heard` per settled cut unless it asks for interim ones."""

from __future__ import annotations

from server.realtime.extensions import EXTENSION_EVENTS
from tests.realtime_client import RealtimeClient

TEXT = "say: one two three four five six seven eight nine ten."


async def interrupt(client: RealtimeClient, *, truncate: bool, cancel_first: bool = False) -> str:
    """A reply cut at 900 ms, while it is still sent, by `conversation.item.truncate` then
    `response.cancel` (the `openai-agents` SDK's `interrupt()`; with `cancel_first`, the
    other way round) or by a `barge_in`; returns its item id once the cut was applied."""
    response_id, item_id = await client.prompt(TEXT)
    await client.wait_audio_until(response_id, 1200)
    if truncate:
        cut = [{"type": "conversation.item.truncate", "item_id": item_id,
                "content_index": 0, "audio_end_ms": 900}, {"type": "response.cancel"}]
        for event in reversed(cut) if cancel_first else cut:
            await client.send(event)
        await client.wait_for("conversation.item.truncated")
    else:
        await client.barge_in(response_id, 900)
    await client.wait_for("response.done")
    return item_id


async def test_a_plain_client_sees_openais_events_only(start_server) -> None:
    """... and its truncate-then-cancel interruption gets no error (OpenAI semantics)."""
    server = await start_server(tts="uniform", calibration="marks")
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        await interrupt(client, truncate=True)
        await interrupt(client, truncate=True, cancel_first=True)
        await client.drain(1.5)
    assert not {e["type"] for e in client.events} & EXTENSION_EVENTS
    assert not client.of_type("error")
    assert [e["response"]["status"] for e in client.of_type("response.done")] == [
        "cancelled", "cancelled"]
    assert [e["audio_end_ms"] for e in client.of_type("conversation.item.truncated")] == [
        900, 900]


async def test_a_first_playback_ack_opts_in(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks", lead_ms=60_000)
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        response_id, item_id = await client.prompt(TEXT)
        await client.wait_audio_until(response_id, 2000)
        await client.ack(response_id, 500)
        await client.wait_for("playback.acknowledged")
        await client.barge_in(response_id, 900)
        heard = await client.heard(item_id)
        assert heard["interrupted"] and heard["text"]


async def test_one_heard_per_settled_cut_unless_interim_ones_are_asked_for(start_server) -> None:
    """Settled: one `conversation.item.heard` per cut, carrying the calibrated text; interim:
    the cut's earlier announcements too (the empty one before calibration)."""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=60_000)
    counts = {}
    for name, extensions in (("settled", {"enabled": True}),
                             ("interim", {"enabled": True, "interim_heard": True})):
        async with RealtimeClient.connect(server.ws_url, extensions=extensions) as client:
            item_id = await interrupt(client, truncate=False)
            await client.heard(item_id, lambda e: e["method"] == "marks")
            await client.drain(1.5)
            heard = client.of_type("conversation.item.heard", item_id=item_id)
            counts[name] = len(heard)
            assert heard[-1]["text"] and heard[-1]["interrupted"], heard
    assert counts["settled"] == 1, counts
    assert counts["interim"] > 1, counts
