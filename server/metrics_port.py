"""`GET /metrics` on a port of its own (`--metrics-port`), answered on a thread and event loop
of its own by the same hardened `websockets` server as the main port (`server.http_guard`).

A scrape on the server's main port waits for the sessions' event loop: each step of an HTTP
exchange there queues behind the callbacks every open session has ready at that moment. Here
the scrape needs only the GIL. Being one asyncio loop (not a thread per connection, as the
standard library's `ThreadingHTTPServer` it replaces was: 1,190 connections trickling a byte
each took 1,192 threads and every file descriptor), a connection costs a file descriptor and
a few kB, and one that has not sent its whole request head within `OPEN_TIMEOUT_S` is closed,
as on the main port. Every answer closes its connection (websockets answers one request per
connection; Prometheus reconnects at each scrape).
"""

from __future__ import annotations

import asyncio
import http
import logging
import threading
from collections.abc import Callable, Iterable

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from server.http_guard import (
    GuardedServerConnection,
    check_request,
    http_response,
    strip_head_body,
    text_response,
)
from server.metrics import CONTENT_TYPE, METRICS_PATH, ServerMetrics

OPEN_TIMEOUT_S = 10.0
"""A connection that has not sent a whole request within this long (s) is closed (websockets'
`open_timeout`, its default, as on the main port)."""


class MetricsHttpServer:
    """`/metrics` on `host`:`port` (0: any free one, see `port`); every other path is 404, a
    request refused by `authorized` gets 401, a malformed one a 4xx (`http_guard`).

    Args:
        metrics: what to serve; values are read at each request (`ServerMetrics.exposition`,
            under `prometheus_client`'s own locks).
        host: address to bind.
        port: TCP port to bind.
        authorized: whether a request with these headers may read the metrics; None: everyone.
        allowed_hosts: `Host` names served besides IP addresses and localhost.
        logger: the logger of the `websockets` server (e.g. one that redacts the API key).
    """

    def __init__(self, metrics: ServerMetrics, host: str, port: int,
                 authorized: Callable[[Headers], bool] | None = None,
                 allowed_hosts: Iterable[str] = (),
                 logger: logging.LoggerAdapter[logging.Logger] | None = None) -> None:
        self._metrics = metrics
        self._address = (host, port)
        self._authorized = authorized
        self._allowed_hosts = tuple(allowed_hosts)
        self._logger = logger
        self._loop = asyncio.new_event_loop()
        self._server: Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="metrics-http",
                                        daemon=True)

    def start(self) -> None:
        """Bind and start answering on the thread of its own.

        Raises:
            OSError: the port could not be bound.
        """
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result()

    async def _serve(self) -> Server:
        return await serve(
            _no_websocket, *self._address, process_request=self._process_request,
            process_response=strip_head_body, create_connection=GuardedServerConnection,
            open_timeout=OPEN_TIMEOUT_S, logger=self._logger, compression=None)

    def _process_request(self, _connection: ServerConnection, request: Request) -> Response:
        refused = check_request(request, self._allowed_hosts)
        if refused is not None:
            return refused
        if request.path.split("?", 1)[0] != METRICS_PATH:
            return text_response(http.HTTPStatus.NOT_FOUND, "not found\n")
        if self._authorized is not None and not self._authorized(request.headers):
            return text_response(http.HTTPStatus.UNAUTHORIZED,
                                 "access key required: send 'Authorization: Bearer <key>'\n",
                                 {"WWW-Authenticate": 'Bearer realm="duplex-demo"'})
        return http_response(http.HTTPStatus.OK, self._metrics.exposition(), CONTENT_TYPE)

    def port(self) -> int:
        """The bound TCP port."""
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        """Stop answering, close the listening socket and every connection, end the thread."""
        if self._server is not None:
            server, self._server = self._server, None
            asyncio.run_coroutine_threadsafe(_closed(server), self._loop).result()
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()


async def _closed(server: Server) -> None:
    server.close()
    await server.wait_closed()


async def _no_websocket(connection: ServerConnection) -> None:
    """Never called: every request is answered in `process_request`."""
    await connection.close(1008, "no WebSocket here")
