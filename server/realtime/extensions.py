"""Which of a session's events its client sees: our extension events only after it opted in.

A client that never opts in sees OpenAI's GA event set only, so that strict clients (the
`openai-agents` SDK validates every server event against the `openai` package's models;
Pipecat ends its receive loop on an event type it does not know) never meet a type they do not
know. A client opts in with `session.extensions` in `session.update`, or by sending its first
`playback.ack` (PROTOCOL.md). An opted-in client gets one `conversation.item.heard` per
settled cut; the interim ones (the empty cut before its calibration, evidence attached later)
only with `interim_heard`. The session's observers (metrics) still see every event. Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EXTENSION_EVENTS = frozenset({
    "conversation.item.heard", "playback.acknowledged", "response.paused", "response.resumed",
    "input_audio_buffer.backchannel",
})
"""Server event types that are ours, not OpenAI's (PROTOCOL.md, "Server -> client"), held back
until the client opts in. `session.resumed` is ours too but not held back: it is only ever
sent to a client that asked to resume (`server.resumption`), which knows it."""


@dataclass(frozen=True, slots=True)
class ExtensionSettings:
    """`session.extensions`: `enabled` opts in to the extension events; `interim_heard` also
    sends every interim `conversation.item.heard` (else one per settled cut)."""

    enabled: bool = False
    interim_heard: bool = False

    @classmethod
    def from_wire(cls, value: Any) -> ExtensionSettings:
        """Settings from `session.extensions`: a boolean (opt in or out) or an object with the
        booleans `enabled` (default true) and `interim_heard` (default false).

        Raises:
            ValueError: any other value (the message names the expected shape).
        """
        if isinstance(value, bool):
            return cls(enabled=value)
        if isinstance(value, dict) and set(value) <= {"enabled", "interim_heard"} and all(
            isinstance(flag, bool) for flag in value.values()
        ):
            return cls(value.get("enabled", True), value.get("interim_heard", False))
        raise ValueError("session.extensions must be a boolean or an object of the booleans "
                         "'enabled' and 'interim_heard'.")

    def as_wire(self) -> dict[str, bool]:
        """The `extensions` object reported in `session.created` / `session.updated`."""
        return {"enabled": self.enabled, "interim_heard": self.interim_heard}


class ClientView:
    """Filters one session's events down to what its client receives.

    Args:
        reports_playback: whether the client has sent a `playback.ack` (an implicit opt-in).
        calibrating: whether heard-text calibration runs for this session (without it, a
            cut's first announcement is already settled).
    """

    def __init__(self, reports_playback: Callable[[], bool],
                 calibrating: Callable[[], bool]) -> None:
        self.settings = ExtensionSettings()
        self._reports_playback = reports_playback
        self._calibrating = calibrating
        self._heard: dict[str, tuple[str, str, bool]] = {}

    @property
    def opted_in(self) -> bool:
        """True once the client opted in (`session.extensions` or its first `playback.ack`)."""
        return self.settings.enabled or self._reports_playback()

    def visible(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The events of `events` the client receives, in order."""
        if not self.opted_in:
            return [e for e in events if e["type"] not in EXTENSION_EVENTS]
        if self.settings.interim_heard:
            return events
        return [e for e in events if e["type"] != "conversation.item.heard" or self._settled(e)]

    def _settled(self, heard: dict[str, Any]) -> bool:
        """Whether `conversation.item.heard` `heard` announces a settled cut not sent yet: a
        reply heard in full, a calibration result, or (without calibration) any new cut; the
        same cut again (evidence attached to it) is not sent twice."""
        state = (heard["text"], heard["method"], heard["interrupted"])
        if self._heard.get(heard["item_id"]) == state:
            return False
        if not (heard["method"] == "full" or heard["elapsed_ms"] is not None
                or not self._calibrating()):
            return False
        self._heard[heard["item_id"]] = state
        return True
