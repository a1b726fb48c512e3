"""HTTP + WebSocket on one port: the static page from `web/`, `/healthz`, `/metrics` and
`/v1/realtime`.

Built on the `websockets` asyncio server: plain GET requests are answered in `process_request`
(static files, health, Prometheus metrics from `server.metrics`), upgrades on `/v1/realtime`
become one `Connection` each. Upgrades are refused at the handshake when their `Origin` is
neither this server's own origin nor explicitly allowed (403), when `--api-key` is set and they
do not carry it (401, `server.access`), and when `--max-sessions` sessions are already open
(503). Every response carries a Content-Security-Policy that allows only this origin,
`X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`.
"""

from __future__ import annotations

import asyncio
import http
import logging
import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from server.access import ApiKeyAccess, login_page, redacting_logger, select_subprotocol
from server.connection import Connection
from server.http_guard import check_request, http_response, strip_head_body, text_response
from server.logs import SESSION_ID
from server.metrics import CONTENT_TYPE, METRICS_PATH, ServerMetrics
from server.metrics_port import MetricsHttpServer
from server.realtime.events import EventLog
from server.realtime_socket import RealtimeServerConnection
from server.resumption import Resumption
from server.services import Services
from server.session_slots import SessionSlots

log = logging.getLogger(__name__)

WEB_ROOT = Path(__file__).resolve().parent.parent / "web"
"""The static page served at `/` (static ES modules, no build step)."""

REALTIME_PATH = "/v1/realtime"
LOGOUT_PATH = "/logout"
"""With an API key: revokes the login cookie the browser sends, removes it, redirects to `/`."""
MAX_WEBSOCKET_FRAME_BYTES = 4 * 1024 * 1024
"""Default `--max-frame-bytes`: websockets closes the socket (1009) above this; the protocol
layer answers smaller oversized frames with an error event (`protocol.MAX_FRAME_CHARS`)."""
MAX_SESSIONS = 32
"""Default `--max-sessions`: concurrent realtime sessions; the next handshake gets 503."""
PING_INTERVAL_S = 20.0
PING_TIMEOUT_S = 20.0
"""Default websockets keepalive: a ping every 20 s, closed (1011) when unanswered for 20 s."""
RESUME_WINDOW_S = 60.0
"""Default `--resume-window-s` (s): a page reload, a Wi-Fi blip or a closed laptop lid that
comes back within a minute finds its conversation."""
MAX_PARKED_SESSIONS = 32
"""Default `--max-parked-sessions`: as many as `MAX_SESSIONS`, so a server whose every
client dropped at once can give every one of them its session back."""
RETRY_AFTER_S = 10
"""`Retry-After` of a 503 for a full server (s)."""

SHUTDOWN_GRACE_S = 2.0
"""At shutdown, a client has this long (s) to complete the closing handshake (code 1001);
then its TCP connection is aborted (a client that stopped reading never answers)."""
WEBSOCKET_WRITE_LIMIT_BYTES = 2**15
"""Outgoing bytes websockets buffers per connection before a send waits (its default, 32 KiB,
over the kernel's socket buffer); `Services.send_timeout_s` bounds that wait."""

