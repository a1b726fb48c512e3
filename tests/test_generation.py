"""The reply tasks of a session (`server.generation.Generations`), on a real server on loopback
with the uniform test voice and a scripted responder in place of the demo's (a model that
writes part of its reply, then waits or fails):

- a reply's first sentence is spoken while the responder is still writing the rest;
- a cancel closes the responder's stream (an LLM's HTTP stream) at once, mid-reply;
- a responder that fails mid-reply, after its first sentence was being spoken, ends the
  response `failed` with an `error` that says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from server.responders.prompt import Prompt, ResponderError
from tests.realtime_client import RealtimeClient
from tests.test_faults import play_fully, until

FIRST = "The tide comes in twice a day. "
REST = "The moon pulls the sea."


class ScriptedResponder:
    """Writes `FIRST`, waits for `gate` (None: goes on at once), then fails with `failure` or
    writes `REST`. `closed` is set when its stream was closed, however it ended."""

    def __init__(self, gate: asyncio.Event | None = None, failure: str | None = None) -> None:
        self.gate = gate
        self.failure = failure
        self.closed = asyncio.Event()

    async def respond(self, prompt: Prompt) -> AsyncIterator[str]:
        try:
            yield FIRST
            if self.gate is not None:
                await self.gate.wait()
            if self.failure is not None:
                raise ResponderError(self.failure)
            yield REST
        finally:
            self.closed.set()


async def scripted_server(start_server: Any, responder: ScriptedResponder) -> Any:
    server = await start_server(tts="uniform")
    server.responder.inner = responder
    return server


async def test_the_first_sentence_is_spoken_while_the_responder_still_writes(
    start_server: Any,
) -> None:
    gate = asyncio.Event()
    responder = ScriptedResponder(gate)
    server = await scripted_server(start_server, responder)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt("tell me about tides")
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == response_id)
        assert not responder.closed.is_set(), "the responder is still writing"
        gate.set()
        done = await play_fully(client, response_id)
        transcript = await client.wait_for("response.output_audio_transcript.done")
    assert done["response"]["status"] == "completed"
    assert transcript["transcript"] == FIRST + REST
    assert responder.closed.is_set()


async def test_a_cancel_closes_the_responders_stream_mid_reply(start_server: Any) -> None:
    responder = ScriptedResponder(asyncio.Event())  # never opened: the model writes on
    server = await scripted_server(start_server, responder)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt("tell me about tides")
        await client.wait_audio_until(response_id, 400)
        await client.send({"type": "response.cancel"})
        done = await client.wait_for("response.done")
        await until(responder.closed.is_set, 5, "the responder's stream is closed")
    assert done["response"]["id"] == response_id
    assert done["response"]["status"] == "cancelled"


async def test_a_responder_failing_mid_reply_fails_the_response_with_its_reason(
    start_server: Any,
) -> None:
    gate = asyncio.Event()
    responder = ScriptedResponder(gate, failure="the model went away")
    server = await scripted_server(start_server, responder)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt("tell me about tides")
        await client.wait_audio_until(response_id, 400)
        gate.set()
        done = await play_fully(client, response_id)
        error = await client.wait_for("error")
    assert done["response"]["status"] == "failed"
    assert "the model went away" in error["error"]["message"]
    assert error["error"]["code"] == "generation_failed"
    assert responder.closed.is_set()
