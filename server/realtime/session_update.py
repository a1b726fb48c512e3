"""`session.update`: OpenAI's GA session object plus our extensions, validated as a whole.

`parse_session_update` checks the session object against OpenAI's schema
(`openai_schema.session_errors`), the bounds of the strings this server keeps, our
`turn_detection` parser and our extensions (`interruption`, `extensions`), and names every
refused field in one error. Sans-I/O: pure functions.
"""

from __future__ import annotations

from typing import Any

from server.listening.backchannel import VOCABULARIES
from server.listening.server_vad_settings import (
    EAGERNESS_MAX_WAIT_MS,
    IDLE_TIMEOUT_RANGE_MS,
    TurnDetection,
)
from server.realtime.audio_formats import parse_format
from server.realtime.event_fields import EventFields, check_length, refusal
from server.realtime.extensions import ExtensionSettings
from server.realtime.interruption_settings import InterruptionSettings
from server.realtime.modalities import parse_modalities
from server.realtime.openai_schema import session_errors
from server.realtime.protocol import (
    MAX_INSTRUCTIONS_CHARS,
    MAX_NAME_CHARS,
    ProtocolError,
    SessionUpdate,
)

SESSION_EXTENSIONS = frozenset({"interruption", "extensions"})
"""Our own fields of the session object (PROTOCOL.md); every other field is OpenAI's."""

STORED_SESSION_FIELDS = ("tools", "tool_choice", "tracing", "include", "max_output_tokens",
                         "prompt", "truncation", "parallel_tool_calls", "reasoning")
"""OpenAI session fields this server keeps as given and reports back in `session.updated`
(`SessionUpdate.changes["stored"]`); what the responder honours of them is its business."""


def parse_session_update(fields: EventFields) -> SessionUpdate:
    """A `session.update`: OpenAI's GA session object (`openai_schema.session_errors`) plus our
    extensions (SESSION_EXTENSIONS). Every refused field is named in one error; nothing of a
    refused update applies.

    `changes` holds what the session applies or stores: `instructions`, `voice` (any OpenAI
    voice is accepted; the server speaks with its own), `turn_detection`, `noise_reduction` and
    `transcription` (null: off), `input_format` / `output_format` (`audio_formats.
    parse_format`: 24 kHz `audio/pcm`, `audio/pcmu`, `audio/pcma`), `interruption`,
    `output_modalities` (`modalities.parse_modalities`), `extensions`, and `stored` (the
    fields of STORED_SESSION_FIELDS present). `model` and `audio.output.speed` are accepted
    and reported back as what this server does (its model, 1.0).

    Raises:
        ProtocolError: every field OpenAI refuses, `audio/pcm` at another rate, bad extension
            fields.
    """
    session = fields.data.get("session")
    if not isinstance(session, dict):
        raise fields.error("invalid_type", "'session' must be an object.", "session")
    standard = {k: v for k, v in session.items() if k not in SESSION_EXTENSIONS}
    errors = [fields.error(e.code, e.message, e.param) for e in session_errors(standard)]
    errors += _length_errors(fields, standard)
    refused = {e.param for e in errors}
    changes: dict[str, Any] = {"stored": {k: standard[k] for k in STORED_SESSION_FIELDS
                                          if k in standard}}
    if "instructions" in standard:
        changes["instructions"] = standard["instructions"]
    if standard.get("output_modalities") and not any(
            p.startswith("session.output_modalities") for p in refused):
        changes["output_modalities"] = parse_modalities(standard["output_modalities"])
    audio = standard.get("audio") if isinstance(standard.get("audio"), dict) else {}
    for direction in ("input", "output"):
        settings = audio.get(direction) if isinstance(audio.get(direction), dict) else {}
        param = f"session.audio.{direction}"
        if "format" in settings and not any(p.startswith(f"{param}.format") for p in refused):
            try:
                changes[f"{direction}_format"] = parse_format(settings["format"])
            except ValueError as exc:
                errors.append(fields.error("invalid_value", str(exc), f"{param}.format"))
        for key in ("noise_reduction", "transcription") if direction == "input" else ():
            if key in settings:
                changes[key] = settings[key]
        detection = settings.get("turn_detection", ...) if direction == "input" else ...
        if detection is not ...:
            # The typed schema refuses a bad turn_detection as a whole (a union of types);
            # our parser names the field, so its error stands instead.
            detection_param = f"{param}.turn_detection"
            try:
                changes["turn_detection"] = _parse_turn_detection(fields, detection,
                                                                  detection_param)
            except ProtocolError as exc:
                errors = [e for e in errors if not e.param.startswith(detection_param)]
                errors.append(exc)
        if "voice" in settings:
            changes["voice"] = settings["voice"]
    if "interruption" in session:
        try:
            InterruptionSettings().updated(session["interruption"], frozenset(VOCABULARIES))
            changes["interruption"] = session["interruption"]
        except ValueError as exc:
            name, message = exc.args
            errors.append(fields.error("invalid_value", message, "session.interruption"
                                       + (f".{name}" if name else "")))
    if "extensions" in session:
        try:
            changes["extensions"] = ExtensionSettings.from_wire(session["extensions"])
        except ValueError as exc:
            errors.append(fields.error("invalid_value", str(exc), "session.extensions"))
    if errors:
        raise refusal(errors, fields.event_id)
    return SessionUpdate(fields.event_id, changes)


