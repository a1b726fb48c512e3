"""Optional shared-secret access to the page and to `/v1/realtime` (`--api-key`).

A client proves it knows the key in one of three ways, checked on every request:

- `Authorization: Bearer <key>`: non-browser clients (the `openai` SDK sends exactly this);
- the `Sec-WebSocket-Protocol` token `openai-insecure-api-key.<key>` (next to `realtime`), as
  OpenAI's browser clients send it, for pages that cannot set headers on a WebSocket;
- the cookie `duplex_auth`, which the server sets when a browser opens `/?key=<key>` (the page's
  login form submits exactly that): an HMAC of the key, not the key itself, `HttpOnly` (scripts
  cannot read it) and `SameSite=Strict` (other sites' requests do not carry it). The answer to
  `/?key=` is a redirect to `/`, so the key does not stay in the address bar or the history.

The key is never logged: `redacting_logger` scrubs it (and the cookie value) from the
`websockets` debug log, which prints request lines and headers.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from websockets.datastructures import Headers

COOKIE_NAME = "duplex_auth"
SUBPROTOCOL_KEY_PREFIX = "openai-insecure-api-key."
REALTIME_SUBPROTOCOL = "realtime"
"""The subprotocol OpenAI's browser clients offer next to the key token; selected when offered
(a browser that offered subprotocols fails a handshake that selects none)."""


class ApiKeyAccess:
    """Checks requests against one shared secret.

    Args:
        api_key: the secret (HTTP token characters; `server.config` validates it).
    """

    def __init__(self, api_key: str) -> None:
        self._key = api_key.encode()
        self._cookie = hmac.new(self._key, b"duplex-demo page cookie",
                                hashlib.sha256).hexdigest()

    def _is_key(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self._key)

    def secrets(self) -> tuple[str, ...]:
        """Every string that must never appear in a log line (key, URL-quoted key, cookie)."""
        key = self._key.decode()
        return tuple({key, quote(key, safe=""), self._cookie})

    def authorized(self, headers: Headers) -> bool:
        """True when a request carries the key (bearer, subprotocol token or page cookie)."""
        for value in headers.get_all("Authorization"):
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() == "bearer" and self._is_key(token.strip()):
                return True
        for value in headers.get_all("Sec-WebSocket-Protocol"):
            for offered in value.split(","):
                offered = offered.strip()
                if offered.startswith(SUBPROTOCOL_KEY_PREFIX) and self._is_key(
                        offered[len(SUBPROTOCOL_KEY_PREFIX):]):
                    return True
        return any(hmac.compare_digest(value.encode(), self._cookie.encode())
                   for value in _cookies(headers, COOKIE_NAME))

    def login_key(self, path: str) -> str | None:
        """The `key` query parameter of a request path, if any ("" when given empty)."""
        values = parse_qs(urlsplit(path).query, keep_blank_values=True).get("key")
        return values[-1] if values else None

    def login_matches(self, key: str) -> bool:
        """True when `key` (from `/?key=`) is the secret."""
        return self._is_key(key)

    def cookie_header(self) -> str:
        """The `Set-Cookie` value that lets this browser in (a session cookie for all paths)."""
        return f"{COOKIE_NAME}={self._cookie}; Path=/; HttpOnly; SameSite=Strict"


def _cookies(headers: Headers, name: str) -> Iterable[str]:
    """Values of cookie `name` in every `Cookie` header."""
    for header in headers.get_all("Cookie"):
        for pair in header.split(";"):
            cookie_name, _, value = pair.strip().partition("=")
            if cookie_name == name:
                yield value


def login_page(wrong_key: bool) -> bytes:
    """The page a browser without the cookie gets (status 401): a form that submits `/?key=`.

    No script, no inline style: it is served under the same Content-Security-Policy as the
    demo page.
    """
    message = ("That key is wrong; try again." if wrong_key
               else "This demo server needs its access key (the --api-key it was started with).")
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">"
        "<title>Duplex voice demo: access key</title></head>\n<body>\n"
        "<h1>Duplex voice demo</h1>\n"
        f"<p role=\"alert\">{html.escape(message)}</p>\n"
        "<form method=\"get\" action=\"/\">\n"
        "<label>Access key <input name=\"key\" type=\"password\" autocomplete=\"current-password\""
        " required autofocus></label>\n<button type=\"submit\">Open</button>\n</form>\n"
        "</body>\n</html>\n"
    ).encode()


def select_subprotocol(_connection: object, subprotocols: Iterable[str]) -> str | None:
    """`websockets`' `select_subprotocol` hook: `realtime` when the client offers it, else none
    (the key token is never echoed back)."""
    return REALTIME_SUBPROTOCOL if REALTIME_SUBPROTOCOL in subprotocols else None


class _RedactingLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger adapter that formats each record and replaces every secret with `<redacted>`."""

    def __init__(self, logger: logging.Logger, secrets: Iterable[str]) -> None:
        super().__init__(logger, {})
        self._secrets = tuple(secret for secret in secrets if secret)

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if not self.isEnabledFor(level):
            return
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):
            text = " ".join(map(str, (msg, *args)))
        for secret in self._secrets:
            text = text.replace(secret, "<redacted>")
        self.logger.log(level, "%s", text, **kwargs)


def redacting_logger(name: str,
                     secrets: Iterable[str]) -> logging.LoggerAdapter[logging.Logger]:
    """The logger `name` behind an adapter that removes `secrets` from every message."""
    return _RedactingLogger(logging.getLogger(name), secrets)
