"""Per-session limits a client cannot talk its way past: the event rate, the history size and
the session settings kept as given.

Sans-I/O like the rest of `server.realtime`: the caller passes the clock (monotonic ms) in and
turns the verdicts into socket actions (`server.receiving`). Every refusal is a
`protocol.ProtocolError`, so it reaches the client as an ordinary `error` event naming the
refused event's `event_id`, and the refused event changes nothing.
"""

from __future__ import annotations

import enum
import json
from collections import deque
from typing import Any

from server.realtime import event_parser, protocol
from server.realtime.history import ConversationHistory, HistoryItem

RATE_WINDOW_MS = 1000.0
"""The sliding window over which client events are counted (ms)."""

MAX_STORED_SETTINGS_CHARS = 65_536
"""Most characters (code points of their compact JSON, all together) of the session fields this
server keeps as given and reports back (`session_update.STORED_SESSION_FIELDS`: `tools`,
`tool_choice`, `tracing`, `include`, `prompt`, ...; and `audio.input.transcription` and
`noise_reduction`). Without it a client could park a 1 MB `tools` list in every session (the
frame limit), echoed in every `session.updated`. OpenAI documents no size limit; 64 k
characters hold 128 function tools (Chat Completions' own limit on `tools`) of about 500
characters of JSON each (name, description and parameters)."""

RATE_LIMIT_CODE = "rate_limit_exceeded"
HISTORY_LIMIT_CODE = "history_limit_exceeded"


class Admission(enum.Enum):
    """What to do with one client frame."""

    ACCEPT = "accept"
    """Apply it."""
    REFUSE = "refuse"
    """Drop it and answer with `rate_limit_error`."""
    CLOSE = "close"
    """Sustained abuse: drop it and close the connection (1008, policy violation)."""


class EventRateLimiter:
    """At most `max_events` client frames are applied in any sliding `window_ms`.

    Frames beyond that are refused (`Admission.REFUSE`); when the refused frames within one
    window reach `max_events` too (the client keeps sending at twice the limit or more), the
    verdict is `Admission.CLOSE`. Memory is O(max_events).

    Args:
        max_events: frames applied per window (> 0).
        window_ms: window length (ms, > 0).

    Raises:
        ValueError: a non-positive limit or window.
    """

    def __init__(self, max_events: int, window_ms: float = RATE_WINDOW_MS) -> None:
        if max_events <= 0 or window_ms <= 0:
            raise ValueError("max_events and window_ms must be > 0")
        self.max_events = max_events
        self.window_ms = window_ms
        self._accepted: deque[float] = deque()
        self._refused: deque[float] = deque()

    def admit(self, now_ms: float) -> Admission:
        """Count one frame arriving at `now_ms` (monotonic ms, never decreasing)."""
        horizon = now_ms - self.window_ms
        for times in (self._accepted, self._refused):
            while times and times[0] <= horizon:
                times.popleft()
        if len(self._accepted) < self.max_events:
            self._accepted.append(now_ms)
            return Admission.ACCEPT
        self._refused.append(now_ms)
        if len(self._refused) >= self.max_events:
            return Admission.CLOSE
        return Admission.REFUSE


def rate_limit_error(frame: str | bytes, limiter: EventRateLimiter) -> protocol.ProtocolError:
    """The `rate_limit_exceeded` error for a refused frame (naming its `event_id` if it has
    one)."""
    per_s = limiter.max_events * 1000.0 / limiter.window_ms
    return protocol.ProtocolError(
        RATE_LIMIT_CODE,
        f"Too many events: this server applies at most {per_s:g} events per second per "
        "session; this event was ignored. Clients sending twice that are disconnected.",
        event_id=event_parser.event_id_of(frame),
    )


def item_chars(item: HistoryItem) -> int:
    """Characters an item holds: its id and a user item's text or an assistant item's whole
    reply, or a function item's arguments or output, `call_id` and `name` (ids count: a client
    may choose them, up to `protocol.MAX_ID_CHARS`)."""
    return (len(item.id) + len(item.call_id) + len(item.name)
            + max(len(item.text), len(item.full_text)))


def history_limit_error(
    history: ConversationHistory, added_chars: int, *, max_items: int, max_chars: int,
    event_id: str | None = None,
) -> protocol.ProtocolError | None:
    """The `history_limit_exceeded` error when one more item of `added_chars` characters would
    take `history` past `max_items` items or `max_chars` characters (see `item_chars`); None
    when it fits. O(len(history))."""
    items = list(history)
    chars = sum(item_chars(item) for item in items)
    if len(items) + 1 > max_items:
        detail = f"it holds {len(items)} items, the limit is {max_items}"
    elif chars + added_chars > max_chars:
        detail = (f"it holds {chars} characters, this adds {added_chars}, the limit is "
                  f"{max_chars}")
    else:
        return None
    return protocol.ProtocolError(
        HISTORY_LIMIT_CODE,
        f"The conversation history is full ({detail}); delete items with "
        "conversation.item.delete or start a new session.", param="item", event_id=event_id,
    )


def stored_settings_error(stored: dict[str, Any], changed: dict[str, Any],
                          event_id: str | None = None) -> protocol.ProtocolError | None:
    """The `invalid_value` error when the session's kept settings `stored` (field -> value,
    the update `changed` applied) take more than `MAX_STORED_SETTINGS_CHARS`; its param names
    the largest field of the update. None when they fit. O(size of `stored`)."""
    def chars(value: Any) -> int:
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))

    total = chars(stored)
    if total <= MAX_STORED_SETTINGS_CHARS:
        return None
    largest = max(changed, key=lambda key: chars(changed[key]), default=None)
    param = "session" if largest is None else f"session.{largest}"
    return protocol.ProtocolError(
        "invalid_value",
        f"The session's settings kept as given ({', '.join(sorted(changed))} and the rest) "
        f"would take {total} characters of JSON; at most {MAX_STORED_SETTINGS_CHARS} are "
        "accepted.", param=param, event_id=event_id,
    )
