"""Optional shared-secret access to the page and to `/v1/realtime` (`--api-key-file` or
`DUPLEX_API_KEY`).

A client proves it knows the key in one of three ways, checked on every request:

- `Authorization: Bearer <key>`: non-browser clients (the `openai` SDK sends exactly this);
- the `Sec-WebSocket-Protocol` token `openai-insecure-api-key.<key>` (next to `realtime`), as
  OpenAI's browser clients send it, for pages that cannot set headers on a WebSocket;
- the login cookie, which the server sets when a browser opens `/?key=<key>` (the page's login
  form submits exactly that; the answer is a redirect to `/`, so the key does not stay in the
  address bar or the history). Its name holds the port the browser reached
  (`duplex_auth_<port>`: browsers send a host's cookies to every port of it, so each server
  reads its own only; `__Host-duplex_auth_<port>`, `Secure`, behind a TLS proxy that says
  `X-Forwarded-Proto: https`). Its value is a random nonce, an expiry and an HMAC of both and
  the port under a key derived from the API key (`LoginToken`): a new one at every login, good
  for `LOGIN_TTL_S`, revoked by `/logout`, never the key itself. `HttpOnly` (scripts cannot
  read it), `SameSite=Strict` (other sites' requests do not carry it).

The key is never logged: `redacting_logger` scrubs it (and login cookie values) from the
`websockets` debug log, which prints request lines and headers.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import logging
import re
import secrets
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from websockets.datastructures import Headers

COOKIE_NAME = "duplex_auth"
"""Stem of the login cookie's name (`cookie_name`)."""
SECURE_COOKIE_PREFIX = "__Host-"
"""Prefix of the cookie's name over HTTPS: browsers then keep it only when it is `Secure`, for
path `/` and without `Domain` (RFC 6265bis section 4.1.3.2)."""
LOGIN_TTL_S = 12 * 3600
"""How long a login cookie is good for (s): `Max-Age`, and checked by the server."""
MAX_REVOKED = 10_000
"""Revoked logins remembered (until their expiry); past it the oldest are forgotten."""
SUBPROTOCOL_KEY_PREFIX = "openai-insecure-api-key."
REALTIME_SUBPROTOCOL = "realtime"
"""The subprotocol OpenAI's browser clients offer next to the key token; selected when offered
(a browser that offered subprotocols fails a handshake that selects none)."""

_COOKIE_VALUE = re.compile(rf"({COOKIE_NAME}_\d+=)[^;\s]*")


def cookie_name(headers: Headers) -> str:
    """The login cookie's name for a request: `duplex_auth_<port>` with the port of its `Host`
    (80 when it names none), `__Host-` first when `X-Forwarded-Proto` says https."""
    host = headers.get("Host") or ""
    secure = (headers.get("X-Forwarded-Proto") or "").strip().lower() == "https"
    port = host.rsplit(":", 1)[1] if re.search(r":\d+$", host) else "443" if secure else "80"
    return f"{SECURE_COOKIE_PREFIX if secure else ''}{COOKIE_NAME}_{port}"


class ApiKeyAccess:
    """Checks requests against one shared secret, and logs browsers in and out.

    Args:
        api_key: the secret (HTTP token characters; `server.config` validates it).
        clock: the time (s since the epoch) login cookies expire against.
    """

    def __init__(self, api_key: str, clock: Callable[[], float] = time.time) -> None:
        self._key = api_key.encode()
        self._signing = hmac.new(self._key, b"duplex-demo login cookie", hashlib.sha256).digest()
        self._clock = clock
        self._revoked: dict[str, int] = {}

    def _is_key(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self._key)

    def secrets(self) -> tuple[str, ...]:
        """Every fixed string that must never appear in a log line (key, URL-quoted key); login
        cookie values are scrubbed by their name (`redacting_logger`)."""
        key = self._key.decode()
        return tuple({key, quote(key, safe="")})

    def authorized(self, headers: Headers) -> bool:
        """True when a request carries the key (bearer, subprotocol token) or a valid login
        cookie for its port."""
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
        port = cookie_name(headers).rsplit("_", 1)[1]
        return any(self._valid(value, port) for value in _cookies(headers, cookie_name(headers)))

    def _signature(self, nonce: str, expiry: int, port: str) -> str:
        return hmac.new(self._signing, f"{nonce}.{expiry}.{port}".encode(),
                        hashlib.sha256).hexdigest()

    def _valid(self, value: str, port: str) -> bool:
        nonce, _, rest = value.partition(".")
        expiry, _, signature = rest.partition(".")
        if not expiry.isdigit() or len(expiry) > 12:
            return False
        return (hmac.compare_digest(signature.encode(),
                                    self._signature(nonce, int(expiry), port).encode())
                and int(expiry) > self._clock() and nonce not in self._revoked)

    def login_key(self, path: str) -> list[str] | None:
        """What a request path's `key` query parameter may be, None without one: its decoded
        value (the login form percent-encodes it), and the rest of the query after `key=` as
        typed and percent-decoded (a key with `+`, `&` or `%` typed into the address bar; `#`
        never reaches a server: it must be typed as `%23`)."""
        query = urlsplit(path).query
        values = parse_qs(query, keep_blank_values=True).get("key")
        if values is None:
            return None
        typed = query.split("key=", 1)[1] if query.startswith("key=") else values[-1]
        return [values[-1], typed, unquote(typed)]

    def login_matches(self, candidates: Iterable[str]) -> bool:
        """True when one of `candidates` (from `login_key`) is the secret (each compared in
        constant time)."""
        return any([self._is_key(candidate) for candidate in candidates])

    def login_cookie(self, headers: Headers) -> str:
        """The `Set-Cookie` value of a new login for this request's port: a new random nonce,
        expiring in `LOGIN_TTL_S`."""
        name = cookie_name(headers)
        nonce = secrets.token_urlsafe(18)
        expiry = int(self._clock()) + LOGIN_TTL_S
        value = f"{nonce}.{expiry}.{self._signature(nonce, expiry, name.rsplit('_', 1)[1])}"
        secure = "; Secure" if name.startswith(SECURE_COOKIE_PREFIX) else ""
        return (f"{name}={value}; Path=/; Max-Age={LOGIN_TTL_S}; HttpOnly; "
                f"SameSite=Strict{secure}")

    def logout(self, headers: Headers) -> str:
        """Revoke the login cookie a request carries (if valid); returns the `Set-Cookie` value
        that removes it from the browser."""
        name = cookie_name(headers)
        port = name.rsplit("_", 1)[1]
        for value in _cookies(headers, name):
            if self._valid(value, port):
                self._revoked[value.partition(".")[0]] = int(value.split(".")[1])
        now = self._clock()
        for nonce, expiry in list(self._revoked.items()):
            if expiry <= now or len(self._revoked) > MAX_REVOKED:
                del self._revoked[nonce]
        secure = "; Secure" if name.startswith(SECURE_COOKIE_PREFIX) else ""
        return f"{name}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{secure}"


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
               else "This demo server needs its access key (the one it was started with).")
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
        text = _COOKIE_VALUE.sub(r"\1<redacted>", text)
        self.logger.log(level, "%s", text, **kwargs)


def redacting_logger(name: str,
                     secrets: Iterable[str]) -> logging.LoggerAdapter[logging.Logger]:
    """The logger `name` behind an adapter that removes `secrets` and login cookie values from
    every message."""
    return _RedactingLogger(logging.getLogger(name), secrets)
