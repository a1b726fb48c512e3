"""Resume tokens and the sessions parked under them, for `--resume-window-s`. Sans-I/O.

A session gets a resume token when its connection opens (`issue`); its `session.created`
carries it. When the connection drops, the session is parked under that token (`park`) for
`window_s` seconds. A client that reconnects with the token within the window claims the
session (`claim`) and gets it back with a new token; the old one is spent. Every token is
single-use and bound to the owner that created it (a fingerprint of the API key the
connection proved, `owner_fingerprint`; None on a server without a key); a claim with another
owner is refused and leaves the token as it was.

Memory is bounded in count and time: at most `max_parked` sessions are parked (parking one
more evicts the one parked longest ago) and each for at most `window_s`; spent, expired and
evicted tokens are remembered (as digests) only to name the refusal, at most `max_remembered`
of them. Tokens are looked up by their SHA-256 digest: the registry holds no usable token of
a parked session. The caller passes the clock in (monotonic seconds).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

ROUTE_PATTERN = re.compile(r"[0-9a-f]{8,64}")
"""A route key the token may start with (nginx's `$request_id`, 32 hex digits, or the route
cookie holding one): `deploy/nginx.conf` hashes a resume on it, so it reaches the replica the
session was opened on."""

TOKEN_PATTERN = re.compile(r"(?:[0-9a-f]{8,64}\.)?[A-Za-z0-9_-]{32}")
"""A well-formed token: optional route key and dot, then 32 URL-safe characters (24 random
bytes, 192 bits)."""

DEFAULT_MAX_REMEMBERED = 4096
"""Spent, expired and evicted token digests kept to name a refusal (32 bytes each)."""


def owner_fingerprint(api_key: str | None) -> str | None:
    """The owner a token is bound to: HMAC-SHA256 of a fixed label under the API key (hex);
    None for a server without a key. The key itself is never stored."""
    if api_key is None:
        return None
    return hmac.new(api_key.encode(), b"duplex-demo resume owner", hashlib.sha256).hexdigest()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(slots=True)
class _Entry(Generic[T]):
    """One token's session: live (`value` None: its connection is open) or parked."""

    session_id: str
    owner: str | None
    value: T | None = None
    expires_s: float | None = None


@dataclass(frozen=True, slots=True)
class Resumed(Generic[T]):
    """A claim that succeeded: the parked session, now out of the registry."""

    value: T
    session_id: str


@dataclass(frozen=True, slots=True)
class Live:
    """A claim of a session whose connection is still open (the client saw the drop before
    the server did): end that connection as dropped, then claim again once it is parked."""

    session_id: str


@dataclass(frozen=True, slots=True)
class Refused:
    """A claim that failed: `code` (`resume_token_unknown`, `_expired`, `_used`, `_evicted`,
    `_wrong_key`, `_malformed`, `_ended`) and a message for the `error` event."""

    code: str
    message: str


REFUSALS = {
    "unknown": "The resume token is not known here (a server restart, or another server).",
    "expired": "The resume token expired: the session was not resumed within the resume "
               "window (--resume-window-s).",
    "used": "The resume token was already used: each token resumes its session once (the "
            "resumed session's session.created carries a new one).",
    "ended": "The session of this resume token ended for good (its client closed it with "
             "code 1000, or the server closed it).",
    "evicted": "The session of this resume token was dropped to make room for newer parked "
               "sessions (--max-parked-sessions).",
    "wrong_key": "The resume token belongs to a session opened with another API key.",
    "malformed": "The resume token is malformed.",
}
"""Refusal reasons and their messages (the code is `resume_token_<reason>`)."""


