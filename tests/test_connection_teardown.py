"""A session that ends, however it ends, leaves nothing running: its handler returns; and
nothing of it is left for the cyclic garbage collector: it is freed at once.

A handler that never returns keeps its session's slot (`--max-sessions`) and stops the server
from shutting down. The case here is the one the protocol fuzzer met: the session failed on a
frame just after the frame asked the sender to wake, while a reply was being paced.
"""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from server.connection import Connection
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
        async with asyncio.timeout(5.0):
            await asyncio.shield(demo.wait_closed())
    finally:
        for task in demo.handler_tasks:  # so that a handler that never returns fails the test
            task.cancel()                # instead of hanging the fixture's teardown
    assert "a bug in the session" in caplog.text


@pytest.mark.parametrize("ending", ["close", "abort"])
async def test_a_finished_session_is_freed_without_the_cyclic_collector(
    start_server, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    """A session with a reply, ACKs, a barge-in, a calibrated second prompt and then a closing
    handshake (or a TCP connection aborted mid-reply) leaves no reference cycle behind: its
    `Connection`, `Session`, calibration and websockets objects are freed by reference counting
    as soon as its handler returns, with the cyclic garbage collector off, and so are its
    parts (receiver, sender, generations, speaker, turn work). A cycle would leave
    them, and all they hold, for the collector's next full collection, which runs on the event
    loop while every other session waits (benchmarks/README.md, "Load benchmark"). An aborted
    session is parked for a resume (`server.resumption`): its `Session` is freed the same way
    once its resume window (1 s here) has passed."""
    run = Connection.run
    refs: list[weakref.ref[Any]] = []

    async def run_and_watch(connection: Connection) -> None:
        websocket = connection.websocket
        refs.extend(weakref.ref(part) for part in (
            connection, connection.session, connection.calibration, connection.receiver,
            connection.sender, connection.generations, connection.speaker, connection.turns,
            websocket, websocket.protocol))
        await run(connection)

    monkeypatch.setattr(Connection, "run", run_and_watch)
    server = await start_server(tts="uniform", resume_window_s=1.0)
    collecting = gc.isenabled()
    gc.disable()
    try:
        async with RealtimeClient.connect(server.ws_url) as client:
            response_id, _ = await client.prompt("tell me about tides")
            await client.wait_audio_until(response_id, 600)
            await client.ack(response_id, 300)
            await client.barge_in(response_id, 300)
            await client.wait_for("conversation.item.truncated")
            second_id, _ = await client.prompt("and the moon?")
            await client.wait_audio_until(second_id, 200)
            if ending == "abort":
                client.websocket.transport.abort()
        assert refs, "no session was served"
        deadline = asyncio.get_running_loop().time() + 5.0
        while alive := [type(part).__name__ for ref in refs if (part := ref()) is not None]:
            assert asyncio.get_running_loop().time() < deadline, (
                f"still alive 5 s after the session ended: {alive}")
            await asyncio.sleep(0.05)
    finally:
        if collecting:
            gc.enable()