_CONTENT_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
                  ".html": "text/html", ".json": "application/json", ".svg": "image/svg+xml"}


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Limits and access of the listening socket (the `--max-*`, `--ping-*` and `--api-key`
    flags; see README.md).

    Attributes:
        max_frame_bytes: largest WebSocket message (bytes); larger ones close with 1009.
        max_sessions: concurrent realtime sessions; more are refused with HTTP 503.
        ping_interval_s: keepalive ping interval (s); None: no keepalive.
        ping_timeout_s: close (1011) when a ping is unanswered this long (s); None: never.
        api_key: shared secret every request but `/healthz` must carry; None: open access.
        metrics_port: also serve `/metrics` on this port of the same host, from a thread of
            its own (`MetricsHttpServer`; 0: any free port); None: only on the main port.
        allowed_hosts: `Host` names served besides IP addresses and `localhost`
            (`--allow-host` and a bound host name; `*`: any; `http_guard.host_allowed`).
        resume_window_s: how long a dropped session stays resumable with its token (s,
            `server.resumption`); 0: sessions end with their connection.
        max_parked_sessions: most dropped sessions parked at once (the oldest goes first).
    """

    max_frame_bytes: int = MAX_WEBSOCKET_FRAME_BYTES
    max_sessions: int = MAX_SESSIONS
    ping_interval_s: float | None = PING_INTERVAL_S
    ping_timeout_s: float | None = PING_TIMEOUT_S
    api_key: str | None = field(default=None, repr=False)
    metrics_port: int | None = None
    allowed_hosts: tuple[str, ...] = ()
    resume_window_s: float = RESUME_WINDOW_S
    max_parked_sessions: int = MAX_PARKED_SESSIONS


BETA_REFUSAL = ("this server speaks the GA OpenAI Realtime protocol only: the beta protocol "
                "('OpenAI-Beta: realtime=v1', subprotocol 'openai-beta.realtime-v1') is not "
                "supported; use a GA client (e.g. the openai package's client.realtime, not "
                "client.beta.realtime)\n")
"""Body of the 400 answer to a beta-protocol client: its event names differ, so it would hear
nothing it understands (issue 25)."""


def asks_for_beta(headers: Headers) -> bool:
    """True when an upgrade asks for OpenAI's beta Realtime protocol: an `OpenAI-Beta` header
    naming `realtime=v1` (server clients), or the `openai-beta.realtime-v1` subprotocol
    (browser clients, which cannot set headers)."""
    beta = ",".join(headers.get_all("OpenAI-Beta")).replace(" ", "").lower()
    protocols = ",".join(headers.get_all("Sec-WebSocket-Protocol")).replace(" ", "").lower()
    return "realtime=v1" in beta.split(",") or "openai-beta.realtime-v1" in protocols.split(",")


def static_response(path: str, web_root: Path = WEB_ROOT) -> Response:
    """Answer a GET for a file under `web_root` (index.html for `/`); 404 outside it, and for
    any name the file system refuses (e.g. one that is within `http_guard.MAX_PATH_BYTES` but
    past PATH_MAX once joined to `web_root`)."""
    relative = urlsplit(path).path.lstrip("/") or "index.html"
    try:
        target = (web_root / relative).resolve()
        if not target.is_relative_to(web_root.resolve()) or not target.is_file():
            raise FileNotFoundError(relative)
        body = target.read_bytes()
    except OSError:
        return text_response(http.HTTPStatus.NOT_FOUND, "not found\n")
    content_type = _CONTENT_TYPES.get(target.suffix) or (
        mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    )
    if content_type.startswith("text/") or content_type == "application/json":
        content_type += "; charset=utf-8"
    return http_response(http.HTTPStatus.OK, body, content_type)


def origin_allowed(origin: str | None, host: str | None, allowed: Sequence[str]) -> bool:
    """True when a WebSocket upgrade may proceed.

    Args:
        origin: the request's `Origin` header (absent for non-browser clients: allowed).
        host: the request's `Host` header; an Origin whose host:port equals it is same-origin.
        allowed: extra origins from `--allow-origin` (exact `scheme://host:port`, or `*`).
    """
    if origin is None:
        return True
    if "*" in allowed or origin in allowed:
        return True
    return host is not None and urlsplit(origin).netloc == host


def metrics_http_server(metrics: ServerMetrics, host: str, port: int,
                        options: ServerOptions) -> MetricsHttpServer:
    """`/metrics` on a port of its own (`--metrics-port`), with this server's HTTP guards and
    allowed hosts; with `options.api_key`, only for requests that carry it (as on the main
    port)."""
    if options.api_key is None:
        return MetricsHttpServer(metrics, host, port, None, options.allowed_hosts)
    access = ApiKeyAccess(options.api_key)
    return MetricsHttpServer(metrics, host, port, access.authorized, options.allowed_hosts,
                             redacting_logger("websockets.server", access.secrets()))


class DemoServer:
    """The demo server: one port, static page, health check and realtime sessions.

    Args:
        services: TTS, responder and calibration shared by all sessions (the synthesizer and
            the responder are wrapped to be measured: `ServerMetrics.instrument`).
        allowed_origins: extra origins allowed to open `/v1/realtime`.
        options: limits and access (defaults: `ServerOptions()`, open access).
        metrics: the metrics served at `/metrics` (default: new ones of this server's own).
        slots: the count `options.max_sessions` limits (default: one of this server's own;
            the workers of `--workers` share one, `server.workers`).
    """

    def __init__(self, services: Services, allowed_origins: Sequence[str] = (),
                 options: ServerOptions | None = None,
                 metrics: ServerMetrics | None = None,
                 slots: SessionSlots | None = None) -> None:
        self.metrics = metrics or ServerMetrics()
        self.services = self.metrics.instrument(services)
        self.allowed_origins = tuple(allowed_origins)
        self.options = options or ServerOptions()
        self.access = ApiKeyAccess(self.options.api_key) if self.options.api_key else None
        self.slots = slots or SessionSlots(self.options.max_sessions)
        self._open: set[ServerConnection] = set()
        self.resumption = (Resumption(self.options.resume_window_s,
                                      self.options.max_parked_sessions, self.options.api_key,
                                      self.metrics)
                           if self.options.resume_window_s > 0 else None)
        self.server: Server | None = None
        self.metrics_server: MetricsHttpServer | None = None

    @property
    def open_sessions(self) -> int:
        """Realtime sessions open now (in every worker sharing `slots`)."""
        return self.slots.open

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        refused = check_request(request, self.options.allowed_hosts)
        if refused is not None:
            return refused
        path = urlsplit(request.path).path
        if path == REALTIME_PATH:
            return self._check_upgrade(request)
        if path == "/healthz":
            return text_response(http.HTTPStatus.OK, "ok\n")
        if path == METRICS_PATH:
            if self.access is not None and not self.access.authorized(request.headers):
                return text_response(http.HTTPStatus.UNAUTHORIZED, "access key required: send "
                             "'Authorization: Bearer <key>'\n",
                             {"WWW-Authenticate": 'Bearer realm="duplex-demo"'})
            return http_response(http.HTTPStatus.OK, self.metrics.exposition(), CONTENT_TYPE)
        if self.access is not None:
            refused = self._check_page(path, request)
            if refused is not None:
                return refused
        return static_response(path)

    def _check_upgrade(self, request: Request) -> Response | None:
        """Refuse a realtime upgrade (400 beta protocol, 403 origin, 401 key, 503 full) or let
        it proceed (None)."""
        if asks_for_beta(request.headers):
            log.warning("refused a WebSocket upgrade asking for the beta Realtime protocol")
            self.metrics.sessions_refused.labels("beta").inc()
            return text_response(http.HTTPStatus.BAD_REQUEST, BETA_REFUSAL)
        origin = request.headers.get("Origin")
        if not origin_allowed(origin, request.headers.get("Host"), self.allowed_origins):
            log.warning("refused a WebSocket upgrade from a foreign origin")
            self.metrics.sessions_refused.labels("origin").inc()
            return text_response(http.HTTPStatus.FORBIDDEN, "origin not allowed\n")
        if self.access is not None and not self.access.authorized(request.headers):
            log.warning("refused a WebSocket upgrade without the API key")
            self.metrics.sessions_refused.labels("api_key").inc()
            return text_response(http.HTTPStatus.UNAUTHORIZED,
                         "missing or wrong API key: send 'Authorization: Bearer <key>' or the "
                         "'openai-insecure-api-key.<key>' subprotocol, or open the page with "
                         "/?key=<key> first\n",
                         {"WWW-Authenticate": 'Bearer realm="duplex-demo"'})
        if self.slots.full():
            log.warning("refused a session: %d sessions are open", self.slots.open)
            self.metrics.sessions_refused.labels("full").inc()
            return text_response(http.HTTPStatus.SERVICE_UNAVAILABLE,
                         f"too many sessions: this server holds at most "
                         f"{self.options.max_sessions} at once; try again later\n",
                         {"Retry-After": str(RETRY_AFTER_S)})
        return None

    def _check_page(self, path: str, request: Request) -> Response | None:
        """With an API key: log a browser in (`/?key=`), or refuse a request without the key."""
        assert self.access is not None
        if path == LOGOUT_PATH:
            return http_response(http.HTTPStatus.SEE_OTHER, b"", "text/plain; charset=utf-8",
                                 {"Location": "/",
                                  "Set-Cookie": self.access.logout(request.headers)})
        key = self.access.login_key(request.path)
        if key is not None:
            if self.access.login_matches(key):
                # Always to `/`: the key leaves the address bar, and the redirect's target
                # never depends on the request.
                return http_response(http.HTTPStatus.SEE_OTHER, b"", "text/plain; charset=utf-8",
                                     {"Location": "/",
                                      "Set-Cookie": self.access.login_cookie(request.headers)})
            return http_response(http.HTTPStatus.UNAUTHORIZED, login_page(wrong_key=True),
                                 "text/html; charset=utf-8")
        if self.access.authorized(request.headers):
            return None
        if path in ("/", "/index.html"):
            return http_response(http.HTTPStatus.UNAUTHORIZED, login_page(wrong_key=False),
                                 "text/html; charset=utf-8")
        return text_response(http.HTTPStatus.UNAUTHORIZED, "access key required: open / first\n")

    async def _handle(self, websocket: ServerConnection) -> None:
        if urlsplit(websocket.request.path).path != REALTIME_PATH:
            await websocket.close(1008, "unknown path")
            return
        if not self.slots.take():
            # Handshakes checked in `_check_upgrade` at the same time can all pass; the count
            # here is exact.
            self.metrics.sessions_refused.labels("full").inc()
            await websocket.close(1013, "too many sessions; try again later")
            return
        self._open.add(websocket)
        self.metrics.sessions.inc()
        self.metrics.sessions_open.inc()
        try:
            session_id = EventLog.new_id("sess")
            if self.resumption is None:
                connection = Connection(websocket, self.services, session_id,
                                        self.metrics.session())
            else:
                connection = await self.resumption.connection(
                    websocket, self.services, session_id, self.metrics.session())
            SESSION_ID.set(connection.session.id)
            try:
                await connection.run()
            finally:
                if self.resumption is not None:
                    self.resumption.ended(connection)
        finally:
            self.metrics.sessions_open.dec()
            self._open.discard(websocket)
            self.slots.release()

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> Server:
        """Bind and start serving; returns the running `websockets` server. With `reuse_port`
        the socket is bound with SO_REUSEPORT, beside the other workers' (`server.workers`)."""
        options = self.options
        logger = (redacting_logger("websockets.server", self.access.secrets())
                  if self.access is not None else None)
        self.server = await serve(
            self._handle, host, port, process_request=self._process_request,
            process_response=strip_head_body,
            max_size=options.max_frame_bytes, write_limit=WEBSOCKET_WRITE_LIMIT_BYTES,
            ping_interval=options.ping_interval_s, ping_timeout=options.ping_timeout_s,
            select_subprotocol=select_subprotocol, compression=None, logger=logger,
            create_connection=RealtimeServerConnection, reuse_port=reuse_port or None,
        )
        if options.metrics_port is not None:
            self.metrics_server = metrics_http_server(self.metrics, host, options.metrics_port,
                                                      options)
            self.metrics_server.start()
        return self.server

    async def shutdown(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """Stop accepting, close every session with code 1001 (going away) and wait until
        each has ended; a session whose client has not completed the closing handshake after
        `grace_s` seconds has its TCP connection aborted (its tasks then end as well)."""
        assert self.server is not None
        if self.resumption is not None:
            self.resumption.close()
        if self.metrics_server is not None:
            await asyncio.to_thread(self.metrics_server.close)
        self.server.close()
        try:
            async with asyncio.timeout(grace_s):
                await self.server.wait_closed()
        except TimeoutError:
            log.warning("aborting %d connection(s) that did not close within %.1f s",
                        len(self._open), grace_s)
            for websocket in list(self._open):
                websocket.transport.abort()
            await self.server.wait_closed()

    def port(self) -> int:
        """The bound TCP port (useful with port 0)."""
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    def metrics_port(self) -> int | None:
        """The bound TCP port of `/metrics` on its own thread; None without
        `ServerOptions.metrics_port`."""
        return None if self.metrics_server is None else self.metrics_server.port()
