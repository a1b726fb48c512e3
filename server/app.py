"""HTTP + WebSocket on one port: the static page from `web/`, `/healthz` and `/v1/realtime`.

Built on the `websockets` asyncio server: plain GET requests are answered in `process_request`
(static files, health), upgrades on `/v1/realtime` become one `Connection` each. Upgrades whose
`Origin` is neither this server's own origin nor explicitly allowed are refused with 403.
"""

from __future__ import annotations

import http
import itertools
import logging
import mimetypes
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from server.connection import Connection, Services

log = logging.getLogger(__name__)

WEB_ROOT = Path(__file__).resolve().parent.parent / "web"
"""The static page served at `/` (static ES modules, no build step)."""

REALTIME_PATH = "/v1/realtime"
MAX_WEBSOCKET_FRAME_BYTES = 4 * 1024 * 1024
"""websockets closes the socket above this; the protocol layer answers smaller oversized frames
with an error event (`server.realtime.protocol.MAX_FRAME_CHARS`)."""

_CONTENT_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
                  ".html": "text/html", ".json": "application/json", ".svg": "image/svg+xml"}


def _response(status: http.HTTPStatus, body: bytes, content_type: str) -> Response:
    headers = Headers()
    headers["Content-Type"] = content_type
    headers["Content-Length"] = str(len(body))
    headers["Cache-Control"] = "no-cache"
    headers["X-Content-Type-Options"] = "nosniff"
    return Response(status.value, status.phrase, headers, body)


def static_response(path: str, web_root: Path = WEB_ROOT) -> Response:
    """Answer a GET for a file under `web_root` (index.html for `/`); 404 outside it."""
    relative = urlsplit(path).path.lstrip("/") or "index.html"
    target = (web_root / relative).resolve()
    if not target.is_relative_to(web_root.resolve()) or not target.is_file():
        return _response(http.HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
    content_type = _CONTENT_TYPES.get(target.suffix) or (
        mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    )
    if content_type.startswith("text/") or content_type == "application/json":
        content_type += "; charset=utf-8"
    return _response(http.HTTPStatus.OK, target.read_bytes(), content_type)


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


class DemoServer:
    """The demo server: one port, static page, health check and realtime sessions.

    Args:
        services: TTS, responder and calibration shared by all sessions.
        allowed_origins: extra origins allowed to open `/v1/realtime`.
    """

    def __init__(self, services: Services, allowed_origins: Sequence[str] = ()) -> None:
        self.services = services
        self.allowed_origins = tuple(allowed_origins)
        self._session_ids = itertools.count(1)
        self.server: Server | None = None

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path
        if path == REALTIME_PATH:
            origin = request.headers.get("Origin")
            if not origin_allowed(origin, request.headers.get("Host"), self.allowed_origins):
                log.warning("refused a WebSocket upgrade from a foreign origin")
                return _response(http.HTTPStatus.FORBIDDEN, b"origin not allowed\n",
                                 "text/plain; charset=utf-8")
            return None
        if path == "/healthz":
            return _response(http.HTTPStatus.OK, b"ok\n", "text/plain; charset=utf-8")
        return static_response(path)

    async def _handle(self, websocket: ServerConnection) -> None:
        if urlsplit(websocket.request.path).path != REALTIME_PATH:
            await websocket.close(1008, "unknown path")
            return
        session_id = f"sess_{next(self._session_ids):04d}"
        await Connection(websocket, self.services, session_id).run()

    async def start(self, host: str, port: int) -> Server:
        """Bind and start serving; returns the running `websockets` server."""
        self.server = await serve(
            self._handle, host, port, process_request=self._process_request,
            max_size=MAX_WEBSOCKET_FRAME_BYTES, compression=None,
        )
        return self.server

    def port(self) -> int:
        """The bound TCP port (useful with port 0)."""
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]
