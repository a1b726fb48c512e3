"""A threaded HTTP server on loopback for tests that stand in for a remote service (the
OpenAI-compatible transcription endpoint, the recording LLM proxy)."""

from __future__ import annotations

import abc
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class LoopbackHTTPServer(abc.ABC):
    """`ThreadingHTTPServer` on 127.0.0.1 (`port` 0: a free one), serving in a daemon thread
    while used as a context manager. Subclasses give the handler class (`_handler_class`);
    `_closing` is set at exit, so handlers waiting in a loop stop."""

    def __init__(self, port: int = 0) -> None:
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @abc.abstractmethod
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, bound to this server's state."""

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
