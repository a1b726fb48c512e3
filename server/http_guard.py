"""The HTTP edges of a `websockets` server, hardened: what reaches `process_request` is one
well-formed request for an allowed host, and every answer (websockets' own included) carries
the security headers.

`websockets` parses the request head and answers some defects itself (414 for a request line
over 8 kB, 431 for header lines, 405/426/400 for bad upgrades, 500 when a hook raises); a head
it cannot parse at all (a bare LF, an unknown protocol, a header value with a control
character) it drops without a word, and bytes after the head (a pipelined request, a trailing
CRLF) it parses as WebSocket frames before the request is even answered, which then goes
unanswered. `GuardedServerConnection` keeps those bytes until the handshake succeeded (they are
frames only after a 101; any other answer closes the connection, refusing them), answers an
unparsable head with 400, and adds `SECURITY_HEADERS` to every answer. `check_request`
refuses, with a 4xx, what the server's own handlers must not see: methods but GET and HEAD,
duplicate `Host` or `Origin` headers, control characters in the path, a path over 4096 bytes
or a path segment over 255 bytes (a file name's limit: the static handler would fail on it),
and a `Host` that is neither an IP address, `localhost` nor a name allowed with `--allow-host`
(DNS rebinding: a page of `evil.example` whose name now resolves to this machine sends
`Host: evil.example:PORT`). `strip_head_body` drops the body of a HEAD answer.
"""

from __future__ import annotations

import http
import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.exceptions import InvalidMessage
from websockets.http11 import Request, Response
from websockets.protocol import CONNECTING, OPEN
from websockets.server import ServerProtocol

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                               "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
"""Headers of every HTTP response: the page may load scripts, styles, worklets and sockets from
its own origin only (`'self'` covers `ws://` to the same host and port), may not be framed, and
sends no Referer (a `/?key=` URL never leaks)."""

MAX_PATH_BYTES = 4096
"""Longest request target (bytes; Linux's PATH_MAX): longer ones get 414."""
MAX_SEGMENT_BYTES = 255
"""Longest segment of a request path (bytes; a file name's limit, NAME_MAX): longer ones
name no file, 404."""
ALLOWED_METHODS = ("GET", "HEAD")
LOCAL_NAMES = ("localhost",)
"""Host names always allowed (with their subdomains, `*.localhost`, which resolve to loopback
only: RFC 6761 section 6.3)."""

_HEAD_END = b"\r\n\r\n"


def http_response(status: http.HTTPStatus, body: bytes, content_type: str,
                  headers: Mapping[str, str] | None = None) -> Response:
    """An answer that closes the connection (websockets closes after any answer but a 101; a
    keep-alive client must not send its next request into a closing socket), with
    `SECURITY_HEADERS` and `headers`."""
    all_headers = Headers()
    all_headers["Content-Type"] = content_type
    all_headers["Content-Length"] = str(len(body))
    all_headers["Cache-Control"] = "no-cache"
    all_headers["Connection"] = "close"
    for name, value in (SECURITY_HEADERS | dict(headers or {})).items():
        all_headers[name] = value
    return Response(status.value, status.phrase, all_headers, body)


def text_response(status: http.HTTPStatus, text: str,
                  headers: Mapping[str, str] | None = None) -> Response:
    """A plain-text `http_response`."""
    return http_response(status, text.encode(), "text/plain; charset=utf-8", headers)


def host_allowed(host: str, allowed_hosts: Iterable[str]) -> bool:
    """True when a `Host` header value names this server safely.

    Args:
        host: `name`, `name:port`, `a.b.c.d[:port]` or `[v6][:port]`.
        allowed_hosts: extra names (`--allow-host`, case-insensitive; `*` allows any).

    An IP address is always allowed (a rebound DNS name is a name, never an address), and so
    are `localhost` and its subdomains.
    """
    allowed = {name.lower().rstrip(".") for name in allowed_hosts}
    if "*" in allowed:
        return True
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    name = name.rstrip(".")
    try:
        ipaddress.ip_address(name)
    except ValueError:
        pass
    else:
        return True
    return name in allowed or any(name == local or name.endswith("." + local)
                                  for local in LOCAL_NAMES)


