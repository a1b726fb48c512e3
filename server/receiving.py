"""Receiving one session's client frames: read them in arrival order and give them to the
session, within the session's limits (idle timeout, event rate, input audio speed).

`Receiver` owns the read side of the socket: the wait for the next frame (ended early by the
client's close frame or by the idle timer), the event-rate limit (`EventRateLimiter`: refuse
with an `error` event, close 1008 on sustained excess), server VAD of appended audio before the
next frame is read, and the bound on input audio (`SessionInput.throttle`). After each frame
it settles (`Sender.settle`), so the frame's answer leaves before the next frame is read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from server.input_work import SessionInput
from server.realtime.limits import Admission, EventRateLimiter, rate_limit_error
from server.realtime.session import Session
from server.realtime_socket import RealtimeServerConnection
from server.reply_echo import ReplyEcho
from server.sending import Sender, now_ms
from server.services import Services, SessionObserver


class Receiver:
    """The receiving side of one session over one WebSocket.

    Args:
        session: the sans-I/O session the frames are given to.
        websocket: the accepted `websockets` server connection; a `RealtimeServerConnection`
            reports the client's close frame as it arrives (until `close`).
        services: the limits (`idle_timeout_s`, `max_events_per_s`).
        observer: told of every client frame given to the session.
        sender: settles after each frame (its answer is sent before the next frame is read).
        session_input: the session's input path (server VAD, the input audio bound).
        reply_echo: the echo reference of the latest reply, or None (server VAD compares the
            microphone with it).
    """

    def __init__(self, session: Session, websocket: ServerConnection, services: Services,
                 observer: SessionObserver, sender: Sender, session_input: SessionInput,
                 reply_echo: Callable[[], ReplyEcho | None]) -> None:
        self.session = session
        self.websocket = websocket
        self.observer = observer
        self.idle_timeout_s = services.idle_timeout_s
        self._sender = sender
        self._input = session_input
        self._reply_echo = reply_echo
        self._rate = (EventRateLimiter(services.max_events_per_s)
                      if services.max_events_per_s else None)
        self._receiving: asyncio.Timeout | None = None
        self._receiving_since = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._close_received = False
        if isinstance(websocket, RealtimeServerConnection):
            websocket.on_close_frame = self._on_close_frame

    async def run(self) -> None:
        """Give the client's frames to the session, one at a time, until the client's close
        frame, an idle timeout or a close for excess (event rate, input speed). Raises
        `ConnectionClosed` when the connection ended otherwise."""
        if self.idle_timeout_s is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(
                self.idle_timeout_s, self._check_idle)
        while (frame := await self._next_frame()) is not None:
            if not await self._apply_frame(frame):
                return

    def close(self) -> None:
        """Stop the idle timer and let go of the socket's close-frame callback (the socket
        would hold this receiver, a reference cycle, as long as it lives)."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if isinstance(self.websocket, RealtimeServerConnection):
            self.websocket.on_close_frame = None

    async def _next_frame(self) -> str | bytes | None:
        """The next client frame; None once the client's close frame arrived
        (`RealtimeServerConnection`), or once the connection was closed for being idle (no
        frame for `Services.idle_timeout_s`: close 1000 with the reason). Raises
        `ConnectionClosed` when the connection ended.

        The wait's timeout has no timer of its own: `_check_idle` (one timer per idle period,
        not one per frame) expires it once it has lasted `idle_timeout_s`, and the close frame
        expires it at once (`_on_close_frame`).
        """
        if self._close_received:
            return None
        self._receiving_since = asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(None) as receiving:
                self._receiving = receiving
                try:
                    return await self.websocket.recv()
                finally:
                    self._receiving = None
        except TimeoutError:
            if self._close_received:
                return None
            await self._close(1000, f"idle timeout: no client event for {self.idle_timeout_s:g} s")
            return None

    def _on_close_frame(self) -> None:
        """The client's close frame arrived: the session ends now (the receive wait of
        `_next_frame` expires, and the connection cancels the reply and closes its LLM
        stream), not when the TCP connection ends."""
        self._close_received = True
        receiving = self._receiving
        if receiving is not None and not receiving.expired():
            receiving.reschedule(asyncio.get_running_loop().time())

    def _check_idle(self) -> None:
        """Timer callback: expire the receive wait of `_next_frame` once it has lasted
        `idle_timeout_s`; otherwise look again when the current (or next) wait could have."""
        idle_s = self.idle_timeout_s
        assert idle_s is not None
        loop = asyncio.get_running_loop()
        now = loop.time()
        receiving = self._receiving
        since = self._receiving_since if receiving is not None else now
        if receiving is not None and now >= since + idle_s:
            receiving.reschedule(now)  # a frame taken meanwhile still wins: look again later
            since = now
        self._idle_timer = loop.call_at(since + idle_s, self._check_idle)

    async def _close(self, code: int, reason: str) -> None:
        """Close the connection from this side, discarding the frames the client still sends
        until it answers: reading may be paused (a full receive queue), and only reading lets
        websockets see the client's close frame."""
        closing = asyncio.ensure_future(self.websocket.close(code, reason))
        with contextlib.suppress(ConnectionClosed):
            async for _ in self.websocket:
                pass
        await closing

    async def _apply_frame(self, frame: str | bytes) -> bool:
        """Give one client frame to the session, or refuse it above the event rate (an `error`
        event); False once the connection was closed for sustained excess (1008).

        The server VAD of appended audio runs on the input workers before the next frame is
        read, so the session sees its turn events where it saw them when VAD ran inline; and
        input audio beyond the session's bound holds the next frame back
        (`SessionInput.detect_speech`, `SessionInput.throttle`)."""
        clock_ms = now_ms()
        rate = self._rate
        admission = rate.admit(clock_ms) if rate is not None else Admission.ACCEPT
        input_end_ms = self.session.input_turns.audio.end_ms
        if rate is None or admission is Admission.ACCEPT:
            self.session.set_clock(clock_ms)
            self.observer.client_event(self.session.receive(frame))
        else:
            self.session.refuse(rate_limit_error(frame, rate))
        settle = self._sender.settle
        await settle()
        await self._input.detect_speech(self._reply_echo, settle)
        if admission is Admission.CLOSE:
            await self._close(1008, "event rate limit exceeded")
            return False
        if not await self._input.throttle(self.session.input_turns.audio.end_ms - input_end_ms,
                                          self.websocket):
            await self._close(1008, "input audio faster than the bound (--max-input-speed)")
            return False
        return True
