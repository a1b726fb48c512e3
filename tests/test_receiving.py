"""The receiving side of a session (`server.receiving.Receiver`), on a real server on loopback
with the uniform test voice:

- the client's close frame ends the session while a reply is still streaming: the reply's
  responder stream (a model still writing) is closed with it;
- the idle timer counts from the last client frame: frames keep a session open past the
  timeout, and silence closes it (1000, with the reason) no earlier than the timeout after the
  last frame;
- input audio beyond the session's bound (`--max-input-speed`) holds the next frame back, not
  refused: it is applied, in order, once the bound allows;
- a frame over the event rate is refused with an `error` naming it, and the frames around it
  are applied in order.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

from server.connection import Connection
from tests.realtime_client import RealtimeClient
from tests.test_faults import until
from tests.test_generation import ScriptedResponder
from tests.test_limits import closed_with

INPUT_RATE_HZ = 24000


async def test_the_close_frame_ends_the_session_while_a_reply_streams(
    start_server: Any, served_connections: list[Connection],
) -> None:
    server = await start_server(tts="uniform")
    responder = ScriptedResponder(asyncio.Event())  # never opened: the model writes on
    server.responder.inner = responder
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt("tell me about tides")
        await client.wait_audio_until(response_id, 400)
        (connection,) = served_connections
        await client.websocket.close()
    await until(lambda: connection.session.closed, 5, "the session ends")
    await until(responder.closed.is_set, 5, "the reply's responder stream is closed")
    assert client.audio_bytes(response_id), "the reply was streaming"


async def test_the_idle_timer_counts_from_the_last_frame(start_server: Any) -> None:
    idle_s = 1.0
    server = await start_server(idle_timeout_s=idle_s)
    async with RealtimeClient.connect(server.ws_url) as client:
        for _ in range(5):  # 2 s of frames: twice the timeout, and the session stays
            await asyncio.sleep(0.4)
            await client.send({"type": "input_audio_buffer.clear"})
        await client.wait_for("input_audio_buffer.cleared")
        last_frame_at = time.monotonic()
        code, reason = await closed_with(client)
        silent_s = time.monotonic() - last_frame_at
    assert (code, reason) == (1000, "idle timeout: no client event for 1 s")
    assert silent_s >= idle_s - 0.05
    assert len(client.of_type("input_audio_buffer.cleared")) == 5


async def test_input_audio_beyond_the_bound_holds_the_next_frame_back(start_server: Any) -> None:
    server = await start_server(max_input_speed=1.0, input_window_s=1.0)
    three_seconds = bytes(3 * INPUT_RATE_HZ * 2)
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(three_seconds).decode()})
        sent_at = time.monotonic()
        await client.send({"type": "session.update", "session": {
            "type": "realtime", "instructions": "after the audio"}})
        updated = await client.wait_for(
            "session.updated", lambda e: e["session"]["instructions"] == "after the audio")
        waited_s = time.monotonic() - sent_at
        assert updated["session"]["instructions"] == "after the audio"
        assert waited_s >= 1.5, "1 s of the 3 s fit the window; the next frame waited"
        assert not client.of_type("error")


async def test_a_frame_over_the_event_rate_is_refused_between_applied_ones(
    start_server: Any,
) -> None:
    server = await start_server(max_events_per_s=5)
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        sent = [await client.send({"type": "session.update", "session": {
            "type": "realtime", "instructions": f"version {i}"}}) for i in range(6)]
        updated = [await client.wait_for("session.updated") for _ in range(5)]
        error = await client.wait_for("error")
    assert [e["session"]["instructions"] for e in updated] == [
        f"version {i}" for i in range(5)]
    assert error["error"]["code"] == "rate_limit_exceeded"
    assert error["error"]["event_id"] == sent[5]
    assert client.events.index(error) > client.events.index(updated[-1])
