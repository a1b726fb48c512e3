"""A plain `websockets` client for tests and benchmarks: send client events, read server events.

It keeps every server event it received (in order) so that tests can assert on the whole
conversation, and it offers the few waits tests need (an event of a type, matching a predicate).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

Event = dict[str, Any]

INTERIM = {"enabled": True, "interim_heard": True}
"""`session.extensions` of every extension event, interim `conversation.item.heard` included."""


class RealtimeClient:
    """One session over `/v1/realtime`.

    Use `async with RealtimeClient.connect(url) as client:`. `events` holds all server events
    received so far; `wait_for` reads more until one matches.
    """

    def __init__(self, websocket: ClientConnection) -> None:
        self.websocket = websocket
        self.events: list[Event] = []
        self._consumed: set[int] = set()
        self._ids = itertools.count(1)

    @classmethod
    def connect(cls, url: str, *, extensions: dict[str, bool] | None = INTERIM,
                **kwargs: Any) -> _ClientContext:
        """Async context manager yielding a connected client (after `session.created`).

        `extensions`: the `session.extensions` it opts in with, turning server VAD off too
        (after `session.created`; its `session.updated` is then read too); by default every
        extension event, interim `conversation.item.heard` included; None: a plain OpenAI
        client with OpenAI's defaults (server VAD on), which sees OpenAI's events only until
        its first `playback.ack`."""
        return _ClientContext(url, extensions, kwargs)

    async def send(self, event: Event) -> str:
        """Send one client event (an `event_id` is added when missing); returns the event_id."""
        event.setdefault("event_id", f"evt_test_{next(self._ids)}")
        await self.websocket.send(json.dumps(event))
        return event["event_id"]

    async def send_raw(self, frame: str | bytes) -> None:
        """Send a frame exactly as given (for malformed-input tests)."""
        await self.websocket.send(frame)

    async def _receive(self, timeout: float) -> Event:
        # asyncio.timeout, not wait_for: on Python 3.11, wait_for returns a frame that arrives
        # as the task is cancelled and drops the cancellation, so a reader task looping on
        # `drain` would never end.
        async with asyncio.timeout(timeout):
            frame = await self.websocket.recv()
        event = json.loads(frame)
        self.events.append(event)
        return event

    async def wait_for(
        self, event_type: str, predicate: Callable[[Event], bool] | None = None,
        timeout: float = 20.0,
    ) -> Event:
        """Return the earliest not-yet-returned event of `event_type` matching `predicate`.

        Every received event can be returned once; events that did not match stay available
        to later waits, whatever order the waits come in. Raises TimeoutError when none
        arrives within `timeout` seconds.
        """
        deadline = asyncio.get_running_loop().time() + timeout
        scanned = 0
        while True:
            for index in range(scanned, len(self.events)):
                event = self.events[index]
                if index in self._consumed or event["type"] != event_type:
                    continue
                if predicate is None or predicate(event):
                    self._consumed.add(index)
                    return event
            scanned = len(self.events)
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"no {event_type} within {timeout} s")
            await self._receive(remaining)

    async def drain(self, seconds: float) -> list[Event]:
        """Read whatever arrives during `seconds`; returns those events."""
        start = len(self.events)
        deadline = asyncio.get_running_loop().time() + seconds
        while (remaining := deadline - asyncio.get_running_loop().time()) > 0:
            try:
                await self._receive(remaining)
            except TimeoutError:
                break
        return self.events[start:]

    def of_type(self, event_type: str, **match: Any) -> list[Event]:
        """All received events of `event_type` whose top-level fields equal `match`."""
        return [e for e in self.events if e["type"] == event_type
                and all(e.get(k) == v for k, v in match.items())]

    # ------------------------------------------------------------------ conveniences

    async def prompt(self, text: str) -> tuple[str, str]:
        """Send a typed user prompt and `response.create`; returns (response_id, item_id)."""
        await self.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]}})
        await self.send({"type": "response.create"})
        created = await self.wait_for("response.created")
        added = await self.wait_for("response.output_item.added")
        return created["response"]["id"], added["item"]["id"]

    async def ack(self, response_id: str, played_ms: int, **extra: Any) -> None:
        """Send `playback.ack` for one response."""
        await self.send({"type": "playback.ack", "response_id": response_id,
                         "played_ms": played_ms, **extra})

    async def barge_in(self, response_id: str, audio_end_ms: int, source: str = "button") -> None:
        """Send the `barge_in` extension event."""
        await self.send({"type": "barge_in", "response_id": response_id,
                         "audio_end_ms": audio_end_ms, "source": source})

    async def wait_audio_until(self, response_id: str, audio_end_ms: int,
                               timeout: float = 20.0) -> Event:
        """Wait until audio up to `audio_end_ms` of this response was sent."""
        return await self.wait_for(
            "response.output_audio.delta",
            lambda e: e["response_id"] == response_id and e["audio_end_ms"] >= audio_end_ms,
            timeout,
        )

    async def heard(self, item_id: str, predicate: Callable[[Event], bool] | None = None,
                    timeout: float = 20.0) -> Event:
        """Wait for a `conversation.item.heard` of this item (matching `predicate`)."""
        return await self.wait_for(
            "conversation.item.heard",
            lambda e: e["item_id"] == item_id and (predicate is None or predicate(e)), timeout,
        )

    async def retrieve(self, item_id: str) -> Event:
        """`conversation.item.retrieve` and return the server's item."""
        await self.send({"type": "conversation.item.retrieve", "item_id": item_id})
        event = await self.wait_for("conversation.item.retrieved",
                                    lambda e: e["item"]["id"] == item_id)
        return event["item"]

    def audio_bytes(self, response_id: str) -> bytes:
        """All PCM16 audio received for a response, concatenated."""
        return b"".join(base64.b64decode(e["delta"]) for e in
                        self.of_type("response.output_audio.delta", response_id=response_id))


