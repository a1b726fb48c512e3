"""What a session gives back: server events and effects in order, and the ids it hands out.

`EventLog` is the session's one outbox. The session and its collaborators (`input_turns`,
`items`) emit into it; the I/O layer drains it with `take_events` / `take_effects`. Sans-I/O.
"""

from __future__ import annotations

import secrets
from collections.abc import Container
from typing import Any

from server.realtime.effects import Effect
from server.realtime.protocol import ProtocolError


class EventLog:
    """Server events (wire dicts) and effects produced by one session, oldest first."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._effects: list[Effect] = []
        self._seq = 0

    def emit(self, event_type: str, **fields: Any) -> None:
        """Append the server event `event_type` with a fresh `event_id` and `fields`."""
        self._seq += 1
        self._events.append({"type": event_type, "event_id": f"event_{self._seq:06d}", **fields})

    def error(self, exc: ProtocolError) -> None:
        """Append an `error` event (type `invalid_request_error`) describing `exc`."""
        self.emit(
            "error",
            error={
                "type": "invalid_request_error",
                "code": exc.code,
                "message": exc.message,
                "param": exc.param,
                "event_id": exc.event_id,
            },
        )

    def effect(self, effect: Effect) -> None:
        """Append an effect for the I/O layer to carry out."""
        self._effects.append(effect)

    @staticmethod
    def new_id(prefix: str, taken: Container[str] = ()) -> str:
        """A new server id: `prefix`, "_" and 20 random hex digits (80 bits from `secrets`),
        e.g. `item_3f2a9c...`, like OpenAI's prefix plus random suffix: unique across sessions
        and restarts, and never one of `taken` (the ids clients chose)."""
        while (new := f"{prefix}_{secrets.token_hex(10)}") in taken:
            continue
        return new

    def take_events(self) -> list[dict[str, Any]]:
        """Return and clear the events produced so far (in order)."""
        events, self._events = self._events, []
        return events

    def take_effects(self) -> list[Effect]:
        """Return and clear the effects produced so far (in order)."""
        effects, self._effects = self._effects, []
        return effects
