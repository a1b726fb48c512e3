"""Sending and pacing one session's server events: the send loop, and the lead of generation.

`Sender` moves what the session lets out onto the socket: it carries out the session's
effects, pulls the audio pacing releases now (`Session.pull_outbound`), and sends the pending
events in order, several per socket write (`server.outbound.send_events`), all under one lock,
so server events leave in the order the session produced them. A client frame that can release
audio (an ACK, a cancel) settles at once, so its answer and that audio leave together in one
socket write. Between frames, the send loop sleeps until the deadline of the latest pull (real-
time pacing, overdue ACKs) or until something wakes it (new audio, a calibration result). It
also bounds how far a reply's synthesis runs ahead of what was sent (`wait_for_room`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection

from server.outbound import send_events
from server.realtime.session import Session
from server.services import SessionObserver

log = logging.getLogger(__name__)

STALLED_CLIENT_CLOSE_CODE = 1008
"""Close code for a client that stopped reading (RFC 6455 7.4.1 "policy violation": the
endpoint broke the terms of the connection; 1011 would blame the server)."""
STALLED_CLIENT_CLOSE_REASON = "client stopped reading"

GENERATION_AHEAD_MS = 5000
"""Synthesized audio a reply may hold unsent before its next segment is synthesized (ms): a
sentence or two of margin over the pacing lead, so playback never waits on the TTS."""


def now_ms() -> float:
    """The monotonic clock the session is fed (ms)."""
    return time.monotonic() * 1000.0


class Sender:
    """The sending side of one session over one WebSocket.

    Args:
        session: the sans-I/O session whose events and audio are sent.
        websocket: the accepted `websockets` server connection.
        observer: told of every server event before it is sent.
        send_timeout_s: longest wait (s) for the client to take data once the outgoing buffers
            are full (`Services.send_timeout_s`); then the client counts as stalled.
        carry_out_effects: carries out the session's pending effects (the connection's
            dispatch); a `WakeSender` among them calls `pull_soon`. Dropped by `close`.
    """

    def __init__(self, session: Session, websocket: ServerConnection,
                 observer: SessionObserver, send_timeout_s: float,
                 carry_out_effects: Callable[[], None]) -> None:
        self.session = session
        self.websocket = websocket
        self.observer = observer
        self.send_timeout_s = send_timeout_s
        self._carry_out_effects: Callable[[], None] | None = carry_out_effects
        self._write_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._pull_due = False
        self._deadline_ms: float | None = None
        self._sleeps_until_ms: float | None = None

    def pull_soon(self) -> None:
        """Mark the session's outbound audio due for a pull (`WakeSender`): the next `settle`
        or `apply_effects` pulls it."""
        self._pull_due = True

    def wake(self) -> None:
        """Wake the send loop now (a calibration result or new audio to send)."""
        self._wake.set()

    def apply_effects(self) -> None:
        """Carry out the session's effects without sending; output to pull wakes the send
        loop (for a caller that must not wait on the socket, e.g. the TTS's chunk queue)."""
        self._carry_out()
        if self._pull_due:
            self._wake.set()

    async def settle(self) -> None:
        """Apply the session's effects, pull the audio they released (`_pull`), then send
        the pending events in order, several per socket write (`send_events`).

        Sending waits while the outgoing buffers are full (websockets' write limit, 32 KiB, over
        the kernel's socket buffer): at most `send_timeout_s`, then the client counts as
        stalled and is closed (`_close_stalled`); the events still pending are dropped.
        """
        self._carry_out()
        if self._pull_due:
            self._pull()
        async with self._write_lock:
            events = self.session.take_events()
            for event in events:
                self.observer.server_event(event)
            events = self.session.client_events(events)
            if events and not await send_events(self.websocket, events, self.send_timeout_s):
                await self._close_stalled()

    async def run(self) -> None:
        """The send loop: pull and send whenever woken (audio queued by generation, a
        calibration result, an earlier deadline) or at the deadline of the latest pull
        (real-time pacing, overdue ACKs). Runs until cancelled."""
        while True:
            self._wake.clear()
            self._sleeps_until_ms = None
            self._pull_due = True
            await self.settle()
            deadline = self._deadline_ms
            self._sleeps_until_ms = math.inf if deadline is None else deadline
            timeout = None if deadline is None else max(0.0, (deadline - now_ms()) / 1000.0)
            await wait_set(self._wake, timeout)

    async def wait_for_room(self, response_id: str) -> None:
        """Wait while the reply has more than `GENERATION_AHEAD_MS` of audio not yet sent.

        TTS then runs a bounded distance ahead of playback: an interrupted reply wastes at most
        that much synthesis, and concurrent sessions share the TTS by need, not by arrival.
        """
        response = self.session.responses.get(response_id)
        while response is not None and (
                response.cursor.generated_ms - response.cursor.sent_ms > GENERATION_AHEAD_MS):
            self._room.clear()
            await self._room.wait()

    def close(self) -> None:
        """Let go of the effects dispatch (it holds the connection, which holds this
        sender: a reference cycle), once the session's tasks have ended."""
        self._carry_out_effects = None

    def _carry_out(self) -> None:
        if self._carry_out_effects is not None:
            self._carry_out_effects()

    def _pull(self) -> None:
        """Move the audio pacing lets out now to the session's events
        (`Session.pull_outbound`) and keep its next deadline for the send loop, which is
        woken when it sleeps until later than that. A generation waiting for room
        (`wait_for_room`) is woken once the current reply has room, not at every pull."""
        self._pull_due = False
        deadline = self.session.pull_outbound(now_ms())
        self._deadline_ms = deadline
        current = self.session.responses.get(self.session.current_response_id or "")
        if current is None or (current.cursor.generated_ms - current.cursor.sent_ms
                               <= GENERATION_AHEAD_MS):
            self._room.set()
        sleeps_until = self._sleeps_until_ms
        if deadline is not None and sleeps_until is not None and deadline < sleeps_until:
            self._wake.set()

    async def _close_stalled(self) -> None:
        """Close the socket of a client that stopped reading: the close frame goes behind the
        unread data (a client that reads again gets `STALLED_CLIENT_CLOSE_CODE`); when even
        that cannot be written within `send_timeout_s`, the TCP connection is aborted. Either
        way the receive loop ends and the connection cancels the session's tasks."""
        timeout_s = self.send_timeout_s
        log.warning("%s: the client took no data for %.1f s; closing with code %d",
                    self.session.id, timeout_s, STALLED_CLIENT_CLOSE_CODE)
        try:
            async with asyncio.timeout(timeout_s):
                await self.websocket.close(STALLED_CLIENT_CLOSE_CODE,
                                           STALLED_CLIENT_CLOSE_REASON)
        except TimeoutError:
            self.websocket.transport.abort()


async def wait_set(event: asyncio.Event, timeout_s: float | None) -> None:
    """Return once `event` is set, or after `timeout_s` seconds (None: no limit).

    Built on `asyncio.timeout`, not `asyncio.wait_for`: on Python 3.11, `wait_for` returns
    normally when the event is set in the loop iteration that cancels the waiting task, and
    the cancellation is lost (CPython gh-86296); the send loop of a closed session then waited
    forever and its `Connection.run` never returned. Here a cancellation always propagates.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()
