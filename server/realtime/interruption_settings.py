"""`session.interruption` (extension): how speech over an assistant reply is handled.

Plain settings with their wire form and validation, imported by the protocol parser and by
`server.realtime.pauses`, which applies them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INTERRUPTION_MODES = ("pause", "cancel")
"""`pause`: speech pauses a reply and its utterance decides; `cancel`: speech cancels at once."""


@dataclass(frozen=True, slots=True)
class InterruptionSettings:
    """`session.interruption` (extension): how speech over a reply is handled.

    Attributes:
        mode: "pause" (pause, then decide) or "cancel" (cancel at once, the OpenAI behaviour).
        pause_timeout_ms: longest pause without a decision (rule: `server.realtime.pauses`).
        max_backchannel_ms: the longest backchannel (ms of speech); longer speech cuts.
        language: ISO 639-1 code of the backchannel word lists
            (`server.listening.backchannel.VOCABULARIES`).
    """

    mode: str = "pause"
    pause_timeout_ms: int = 2500
    max_backchannel_ms: int = 1500
    language: str = "en"

    def as_wire(self) -> dict[str, Any]:
        """The settings as the `session.interruption` object."""
        return {"mode": self.mode, "pause_timeout_ms": self.pause_timeout_ms,
                "max_backchannel_ms": self.max_backchannel_ms, "language": self.language}

    def updated(self, value: Any, languages: frozenset[str]) -> InterruptionSettings:
        """These settings with the fields of a `session.interruption` object applied.

        Raises:
            ValueError: (field name, message) for an unknown field or a bad value.
        """
        if not isinstance(value, dict):
            raise ValueError("", "interruption must be an object.")
        fields = self.as_wire()
        for name, setting in value.items():
            if name not in fields:
                raise ValueError(name, f"Unsupported field '{name}'.")
            if name == "mode" and setting not in INTERRUPTION_MODES:
                raise ValueError(name, "mode must be 'pause' or 'cancel'.")
            if name == "language" and setting not in languages:
                raise ValueError(name, f"language must be one of {sorted(languages)}.")
            if name in ("pause_timeout_ms", "max_backchannel_ms") and (
                    isinstance(setting, bool) or not isinstance(setting, int)
                    or not 100 <= setting <= 30000):
                raise ValueError(name, f"{name} must be an int in [100, 30000].")
            fields[name] = setting
        return InterruptionSettings(**fields)