class ResumeRegistry(Generic[T]):
    """Resume tokens of one server process and the sessions parked under them.

    Args:
        window_s: how long a dropped session stays resumable (s, > 0).
        max_parked: most sessions parked at once (>= 1).
        max_remembered: most spent/expired/evicted token digests kept to name refusals.
    """

    def __init__(self, window_s: float, max_parked: int,
                 max_remembered: int = DEFAULT_MAX_REMEMBERED) -> None:
        if not window_s > 0 or max_parked < 1:
            raise ValueError("window_s must be > 0 and max_parked >= 1")
        self.window_s = window_s
        self.max_parked = max_parked
        self._max_remembered = max_remembered
        self._entries: dict[bytes, _Entry[T]] = {}
        self._parked: OrderedDict[bytes, None] = OrderedDict()
        self._gone: OrderedDict[bytes, str] = OrderedDict()

    @property
    def parked(self) -> int:
        """Sessions parked now."""
        return len(self._parked)

    @property
    def live(self) -> int:
        """Tokens of sessions whose connection is open."""
        return len(self._entries) - len(self._parked)

    def issue(self, session_id: str, owner: str | None, route: str | None = None) -> str:
        """A new token for the open session `session_id`, bound to `owner`; `route` (a
        `ROUTE_PATTERN` key, else ignored) is its prefix."""
        secret = secrets.token_urlsafe(24)
        token = f"{route}.{secret}" if route and ROUTE_PATTERN.fullmatch(route) else secret
        self._entries[_digest(token)] = _Entry(session_id, owner)
        return token

    def park(self, token: str, value: T, now_s: float) -> list[T]:
        """Park `value` (the dropped session) under its live `token` until `now_s + window_s`.
        Returns the sessions evicted to stay within `max_parked` (oldest parked first), which
        the caller lets go of.

        Raises:
            KeyError: `token` is not a live token of this registry.
        """
        key = _digest(token)
        entry = self._entries[key]
        if entry.value is not None:
            raise KeyError("token already parked")
        entry.value, entry.expires_s = value, now_s + self.window_s
        self._parked[key] = None
        evicted = []
        while len(self._parked) > self.max_parked:
            oldest = next(iter(self._parked))
            evicted.append(self._drop(oldest, "evicted"))
        return evicted

    def end(self, token: str) -> None:
        """The live session of `token` ended for good (a deliberate close): forget it."""
        key = _digest(token)
        entry = self._entries.get(key)
        if entry is not None and entry.value is None:
            del self._entries[key]
            self._remember(key, "ended")

    def claim(self, token: str, owner: str | None, now_s: float) -> Resumed[T] | Live | Refused:
        """Claim the session of `token` for a client that proved `owner`.

        Returns `Resumed` (the token is spent), `Live` (its connection is still open; nothing
        changed), or `Refused` (expired, spent, evicted, unknown, malformed, or another
        owner's: a wrong owner changes nothing)."""
        if not TOKEN_PATTERN.fullmatch(token):
            return _refused("malformed")
        self.expire(now_s)
        key = _digest(token)
        entry = self._entries.get(key)
        if entry is None:
            return _refused(self._gone.get(key, "unknown"))
        if entry.owner is None:
            matches = owner is None
        else:
            matches = owner is not None and hmac.compare_digest(entry.owner, owner)
        if not matches:
            return _refused("wrong_key")
        if entry.value is None:
            return Live(entry.session_id)
        del self._entries[key]
        del self._parked[key]
        self._remember(key, "used")
        return Resumed(entry.value, entry.session_id)

    def expire(self, now_s: float) -> list[T]:
        """Drop every session whose window ended by `now_s`; returns them (oldest first)."""
        expired = []
        while self._parked:
            oldest = next(iter(self._parked))
            expires_s = self._entries[oldest].expires_s
            assert expires_s is not None
            if expires_s > now_s:
                break
            expired.append(self._drop(oldest, "expired"))
        return expired

    def next_expiry_s(self) -> float | None:
        """When the next parked session expires (monotonic s), None when none is parked."""
        if not self._parked:
            return None
        return self._entries[next(iter(self._parked))].expires_s

    def _drop(self, key: bytes, reason: str) -> T:
        del self._parked[key]
        entry = self._entries.pop(key)
        self._remember(key, reason)
        assert entry.value is not None
        return entry.value

    def _remember(self, key: bytes, reason: str) -> None:
        self._gone[key] = reason
        self._gone.move_to_end(key)
        while len(self._gone) > self._max_remembered:
            self._gone.popitem(last=False)


def _refused(reason: str) -> Refused:
    return Refused(f"resume_token_{reason}", REFUSALS[reason])
