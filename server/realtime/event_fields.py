"""What any field of a client event may hold, and typed access to one event's fields.

Before any field is read, values no event accepts anywhere are refused (`check_values`: lone
surrogates, numbers beyond +-2**53 - 1 or not finite, deep nesting), so that nothing a client
sends can make the server fail to echo, store, log or encode it; `EventFields` then reads each
field with its type and bounds. Every failure raises `protocol.ProtocolError`. Sans-I/O.
"""

from __future__ import annotations

import re
from typing import Any

from server.realtime.protocol import (
    MAX_EXACT_INTEGER,
    MAX_ID_CHARS,
    MAX_NESTING,
    ProtocolError,
)

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""A UTF-16 surrogate code point: JSON escapes such as `\\ud800` decode to one when unpaired
(a valid pair decodes to one astral code point). Such a string has no UTF-8 encoding."""


def is_integer(value: Any) -> bool:
    """True for a JSON integer (a Python int that is not a bool; 1.0 is a float)."""
    return isinstance(value, int) and not isinstance(value, bool)


_Trail = tuple[str | int, "_Trail"] | None
"""Where a value sits in an event: (its key or index, the trail of its container)."""


def check_values(data: dict[str, Any], event_id: str | None) -> None:
    """Refuse what no field of any event accepts, wherever it is in the decoded event.

    Every string (object keys included) must be valid Unicode, i.e. hold no lone surrogate, so
    that whatever the server echoes, stores or logs can be encoded as UTF-8; every number must
    be finite and within +-MAX_EXACT_INTEGER; objects and arrays nest at most MAX_NESTING deep.
    Linear in the event's size, without recursion.

    Args:
        data: the decoded event (a JSON object).
        event_id: the event's `event_id` when it is itself a valid string, for the error.

    Raises:
        ProtocolError: `invalid_value` naming the offending value's param (its dotted path; the
            enclosing object's path for a key, None at the top level).
    """

    def refuse(message: str, trail: _Trail) -> ProtocolError:
        keys: list[str] = []
        while trail is not None:
            key, trail = trail
            keys.append(str(key))
        path = ".".join(reversed(keys))
        return ProtocolError("invalid_value", message.format(path=path), param=path or None,
                             event_id=event_id)

    pending: list[tuple[dict[str, Any] | list[Any], int, _Trail]] = [(data, 1, None)]
    while pending:
        container, depth, trail = pending.pop()
        is_object = type(container) is dict
        for key, value in container.items() if is_object else enumerate(container):
            if is_object and not key.isascii() and LONE_SURROGATE.search(key):
                raise refuse("A field name is not valid Unicode (lone surrogate).", trail)
            kind = type(value)  # json.loads makes exactly these types: identity is fastest
            if kind is str:
                if not value.isascii() and LONE_SURROGATE.search(value):
                    raise refuse("'{path}' is not valid Unicode (lone surrogate).",
                                 (key, trail))
            elif kind is int or kind is float:
                if not -MAX_EXACT_INTEGER <= value <= MAX_EXACT_INTEGER:
                    raise refuse(
                        f"'{{path}}' must be a finite number within +-{MAX_EXACT_INTEGER}.",
                        (key, trail),
                    )
            elif kind is dict or kind is list:
                if depth == MAX_NESTING:
                    raise refuse(f"Objects and arrays nest at most {MAX_NESTING} deep.",
                                 (key, trail))
                if value:
                    pending.append((value, depth + 1, (key, trail)))


class EventFields:
    """Typed access to one event's fields; every failure raises ProtocolError."""

    def __init__(self, data: dict[str, Any], event_id: str | None, allowed: set[str]) -> None:
        self.data = data
        self.event_id = event_id
        unknown = sorted(set(data) - allowed - {"type", "event_id"})
        if unknown:
            raise ProtocolError(
                "unknown_parameter", f"Unknown parameter '{unknown[0]}'.",
                param=unknown[0], event_id=event_id,
            )

    def error(self, code: str, message: str, param: str) -> ProtocolError:
        return ProtocolError(code, message, param=param, event_id=self.event_id)

    def string(self, name: str, *, required: bool) -> str | None:
        value = self.data.get(name)
        if value is None:
            if required:
                raise self.error("missing_required_parameter", f"Missing '{name}'.", name)
            return None
        if not isinstance(value, str) or not value:
            raise self.error("invalid_type", f"'{name}' must be a non-empty string.", name)
        if name.endswith("_id"):
            check_length(self, value, MAX_ID_CHARS, name)
        return value

    def milliseconds(self, name: str, *, required: bool = True) -> int:
        """A position in integer ms >= 0 (0 when absent and not required).

        Raises:
            ProtocolError: missing (when required), not a JSON integer (floats such as 1.0 and
                booleans included), or negative.
        """
        value = self.data.get(name)
        if value is None:
            if required:
                raise self.error("missing_required_parameter", f"Missing '{name}'.", name)
            return 0
        if not is_integer(value):
            raise self.error(
                "invalid_type", f"'{name}' must be an integer number of milliseconds.", name
            )
        if value < 0:
            raise self.error("invalid_value", f"'{name}' must be >= 0.", name)
        return value

    def boolean(self, name: str) -> bool:
        value = self.data.get(name, False)
        if not isinstance(value, bool):
            raise self.error("invalid_type", f"'{name}' must be a boolean.", name)
        return value


def check_length(fields: EventFields, value: str, limit: int, param: str) -> None:
    """Refuse a string longer than `limit` code points (`invalid_value`)."""
    if len(value) > limit:
        raise fields.error("invalid_value", f"'{param}' holds {len(value)} characters; at most "
                           f"{limit} are accepted.", param)


def refusal(errors: list[ProtocolError], event_id: str | None) -> ProtocolError:
    """One error naming every refused field: the first one's code and param, all messages."""
    first = errors[0]
    return ProtocolError(first.code, " ".join(e.message for e in errors), param=first.param,
                         event_id=event_id)