def check_request(request: Request, allowed_hosts: Iterable[str]) -> Response | None:
    """The 4xx answer a request gets before any handler sees it, None when it may proceed
    (see the module docstring): 405, 400 (duplicate `Host`/`Origin`, no `Host`, control
    characters in the path), 414, 404 (a segment over `MAX_SEGMENT_BYTES`) or 403 (a host not
    allowed)."""
    if request.method not in ALLOWED_METHODS:
        return text_response(http.HTTPStatus.METHOD_NOT_ALLOWED, "only GET and HEAD\n",
                             {"Allow": ", ".join(ALLOWED_METHODS)})
    for name in ("Host", "Origin"):
        if len(request.headers.get_all(name)) > 1:
            return text_response(http.HTTPStatus.BAD_REQUEST, f"more than one {name} header\n")
    path = request.path
    if len(path) > MAX_PATH_BYTES:
        return text_response(http.HTTPStatus.REQUEST_URI_TOO_LONG, "request target too long\n")
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in path):
        return text_response(http.HTTPStatus.BAD_REQUEST,
                             "control character in the request target\n")
    if any(len(segment) > MAX_SEGMENT_BYTES for segment in path.split("?", 1)[0].split("/")):
        return text_response(http.HTTPStatus.NOT_FOUND, "not found\n")
    host = request.headers.get("Host")
    if host is None:
        return text_response(http.HTTPStatus.BAD_REQUEST, "Host header required\n")
    if not host_allowed(host, allowed_hosts):
        return text_response(http.HTTPStatus.FORBIDDEN,
                             "host not allowed: start the server with --allow-host NAME to "
                             "serve it under this name\n")
    return None


def strip_head_body(_connection: object, request: Request, response: Response) -> Response:
    """websockets' `process_response` hook: a HEAD answer keeps its headers (its
    `Content-Length` included) and loses its body (RFC 9110 section 9.3.2)."""
    if request.method == "HEAD":
        response.body = b""
    return response


class GuardedServerProtocol(ServerProtocol):
    """websockets' server protocol with the guards of the module docstring (installed on each
    connection's protocol object by `GuardedServerConnection`)."""

    answered: bool
    head_tail: bytes
    held: bytearray | None

    def receive_data(self, data: bytes | bytearray) -> None:
        """Parse up to the end of the request head; hold what follows it while connecting."""
        if self.state is CONNECTING:
            if self.held is not None:
                self.held += data
                return
            seen = self.head_tail + bytes(data)
            end = seen.find(_HEAD_END)
            if end >= 0:
                cut = end + len(_HEAD_END) - len(self.head_tail)
                self.held = bytearray(data[cut:])
                data = data[:cut]
            self.head_tail = seen[-(len(_HEAD_END) - 1):]
        super().receive_data(data)

    def send_response(self, response: Response) -> None:
        """websockets' send, with `SECURITY_HEADERS` on every answer; its 505 for an upgrade
        over HTTP/1.0 becomes a 400 (the client's error, and the same major version)."""
        self.answered = True
        if response.status_code == http.HTTPStatus.HTTP_VERSION_NOT_SUPPORTED:
            response.status_code = http.HTTPStatus.BAD_REQUEST
            response.reason_phrase = http.HTTPStatus.BAD_REQUEST.phrase
        for name, value in SECURITY_HEADERS.items():
            if name not in response.headers:
                response.headers[name] = value
        super().send_response(response)

    def send_eof(self) -> None:
        """websockets' end of output; a request head it could not parse gets a 400 first
        (websockets would close without an answer)."""
        if (self.state is CONNECTING and not self.answered
                and isinstance(self.handshake_exc, InvalidMessage)):
            self.send_response(text_response(http.HTTPStatus.BAD_REQUEST,
                                             "malformed HTTP request\n"))
            return
        super().send_eof()


class GuardedServerConnection(ServerConnection):
    """A `websockets` server connection whose protocol is a `GuardedServerProtocol`; the bytes
    a client sent after its request head are parsed once the handshake succeeded."""

    def __init__(self, protocol: ServerProtocol, *args: Any, **kwargs: Any) -> None:
        protocol.__class__ = GuardedServerProtocol
        protocol.answered, protocol.head_tail, protocol.held = False, b"", None
        self._eof_held = False
        super().__init__(protocol, *args, **kwargs)

    async def handshake(self, *args: Any, **kwargs: Any) -> None:
        """websockets' opening handshake; then the held bytes and end of input (after a 101
        only: any other answer closed the connection)."""
        await super().handshake(*args, **kwargs)
        protocol = self.protocol
        assert isinstance(protocol, GuardedServerProtocol)
        held, protocol.held = protocol.held, None
        if protocol.state is OPEN:
            if held:
                self.data_received(bytes(held))
            if self._eof_held and not self.eof_received():
                self.transport.close()  # what the transport does when eof_received is falsy

    def send_data(self) -> None:
        """websockets' write; once an answer but a 101 went out to a client whose end of
        input was held, the connection is closed (after the answer is written)."""
        super().send_data()
        if self._eof_held and self.protocol.answered and self.protocol.state is not OPEN:
            self._eof_held = False
            self.transport.close()

    def eof_received(self) -> bool | None:
        """The client's end of input. After a whole request head it waits for the answer (a
        client may half-close once it sent its request; websockets would close at once,
        unanswered); True keeps the connection open for writing meanwhile."""
        protocol = self.protocol
        assert isinstance(protocol, GuardedServerProtocol)
        if (protocol.state is CONNECTING and protocol.held is not None
                and not protocol.answered and not self._eof_held):
            self._eof_held = True
            return True
        self._eof_held = False
        return super().eof_received()
