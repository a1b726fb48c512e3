"""A recording proxy in front of an OpenAI-compatible LLM server, for tests and benchmarks.

Stdlib `http.server` on 127.0.0.1 in a background thread. Each `POST .../chat/completions` is
recorded (its JSON body: the messages the model receives) with the moments that matter, then,
by `mode`:
- "forward": relayed byte for byte to the upstream server (`Connection: close`), the response
  relayed back as it arrives; when the client closes its connection first, the proxy records it
  and closes the upstream connection too, so the model stops generating;
- "status": answered with HTTP `status` and an OpenAI-style error body;
- "stall": never answered; the proxy waits for the client to give up;
- "refusal": a stream whose one delta is a `refusal`;
- "garbage": a stream whose one event is not JSON;
- "cut": a stream of one content delta (`CUT_TEXT`) that ends without a `finish_reason` or
  `[DONE]` (the model server went away mid-reply);
- "script": a stream of the content deltas of `script`, in order, each after a pause of
  `script_pause_s` (or of `(content, pause_s)` pairs, or of whole `delta` objects such as
  `{"reasoning_content": "..."}`), ended by `finish_reason` "stop" and `[DONE]`;
  each delta is JSON-encoded as Python's `json.dumps` does, so a lone surrogate goes out as its
  `\\ud83d`-style escape, as an LLM server that splits an emoji's UTF-16 pair sends it.
  With `scripts` (a list of such scripts), each request plays the next of them, in order, and
  `script` once they are used up (a conversation of several model turns).
Times are `time.monotonic()` readings (s), comparable with the test's own.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal
from urllib.parse import urlsplit

from tests.loopback_http import LoopbackHTTPServer

ERROR_MESSAGE = "the model server fell over"
REFUSAL = "I cannot help with that."
CUT_TEXT = "Once upon a time"
POLL_S = 0.005
"""How often a waiting handler looks for the client's close or the proxy's shutdown (s)."""


@dataclass
class ChatRequest:
    """One chat-completions request as the proxy saw it.

    Attributes:
        body: the request's JSON body.
        received_s: when its body was read.
        first_byte_s: when the first response byte went to the client (None: never).
        upstream_done_s: when the upstream server ended its stream (the model finished): its
            `data: [DONE]` event, else the end of its response.
        client_closed_s: when the client closed its connection before the response ended.
        ended: set once the proxy is done with the request, whichever way.
    """

    body: dict[str, Any]
    received_s: float
    first_byte_s: float | None = None
    upstream_done_s: float | None = None
    client_closed_s: float | None = None
    ended: threading.Event = field(default_factory=threading.Event)


class RecordingProxy(LoopbackHTTPServer):
    """`with RecordingProxy("http://127.0.0.1:8080") as proxy:`; `proxy.url` is the API base
    to give the demo (`--llm-url`). `port` reuses a port (a proxy restarted after a stop)."""

    def __init__(self, upstream: str, port: int = 0) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.mode: Literal["forward", "status", "stall", "refusal", "garbage", "cut",
                           "script"] = "forward"
        self.status = 500
        self.script: list[str | tuple[str, float] | dict[str, str]] = []
        self.script_pause_s = 0.0
        self.scripts: list[list[str | tuple[str, float] | dict[str, Any]]] = []
        self.requests: list[ChatRequest] = []
        super().__init__(port)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """The API base URL, e.g. "http://127.0.0.1:40123/v1"."""
        return f"http://127.0.0.1:{self.port}/v1"

    def wait_requests(self, count: int, timeout_s: float = 30.0) -> list[ChatRequest]:
        """Block until `count` requests were received and ended; return them all."""
        deadline = time.monotonic() + timeout_s
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.requests)} of {count} LLM requests")
            time.sleep(POLL_S)
        for request in self.requests[:count]:
            if not request.ended.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError("an LLM request did not end")
        return self.requests

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.close_connection = True
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ChatRequest(json.loads(body), time.monotonic())
                proxy.requests.append(request)
                try:
                    proxy._handle(self, request, body)
                finally:
                    request.ended.set()

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler

    def _handle(self, handler: BaseHTTPRequestHandler, request: ChatRequest,
                body: bytes) -> None:
        if self.mode == "status":
            self._send(handler, self.status, "application/json", json.dumps(
                {"error": {"message": ERROR_MESSAGE, "type": "server_error"}}).encode())
        elif self.mode == "stall":
            while not self._closing.is_set():
                if _client_closed(handler.connection, POLL_S):
                    request.client_closed_s = time.monotonic()
                    return
        elif self.mode == "refusal":
            chunk = {"id": "chatcmpl-refusal", "object": "chat.completion.chunk", "created": 0,
                     "model": request.body.get("model", ""), "choices": [{
                         "index": 0, "delta": {"role": "assistant", "refusal": REFUSAL},
                         "finish_reason": "stop"}]}
            self._send(handler, 200, "text/event-stream",
                       f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        elif self.mode == "garbage":
            self._send(handler, 200, "text/event-stream", b"data: {not json}\n\n")
        elif self.mode == "cut":
            chunk = {"id": "chatcmpl-cut", "object": "chat.completion.chunk", "created": 0,
                     "model": request.body.get("model", ""), "choices": [{
                         "index": 0, "delta": {"role": "assistant", "content": CUT_TEXT},
                         "finish_reason": None}]}
            self._send(handler, 200, "text/event-stream",
                       f"data: {json.dumps(chunk)}\n\n".encode())
        elif self.mode == "script":
            self._play_script(handler, request)
        else:
            self._forward(handler, request, body)

    def _play_script(self, handler: BaseHTTPRequestHandler, request: ChatRequest) -> None:
        """Stream `script` as server-sent events, one flushed write per delta; the response
        has no length and ends when the connection closes (HTTP/1.0)."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        model = request.body.get("model", "")

        def event(delta: dict[str, Any], finish: str | None) -> None:
            chunk = {"id": "chatcmpl-script", "object": "chat.completion.chunk", "created": 0,
                     "model": model, "choices": [{"index": 0, "delta": delta,
                                                  "finish_reason": finish}]}
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            handler.wfile.flush()
            if request.first_byte_s is None:
                request.first_byte_s = time.monotonic()

        try:
            event({"role": "assistant", "content": ""}, None)
            for step in self.scripts.pop(0) if self.scripts else self.script:
                content, pause_s = step if isinstance(step, tuple) else (step, self.script_pause_s)
                if _client_closed(handler.connection, pause_s):
                    request.client_closed_s = time.monotonic()
                    return
                event(content if isinstance(content, dict) else {"content": content}, None)
            event({}, "stop")
            handler.wfile.write(b"data: [DONE]\n\n")
            request.upstream_done_s = time.monotonic()
        except OSError:
            request.client_closed_s = time.monotonic()

    def _send(self, handler: BaseHTTPRequestHandler, status: int, content_type: str,
              payload: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _forward(self, handler: BaseHTTPRequestHandler, request: ChatRequest,
                 body: bytes) -> None:
        host, port = self.upstream
        client = handler.connection
        with socket.create_connection((host, port)) as upstream:
            head = (f"POST {handler.path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                    "Connection: close\r\n\r\n")
            upstream.sendall(head.encode() + body)
            while not self._closing.is_set():
                readable, _, _ = select.select([client, upstream], [], [], POLL_S)
                if client in readable and _client_closed(client, 0.0):
                    request.client_closed_s = time.monotonic()
                    return
                if upstream not in readable:
                    continue
                data = upstream.recv(65536)
                if not data or b"data: [DONE]" in data:
                    request.upstream_done_s = request.upstream_done_s or time.monotonic()
                if not data:
                    return
                if request.first_byte_s is None:
                    request.first_byte_s = time.monotonic()
                try:
                    client.sendall(data)
                except OSError:
                    request.client_closed_s = time.monotonic()
                    return


def _client_closed(connection: socket.socket, timeout_s: float) -> bool:
    """True when the peer closed `connection` (EOF or reset) within `timeout_s`."""
    readable, _, _ = select.select([connection], [], [], timeout_s)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
