"""The send path: server events framed exactly, and an ACK's answer sent with the audio it
releases in one socket write (`server.outbound.send_events`, `server.sending.Sender.settle`)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from server.outbound import encode_event
from tests.realtime_client import RealtimeClient


def audio_delta(**extra: Any) -> dict[str, Any]:
    """An audio delta as the session emits it (base64 of 100 ms of PCM16 at 24 kHz)."""
    return {"type": "response.output_audio.delta", "event_id": "event_000007",
            "response_id": "resp_1", "item_id": "item_1", "output_index": 0,
            "content_index": 0, "delta": base64.b64encode(bytes(range(256)) * 19).decode(),
            "audio_end_ms": 1200, **extra}


@pytest.mark.parametrize("event", [
    audio_delta(),
    audio_delta(marks=[{"text": 'say "hi" \\ now', "char_start": 0, "char_end": 14},
                       {"text": "café 🎉 \u202e", "char_start": 15, "char_end": 22}]),
    {"type": "response.output_audio_transcript.delta", "event_id": "event_000008",
     "delta": 'He said "ça va?"\n'},
    {"type": "error", "event_id": "event_000009",
     "error": {"type": "invalid_request_error", "code": "x", "message": "\x00 \\ \"",
               "param": None, "event_id": "évt"}},
])
def test_every_event_is_framed_as_the_json_of_all_its_fields(event: dict[str, Any]) -> None:
    frame = encode_event(event)
    assert json.loads(frame) == event
    assert frame.decode().startswith(f'{{"type": "{event["type"]}"')


def test_an_unencodable_event_raises_before_anything_is_framed() -> None:
    with pytest.raises(UnicodeEncodeError):
        encode_event(audio_delta(marks=[{"text": "\ud800"}]))


async def test_an_ack_answer_and_the_audio_it_releases_leave_in_one_socket_write(
        start_server: Any) -> None:
    """With the default 400 ms lead and 100 ms jitter buffer, 500 ms go out before any ACK;
    an ACK of 300 ms then releases 500-700 ms, which must be written together with its
    `playback.acknowledged`: one socket write, one wake-up of the client."""
    server = await start_server(tts="uniform")
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt("tell me about tides")
        await client.wait_audio_until(response_id, 500)
        generated = 0
        while generated < 1500:  # ACKs of 0 ms release nothing; wait for audio to release
            await client.ack(response_id, 0)
            answer = await client.wait_for("playback.acknowledged")
            generated = answer["cursor"]["generated_ms"]
        assert max(e["audio_end_ms"] for e in client.of_type("response.output_audio.delta")
                   ) == 500
        (connection,) = server.demo.server.connections
        writes: list[bytes] = []
        write = connection.transport.write

        def recording_write(data: bytes) -> None:
            writes.append(bytes(data))
            write(data)

        connection.transport.write = recording_write  # type: ignore[method-assign]
        await client.ack(response_id, 300)
        await client.wait_for("playback.acknowledged",
                              lambda e: e["cursor"]["played_ms"] == 300)
        await client.wait_audio_until(response_id, 700)
    (answer_write,) = [data for data in writes if b'"playback.acknowledged"' in data]
    assert answer_write.count(b'"response.output_audio.delta"') == 2
    assert answer_write.index(b'"playback.acknowledged"') < answer_write.index(
        b'"response.output_audio.delta"')
