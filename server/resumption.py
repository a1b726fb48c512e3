"""Resume after a dropped connection (`--resume-window-s`): the asyncio layer over
`server.resume_registry.ResumeRegistry`.

Every session's `session.created` carries `session.resume` = {"token", "window_s"}. A client
whose connection dropped opens `/v1/realtime?resume=<token>` within the window and gets the
same session back (`Connection` with the parked `Session`): its history as heard, with the
reply the drop cut calibrated at the last ACK (`server.realtime.drop.cut_at_drop`), its
settings, and `session.resumed` right after `session.created` (which carries a new token).
A refused token (expired, spent, evicted, unknown, another key's) gets a fresh session whose
`session.created` is followed by an `error` naming the reason (`resume_token_*`).

Which ends park a session (`keeps`): any drop of the network (no close frame, websockets'
keepalive timeout, a client that stopped reading: `STALLED_CLIENT_CLOSE_CODE`) and any close
by the client other than 1000 (1001 "going away" is a page reload or a closed tab). A
client's 1000 ("done"), the server's own closes (idle timeout, rate limits) and a server
shutdown end the session for good.

A client may see the drop before the server does (a Wi-Fi blip: the server's socket stays
open until keepalive notices). Its resume then ends the old connection as a drop, waits for
that session to be parked, and claims it (`Live`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection

from server.connection import Connection
from server.metrics import ServerMetrics
from server.realtime.drop import resumed_fields
from server.realtime.protocol import ProtocolError
from server.realtime.session import Session
from server.resume_registry import Live, Refused, Resumed, ResumeRegistry, owner_fingerprint
from server.sending import STALLED_CLIENT_CLOSE_REASON
from server.services import Services, SessionObserver

log = logging.getLogger(__name__)

RESUME_PARAMETER = "resume"
"""The query parameter of `/v1/realtime` that carries a resume token."""

ROUTE_HEADER = "X-Duplex-Route"
"""Set by the `scale` profile's nginx to the key it routed the connection by; a token starts
with it, so that nginx routes the token's resume by the same key to the same replica."""

TAKEOVER_TIMEOUT_S = 15.0
"""Longest wait (s) for a still-open connection to be parked when a resume takes it over
(its wind-down waits for transcripts and calibration, each bounded)."""

KEEPALIVE_CLOSE_CODE = 1011
"""websockets closes with this when a keepalive ping went unanswered: the network dropped."""


def requested_token(websocket: ServerConnection) -> str | None:
    """The resume token of an upgrade request (`?resume=`), None without one."""
    values = parse_qs(urlsplit(websocket.request.path).query).get(RESUME_PARAMETER)
    return values[-1] if values else None