def _length_errors(fields: EventFields, session: dict[str, Any]) -> list[ProtocolError]:
    """The strings of a session object this server keeps, past their bounds (`check_length`):
    `instructions` (`MAX_INSTRUCTIONS_CHARS`), `model`, the output voice and the transcription
    model and language (`MAX_NAME_CHARS`)."""
    def part(parent: Any, key: str) -> dict[str, Any]:
        value = parent.get(key) if isinstance(parent, dict) else None
        return value if isinstance(value, dict) else {}

    audio = part(session, "audio")
    transcription = part(part(audio, "input"), "transcription")
    bounded = ((session.get("instructions"), MAX_INSTRUCTIONS_CHARS, "session.instructions"),
               (session.get("model"), MAX_NAME_CHARS, "session.model"),
               (part(audio, "output").get("voice"), MAX_NAME_CHARS,
                "session.audio.output.voice"),
               (transcription.get("model"), MAX_NAME_CHARS,
                "session.audio.input.transcription.model"),
               (transcription.get("language"), MAX_NAME_CHARS,
                "session.audio.input.transcription.language"))
    errors = []
    for value, limit, param in bounded:
        if isinstance(value, str):
            try:
                check_length(fields, value, limit, param)
            except ProtocolError as exc:
                errors.append(exc)
    return errors


_TURN_DETECTION_FIELDS = {
    "server_vad": frozenset({"type", "threshold", "prefix_padding_ms", "silence_duration_ms",
                             "idle_timeout_ms", "create_response", "interrupt_response"}),
    "semantic_vad": frozenset({"type", "eagerness", "create_response", "interrupt_response"}),
}
"""The fields of each OpenAI GA `turn_detection` type (openai
`types/realtime/realtime_audio_input_turn_detection.py`)."""


def _parse_turn_detection(fields: EventFields, value: Any, param: str) -> TurnDetection | None:
    """OpenAI's `turn_detection` (`server_vad`, `semantic_vad` or null) as `TurnDetection`.

    Raises:
        ProtocolError: `invalid_value` / `invalid_type` / `unknown_parameter` naming the
            first bad field (the update is refused whole).
    """
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if not isinstance(kind, str) or kind not in _TURN_DETECTION_FIELDS:
        raise fields.error("invalid_value",
                           "turn_detection type must be 'server_vad' or 'semantic_vad'.", param)
    unknown = set(value) - _TURN_DETECTION_FIELDS[kind]
    if unknown:
        name = sorted(unknown)[0]
        raise fields.error("unknown_parameter", f"Unsupported field '{name}'.",
                           f"{param}.{name}")
    flags = {}
    for name in ("create_response", "interrupt_response"):
        setting = value.get(name, True)
        if not isinstance(setting, bool):
            raise fields.error("invalid_type", f"{name} must be a boolean.", f"{param}.{name}")
        flags[name] = setting
    if kind == "semantic_vad":
        eagerness = value.get("eagerness", "auto")
        if eagerness not in EAGERNESS_MAX_WAIT_MS:
            raise fields.error("invalid_value",
                               "eagerness must be one of 'low', 'medium', 'high', 'auto'.",
                               f"{param}.eagerness")
        return TurnDetection(type=kind, eagerness=eagerness, **flags)
    threshold = value.get("threshold", 0.5)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not (
        0.0 < threshold < 1.0
    ):
        raise fields.error("invalid_value", "threshold must be in (0, 1).", f"{param}.threshold")
    durations = {}
    for name, default, limit in (("prefix_padding_ms", 300, 2000),
                                 ("silence_duration_ms", 500, 5000)):
        setting = value.get(name, default)
        if isinstance(setting, bool) or not isinstance(setting, int) or not (
            0 <= setting <= limit
        ):
            raise fields.error("invalid_value", f"{name} must be an int in [0, {limit}].",
                               f"{param}.{name}")
        durations[name] = setting
    idle = value.get("idle_timeout_ms")
    low, high = IDLE_TIMEOUT_RANGE_MS
    if idle is not None and (isinstance(idle, bool) or not isinstance(idle, int)
                             or not low <= idle <= high):
        raise fields.error("invalid_value",
                           f"idle_timeout_ms must be null or an int in [{low}, {high}].",
                           f"{param}.idle_timeout_ms")
    return TurnDetection(threshold=float(threshold), idle_timeout_ms=idle, **durations, **flags)
