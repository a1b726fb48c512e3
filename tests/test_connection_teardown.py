"""A session that ends, however it ends, leaves nothing running: its handler returns.

A handler that never returns keeps its session's slot (`--max-sessions`) and stops the server
from shutting down. The case here is the one the protocol fuzzer met: the session failed on a
frame just after the frame asked the sender to wake, while a reply was being paced.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.exceptions import ConnectionClosed

from server.realtime.session import Session
from tests.realtime_client import RealtimeClient

EXPLODE = '{"type": "test.explode"}'


async def test_a_session_failing_while_its_sender_wakes_still_ends(
    start_server, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`Session.receive` is made to fail on one frame after applying an ACK (which wakes the
    sender): the connection closes 1011 and its handler returns, so the server closes at once."""
    receive = Session.receive
    ack: dict[str, str] = {}

    def receive_then_fail(session: Session, frame: str | bytes) -> None:
        if frame != EXPLODE:
            receive(session, frame)
            return
        receive(session, ack["frame"])
        raise RuntimeError("a bug in the session")

    monkeypatch.setattr(Session, "receive", receive_then_fail)
    server = await start_server(tts="uniform")
    demo = server.demo.server
    try:
        async with RealtimeClient.connect(server.ws_url) as client:
            response_id, _ = await client.prompt("tell me about tides")
            await client.wait_audio_until(response_id, 200)
            ack["frame"] = json.dumps({"type": "playback.ack", "response_id": response_id,
                                       "played_ms": 100})
            with pytest.raises(ConnectionClosed):
                await client.send_raw(EXPLODE)
                await client.drain(5.0)
        demo.close()
        await asyncio.wait_for(asyncio.shield(demo.wait_closed()), 5.0)
    finally:
        for task in demo.handler_tasks:  # so that a handler that never returns fails the test
            task.cancel()                # instead of hanging the fixture's teardown
    assert "a bug in the session" in caplog.text
