"""The session object a client sees and changes: `session.created` / `session.updated` and
`session.update`.

`SessionSettings` holds what `session.update` may change (instructions, output modalities, the
OpenAI fields this server stores and reports back) and applies a validated update
(`server.realtime.session_update.parse_session_update`) to the parts that own the rest: the
wire audio formats, the turn detection, the interruption rules and the extension opt-in. The
server-owned settings are `server.realtime.session.SessionConfig`. Sans-I/O.
"""

from __future__ import annotations

from typing import Any

from server.listening.backchannel import VOCABULARIES
from server.realtime import modalities, protocol
from server.realtime.audio_formats import WireAudio
from server.realtime.events import EventLog
from server.realtime.extensions import ClientView
from server.realtime.input_turns import InputTurns
from server.realtime.limits import stored_settings_error
from server.realtime.pauses import ReplyPauses

OPENAI_SESSION_DEFAULTS: dict[str, Any] = {
    "noise_reduction": None, "transcription": None, "tools": [], "tool_choice": "auto",
    "tracing": None, "max_output_tokens": "inf", "prompt": None, "truncation": "auto",
}
"""OpenAI session fields this server stores and reports back, at OpenAI's defaults (as in
OpenAI's `session.created`); `session.update` replaces them
(`session_update.STORED_SESSION_FIELDS`, `noise_reduction` and `transcription`)."""


class SessionSettings:
    """The client-visible settings of one session.

    Args:
        session_id: the id reported in the session object.
        instructions: the system instructions until the client changes them.
        voice: the voice reported (the server speaks with its own whatever is asked).
        wire_audio: the session's input and output audio formats.
        input_turns: the session's input turns (the turn detection in force).
        pauses: the session's paused replies (the interruption rules in force).
        client_view: the session's extension opt-in.
        log: the session's outbox (`session.updated`).

    Attributes:
        instructions: system instructions given to the responder.
        output_modalities: `modalities.AUDIO` or `modalities.TEXT`.
        stored: the OpenAI fields kept as given (`OPENAI_SESSION_DEFAULTS` keys and more).
    """

    def __init__(self, session_id: str, instructions: str, voice: str, wire_audio: WireAudio,
                 input_turns: InputTurns, pauses: ReplyPauses, client_view: ClientView,
                 log: EventLog) -> None:
        self._id = session_id
        self._voice = voice
        self._wire_audio = wire_audio
        self._input_turns = input_turns
        self._pauses = pauses
        self._client_view = client_view
        self._log = log
        self.instructions = instructions
        self.output_modalities = modalities.AUDIO
        self.stored: dict[str, Any] = dict(OPENAI_SESSION_DEFAULTS)

    def wire(self) -> dict[str, Any]:
        """The session object of `session.created` / `session.updated` (OpenAI's GA shape plus
        `interruption` and `extensions`)."""
        detection = self._input_turns.turn_detection
        stored = dict(self.stored)
        return {
            "type": "realtime",
            "id": self._id,
            "object": "realtime.session",
            "model": "duplex-demo",
            "instructions": self.instructions,
            "output_modalities": list(self.output_modalities),
            "audio": {
                "input": {"format": self._wire_audio.input_format,
                          "noise_reduction": stored.pop("noise_reduction"),
                          "transcription": stored.pop("transcription"),
                          "turn_detection": detection.as_wire() if detection else None},
                "output": {"format": self._wire_audio.output_format, "voice": self._voice,
                           "speed": 1.0},
            },
            **stored,
            "interruption": self._pauses.settings.as_wire(),
            "extensions": self._client_view.settings.as_wire(),
        }

    def update(self, event: protocol.SessionUpdate) -> None:
        """Apply a validated `session.update` (`session_update.parse_session_update` says what
        each field does here) and report the session as it now is in `session.updated`. A
        requested voice is accepted and reported as the server's own.

        Raises:
            protocol.ProtocolError: the stored fields would pass their bounds
                (`limits.stored_settings_error`); nothing changes then.
        """
        changes = event.changes
        changed = {**changes["stored"], **{key: changes[key] for key in (
            "noise_reduction", "transcription") if key in changes}}
        stored = {**self.stored, **changed}
        if (error := stored_settings_error(stored, changed, event.event_id)) is not None:
            raise error
        self.stored = stored
        self._wire_audio.configure(changes.get("input_format"), changes.get("output_format"))
        if "extensions" in changes:
            self._client_view.settings = changes["extensions"]
        if "instructions" in changes:
            self.instructions = changes["instructions"]
        self.output_modalities = changes.get("output_modalities", self.output_modalities)
        if "turn_detection" in changes:
            self._input_turns.configure(changes["turn_detection"])
            if changes["turn_detection"] is None:
                self._pauses.input_replaced(None)
        if "interruption" in changes:
            self._pauses.settings = self._pauses.settings.updated(changes["interruption"],
                                                                  frozenset(VOCABULARIES))
        self._log.emit("session.updated", session=self.wire())
