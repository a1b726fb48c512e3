"""The server side of one realtime WebSocket as websockets runs it, with two additions the
session needs: the client's close frame is reported as it arrives, and nothing of websockets'
making keeps a closed connection alive (`RealtimeServerConnection`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from websockets.frames import Frame, Opcode
from websockets.protocol import Event

from server.http_guard import GuardedServerConnection


class RealtimeServerConnection(GuardedServerConnection):
    """A `websockets` server connection that reports the client's close frame as it arrives
    (`on_close_frame`, called on the event loop).

    websockets' `recv()` raises `ConnectionClosed` only once the TCP connection has ended. A
    client that closes while the server's audio waits unread in its buffers (it stopped
    reading: a closed tab, a client with a full receive queue) answers the server's close
    frame only after its close timeout (10 s), and meanwhile the session generated on: a
    model's HTTP stream stayed open until the model had written its whole reply. The close
    frame ends the session instead (RFC 6455 5.5.1: after it the client reads nothing more).

    It also leaves no reference cycle of websockets' making behind once the connection has
    ended, so that a closed connection is freed by reference counting at once, not by the next
    full collection of the cyclic garbage collector (which walks every session's objects on
    the event loop: benchmarks/README.md, "Load benchmark").
    """

    on_close_frame: Callable[[], None] | None = None

    def process_event(self, event: Event) -> None:
        """websockets' processing of one incoming event; then the close-frame report."""
        super().process_event(event)
        if (isinstance(event, Frame) and event.opcode is Opcode.CLOSE
                and self.on_close_frame is not None):
            self.on_close_frame()

    async def handshake(self, *args: Any, **kwargs: Any) -> None:
        """websockets' opening handshake; then the subprotocol hook of `serve` leaves the
        protocol object: websockets binds it to that object as a closure over this
        connection (a cycle: connection, protocol, hook, connection), and only the handshake
        calls it."""
        try:
            await super().handshake(*args, **kwargs)
        finally:
            vars(self.protocol).pop("select_subprotocol", None)

    def connection_lost(self, exc: Exception | None) -> None:
        """websockets' end of the connection; then its protocol object's frame parser, a
        generator that holds the object and has nothing more to parse (the stream ended), is
        closed, and the exception that ended the parsing if any (e.g. the EOFError of a
        connection lost without a close frame; it stays the cause of every later
        `ConnectionClosed`) loses its traceback, which holds the parser's frame."""
        super().connection_lost(exc)
        protocol = self.protocol
        protocol.parser.close()
        if protocol.parser_exc is not None:
            protocol.parser_exc.__traceback__ = None