class Resumption:
    """Parks dropped sessions and gives them back (one per server process).

    Args:
        window_s: `--resume-window-s`: how long a dropped session stays resumable (s).
        max_parked: `--max-parked-sessions`: most sessions parked at once.
        api_key: the server's API key (tokens are bound to it), None for open access.
        metrics: where parked, resumed, refused and dropped sessions are counted.
    """

    def __init__(self, window_s: float, max_parked: int, api_key: str | None,
                 metrics: ServerMetrics) -> None:
        self.registry: ResumeRegistry[tuple[Session, float]] = ResumeRegistry(window_s,
                                                                              max_parked)
        self._owner = owner_fingerprint(api_key)
        self._metrics = metrics
        self._tokens: dict[int, str] = {}
        self._live: dict[str, Connection] = {}
        self._parked_waiters: dict[str, asyncio.Future[None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.shutting_down = False

    async def connection(self, websocket: ServerConnection, services: Services,
                         session_id: str, observer: SessionObserver) -> Connection:
        """The `Connection` of an accepted upgrade: the parked session its `?resume=` token
        claims, else a new session `session_id` (with the refusal's `error` after its
        `session.created` when a token was refused). Its `session.created` carries a new
        token; call `ended` once it has run."""
        token = requested_token(websocket)
        session: Session | None = None
        parked_ms = 0.0
        refused = None
        if token is not None:
            outcome = await self._claim(token)
            if isinstance(outcome, Refused):
                refused = ProtocolError(outcome.code, outcome.message, param=RESUME_PARAMETER)
                self._metrics.resumes_refused.labels(outcome.code.removeprefix(
                    "resume_token_")).inc()
                log.info("refused a resume: %s", outcome.code)
            else:
                session, parked_at = outcome.value
                parked_ms = (time.monotonic() - parked_at) * 1000.0
                self._metrics.sessions_parked.dec()
                self._metrics.sessions_resumed.inc()
        connection = Connection(websocket, services, session_id, observer, session=session)
        routes = websocket.request.headers.get_all(ROUTE_HEADER)  # one from a proxy, or none
        new_token = self.registry.issue(connection.session.id, self._owner,
                                        routes[0] if len(routes) == 1 else None)
        self._tokens[id(connection)] = new_token
        self._live[connection.session.id] = connection
        connection.opening = {
            "resume": {"token": new_token, "window_s": self.registry.window_s},
            "resumed": (resumed_fields(connection.session, parked_ms)
                        if session is not None else None),
            "refused": refused,
        }
        decided: list[bool] = []

        def keep() -> bool:
            if not decided:
                decided.append(self.keeps(websocket))
            return decided[0]

        connection.keep = keep
        return connection

    def keeps(self, websocket: ServerConnection) -> bool:
        """Whether the session of a connection that just ended is parked (module doc);
        asked once per connection, as it ends."""
        if self.shutting_down:
            return False
        protocol = websocket.protocol
        received, sent = protocol.close_rcvd, protocol.close_sent
        if received is not None and (sent is None or protocol.close_rcvd_then_sent):
            return received.code != 1000
        if sent is not None:
            return (sent.code == KEEPALIVE_CLOSE_CODE
                    or sent.reason == STALLED_CLIENT_CLOSE_REASON)
        return True

    def ended(self, connection: Connection) -> None:
        """After `connection.run`: park its session when it was wound down for that (`keep`),
        else forget its token."""
        token = self._tokens.pop(id(connection))
        session = connection.session
        if self._live.get(session.id) is connection:
            del self._live[session.id]
        keep = connection.keep
        connection.keep = None
        if keep is not None and keep():
            evicted = self.registry.park(token, (session, time.monotonic()), time.monotonic())
            self._metrics.sessions_parked.inc()
            self._dropped(evicted, "evicted")
            self._schedule()
            log.info("parked the session for %g s", self.registry.window_s)
        else:
            self.registry.end(token)
        waiter = self._parked_waiters.pop(session.id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _claim(self, token: str) -> Resumed[tuple[Session, float]] | Refused:
        """Claim `token`'s session, ending its connection first when it is still open."""
        outcome = self.registry.claim(token, self._owner, time.monotonic())
        if isinstance(outcome, Live):
            old = self._live.get(outcome.session_id)
            waiter = self._parked_waiters.setdefault(
                outcome.session_id, asyncio.get_running_loop().create_future())
            if old is not None:
                log.info("a resume takes over the session's connection, still open")
                old.websocket.transport.abort()
            try:
                async with asyncio.timeout(TAKEOVER_TIMEOUT_S):
                    await asyncio.shield(waiter)
            except TimeoutError:
                pass
            outcome = self.registry.claim(token, self._owner, time.monotonic())
            if isinstance(outcome, Live):
                return Refused("resume_token_busy", "The session's previous connection "
                               "did not end in time; try again.")
        self._expire()
        return outcome

    def _schedule(self) -> None:
        """Set the expiry timer for the next parked session to expire."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        expires_s = self.registry.next_expiry_s()
        if expires_s is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(0.0, expires_s - time.monotonic()), self._expire)

    def _expire(self) -> None:
        """Drop the parked sessions whose window ended; set the timer for the next one."""
        self._dropped(self.registry.expire(time.monotonic()), "expired")
        self._schedule()

    def _dropped(self, sessions: list[tuple[Session, float]], reason: str) -> None:
        for _ in sessions:
            self._metrics.sessions_parked.dec()
            self._metrics.parked_dropped.labels(reason).inc()

    def close(self) -> None:
        """At shutdown: drop every parked session and stop the timer."""
        self.shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
        self._dropped(self.registry.expire(float("inf")), "shutdown")

    def stats(self) -> dict[str, Any]:
        """Parked and live counts (tests, benchmarks)."""
        return {"parked": self.registry.parked, "live": self.registry.live}
