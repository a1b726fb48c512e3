"""The server side of `bench_server`'s barge-in tables: a `DemoServer` whose sockets are probed.

`ProbedServer` wraps each connection in a `ProbedSocket`, which timestamps a `barge_in` frame as
soon as websockets parses it and every audio delta and `response.done` the server frames, per
(session, response): no server code is changed.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode

from server.app import DemoServer
from server.services import Services


@dataclass(slots=True)
class ResponseProbe:
    """Server-side observations of one response. Times are `time.perf_counter()` seconds.

    Attributes:
        barge_parsed_at: websockets parsed the client's `barge_in` frame for it
            (`Connection.process_event`, called from `data_received`).
        barge_dispatched_at: the server's receive loop took that frame from websockets.
        sent_ms_at_barge: `audio_end_ms` of its last audio delta handed to the socket before
            `barge_parsed_at`.
        last_end_ms: `audio_end_ms` of its latest audio delta handed to the socket.
        audio_after_barge: times its audio deltas were handed to the socket at or after
            `barge_parsed_at` (a correct barge-in leaves this empty).
        done_at, done_status: when its `response.done` was handed to the socket, and status.
    """

    barge_parsed_at: float | None = None
    barge_dispatched_at: float | None = None
    sent_ms_at_barge: int = 0
    last_end_ms: int = 0
    audio_after_barge: list[float] = field(default_factory=list)
    done_at: float | None = None
    done_status: str = ""


_AUDIO_PREFIX = '{"type": "response.output_audio.delta"'
_DONE_PREFIX = '{"type": "response.done"'
_CREATED_PREFIX = '{"type": "session.created"'


class ProbedSocket:
    """Wraps a server `ServerConnection` to timestamp barge-ins and outgoing audio.

    The server's `Connection` iterates the socket and frames its events with the socket's
    protocol object (`server.outbound.send_events`); both are observed here and forwarded
    unchanged, every other attribute is the wrapped connection's. The socket's
    `process_event` is wrapped too, to see a `barge_in` frame as soon as websockets parses it.
    """

    def __init__(self, inner: ServerConnection,
                 probes: dict[tuple[str, str], ResponseProbe]) -> None:
        self._inner = inner
        self._probes = probes
        self._session_id = ""
        parse = inner.process_event

        def process_event(event: Any) -> None:
            if isinstance(event, Frame) and event.opcode is Opcode.TEXT:
                self._on_barge(bytes(event.data), parsed=True)
            parse(event)

        inner.process_event = process_event  # type: ignore[method-assign]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __aiter__(self) -> AsyncIterator[str | bytes]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[str | bytes]:
        async for frame in self._inner:
            self._on_barge(frame.encode() if isinstance(frame, str) else frame, parsed=False)
            yield frame

    def _probe(self, response_id: str) -> ResponseProbe:
        return self._probes.setdefault((self._session_id, response_id), ResponseProbe())

    def _on_barge(self, data: bytes, *, parsed: bool) -> None:
        if b'"barge_in"' not in data:
            return
        now = time.perf_counter()
        probe = self._probe(json.loads(data)["response_id"])
        if parsed and probe.barge_parsed_at is None:
            probe.barge_parsed_at = now
            probe.sent_ms_at_barge = probe.last_end_ms
        elif not parsed and probe.barge_dispatched_at is None:
            probe.barge_dispatched_at = now

    @property
    def protocol(self) -> _ProbedProtocol:
        """The connection's Sans-I/O protocol, whose `send_text` the server's
        `send_events` frames every event with: each frame is recorded there."""
        return _ProbedProtocol(self._inner.protocol, self._record)

    def _record(self, message: str) -> None:
        """Timestamp an outgoing server event (audio end, response.done, the session id)."""
        now = time.perf_counter()
        if message.startswith(_AUDIO_PREFIX):
            event = json.loads(message)
            probe = self._probe(event["response_id"])
            probe.last_end_ms = event["audio_end_ms"]
            if probe.barge_parsed_at is not None:
                probe.audio_after_barge.append(now)
        elif message.startswith(_DONE_PREFIX):
            response = json.loads(message)["response"]
            probe = self._probe(response["id"])
            probe.done_at, probe.done_status = now, response["status"]
        elif message.startswith(_CREATED_PREFIX):
            self._session_id = json.loads(message)["session"]["id"]


class _ProbedProtocol:
    """A `websockets` protocol object whose `send_text` hands each frame's text to `record`
    first; every other attribute is the wrapped protocol's."""

    def __init__(self, inner: Any, record: Callable[[str], None]) -> None:
        self._inner = inner
        self._record = record

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def send_text(self, data: bytes, fin: bool = True) -> None:
        """Record the frame, then frame it unchanged."""
        self._record(data.decode())
        self._inner.send_text(data, fin)


class ProbedServer(DemoServer):
    """`DemoServer` whose connections are `ProbedSocket`s; `probes` keyed (session, response)."""

    def __init__(self, services: Services) -> None:
        super().__init__(services)
        self.probes: dict[tuple[str, str], ResponseProbe] = {}

    async def _handle(self, websocket: ServerConnection) -> None:
        await super()._handle(ProbedSocket(websocket, self.probes))  # type: ignore[arg-type]