async def fetch_reply_audio(url: str, prompt: str, until_ms: int | None = None,
                            timeout: float = 60.0) -> bytes:
    """The audio of the reply to `prompt` in a new session at `url` (PCM16 LE mono at the
    session's output rate), fetched at TTS speed: the audio sent so far is ACKed as played
    whenever an event arrives, so the pacing never waits. On a `--deterministic` server every
    session gets this audio, which lets tests and benchmarks put the reply's own echo on a
    microphone in advance. With `until_ms`, it returns once that much audio arrived (the
    session then closes, which cancels the reply).

    Raises:
        TimeoutError: no event for `timeout` s before the reply's `response.done`.
    """
    async with RealtimeClient.connect(url) as client:
        response_id, _ = await client.prompt(prompt)
        acked = 0
        while not [e for e in client.of_type("response.done")
                   if e["response"]["id"] == response_id]:
            sent = max((e["audio_end_ms"] for e in client.of_type(
                "response.output_audio.delta", response_id=response_id)), default=0)
            if until_ms is not None and sent >= until_ms:
                break
            if sent > acked:
                await client.ack(response_id, sent)
                acked = sent
            await client._receive(timeout)
        return client.audio_bytes(response_id)


class _ClientContext:
    def __init__(self, url: str, extensions: dict[str, bool] | None,
                 kwargs: dict[str, Any]) -> None:
        self.url = url
        self.extensions = extensions
        self.kwargs = kwargs
        self.client: RealtimeClient | None = None

    async def __aenter__(self) -> RealtimeClient:
        websocket = await connect(self.url, max_size=None, **self.kwargs)
        self.client = RealtimeClient(websocket)
        await self.client.wait_for("session.created")
        if self.extensions is not None:
            await self.client.send({"type": "session.update", "session": {
                "extensions": self.extensions, "audio": {"input": {"turn_detection": None}}}})
            await self.client.wait_for("session.updated")
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        assert self.client is not None
        await self.client.websocket.close()
