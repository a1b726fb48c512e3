"""Client event parsing and validation for the `/v1/realtime` protocol (see PROTOCOL.md).

Event and field names follow the OpenAI Realtime GA API; `playback.ack` and `barge_in` are our
extensions. `parse_client_event` turns one text frame into a typed event or raises
`ProtocolError`, which the session turns into an `error` event naming the offending `event_id`.
Before any field is read, values no event accepts anywhere are refused (`_check_values`: lone
surrogates, numbers beyond +-2**53 - 1 or not finite, deep nesting), and JSON past Python's own
limits is an error too (`_decode`), so that nothing a client sends can make the server fail to
echo, store, log or encode it. Sans-I/O: pure functions and dataclasses.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from server.listening.backchannel import VOCABULARIES
from server.listening.server_vad_settings import (
    EAGERNESS_MAX_WAIT_MS,
    IDLE_TIMEOUT_RANGE_MS,
    TurnDetection,
)
from server.realtime.audio_formats import parse_format
from server.realtime.extensions import ExtensionSettings
from server.realtime.interruption_settings import InterruptionSettings
from server.realtime.item_create import (
    FUNCTION_ITEM_TYPES,
    FunctionItem,
    message_text,
    parse_function_item,
)
from server.realtime.modalities import parse_modalities
from server.realtime.openai_schema import response_errors, session_errors

MAX_FRAME_CHARS = 1_048_576
"""Largest client text frame accepted (code points); larger frames get an error event."""

MAX_NESTING = 16
"""Deepest nesting of objects and arrays accepted in a client event (the top-level object is
depth 1; the deepest field the protocol defines, a `turn_detection` setting, is at depth 5)."""

MAX_EXACT_INTEGER = 2**53 - 1
"""Largest magnitude of any number in a client event: the integers a JSON number holds exactly
everywhere (I-JSON, RFC 7493 section 2.2; JavaScript's `Number.MAX_SAFE_INTEGER`)."""

MAX_ID_CHARS = 64
"""Longest id a client may choose or name (`item.id`, `previous_item_id`, `item_id`,
`response_id`; code points). Server ids are about 25; OpenAI's metadata keys have the same cap."""

MAX_NAME_CHARS = 64
"""Longest name a client may send (`voice`, `model`, transcription `model` and `language`,
`barge_in.source`; code points)."""

MAX_INSTRUCTIONS_CHARS = 32_768
"""Longest `instructions` of `session.update` or `response.create` (code points)."""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""A UTF-16 surrogate code point: JSON escapes such as `\\ud800` decode to one when unpaired
(a valid pair decodes to one astral code point). Such a string has no UTF-8 encoding."""

OUTPUT_SAMPLE_RATE_HZ = 24000
"""The only output rate: the OpenAI Realtime `audio/pcm` format is 24 kHz PCM16 mono."""


class ProtocolError(Exception):
    """A client event that cannot be applied.

    Attributes:
        code: machine-readable error code (e.g. "invalid_json", "unknown_event_type").
        message: human-readable explanation.
        param: dotted path of the offending field, if any.
        event_id: the client's `event_id` of the offending event, if it had one.
        event_type: the offending event's `type` when it is a readable string (set by
            `parse_client_event`, so that no other layer parses a refused frame again).
    """

    def __init__(
        self, code: str, message: str, *, param: str | None = None, event_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param
        self.event_id = event_id
        self.event_type: str | None = None


@dataclass(frozen=True, slots=True)
class SessionUpdate:
    """`session.update`: the validated subset of session fields that were present."""

    event_id: str | None
    changes: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ItemCreate:
    """`conversation.item.create` with a user or system text message, or a function item
    (`function`: a `function_call_output` or `function_call`; then `text` is its output or
    arguments and `role` is "tool").

    `previous_item_id`: insert after this item (`"root"`: first); None appends. `role`:
    "user", or "system" (instructions placed in the prompt where the item is, as OpenAI
    does: Pipecat appends them mid-conversation)."""

    event_id: str | None
    text: str
    item_id: str | None = None
    previous_item_id: str | None = None
    role: str = "user"
    function: FunctionItem | None = None


@dataclass(frozen=True, slots=True)
class ResponseCreate:
    """`response.create`; `instructions` overrides the session's for this response only;
    `metadata` (up to 16 string pairs, OpenAI's `Metadata`) is echoed in its response object;
    `output_modalities` (`modalities.AUDIO` / `TEXT`), `tools` and `tool_choice` (OpenAI's
    shapes) override the session's, None keeps them."""

    event_id: str | None
    instructions: str | None = None
    metadata: dict[str, str] | None = None
    output_modalities: tuple[str, ...] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ResponseCancel:
    """`response.cancel`; without `response_id` it names the active response."""

    event_id: str | None
    response_id: str | None = None


@dataclass(frozen=True, slots=True)
class ItemTruncate:
    """`conversation.item.truncate`: a permanent cap at `audio_end_ms` on an assistant item."""

    event_id: str | None
    item_id: str
    content_index: int
    audio_end_ms: int


@dataclass(frozen=True, slots=True)
class OutputAudioBufferClear:
    """`output_audio_buffer.clear`: the client dropped its queued audio."""

    event_id: str | None
    response_id: str | None = None


@dataclass(frozen=True, slots=True)
class ItemDelete:
    """`conversation.item.delete`."""

    event_id: str | None
    item_id: str


@dataclass(frozen=True, slots=True)
class ItemRetrieve:
    """`conversation.item.retrieve`."""

    event_id: str | None
    item_id: str


@dataclass(frozen=True, slots=True)
class InputAudioAppend:
    """`input_audio_buffer.append`: the audio bytes in the session's input format
    (`server.realtime.audio_formats`: the session turns them into PCM16 at 24 kHz)."""

    event_id: str | None
    pcm16: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class InputAudioCommit:
    """`input_audio_buffer.commit`."""

    event_id: str | None


@dataclass(frozen=True, slots=True)
class InputAudioClear:
    """`input_audio_buffer.clear`."""

    event_id: str | None


@dataclass(frozen=True, slots=True)
class PlaybackAck:
    """`playback.ack` (extension): what the client rendered of one response, in ms."""

    event_id: str | None
    response_id: str | None
    item_id: str | None
    played_ms: int
    truncate: bool = False


@dataclass(frozen=True, slots=True)
class BargeIn:
    """`barge_in` (extension): cancel, stop sending, cap at `audio_end_ms`, calibrate now.

    `audio_end_ms` is None when the client left it out: the reply is then capped where the
    client's last `playback.ack` put it (or, for a client that does not report playback, at
    its real-time position), never before what was already reported heard."""

    event_id: str | None
    response_id: str | None
    item_id: str | None
    audio_end_ms: int | None
    source: str = "unknown"
    pause: bool = False


ClientEvent = (
    SessionUpdate
    | ItemCreate
    | ResponseCreate
    | ResponseCancel
    | ItemTruncate
    | OutputAudioBufferClear
    | ItemDelete
    | ItemRetrieve
    | InputAudioAppend
    | InputAudioCommit
    | InputAudioClear
    | PlaybackAck
    | BargeIn
)

EVENT_TYPES: dict[type, str] = {
    SessionUpdate: "session.update", ItemCreate: "conversation.item.create",
    ResponseCreate: "response.create", ResponseCancel: "response.cancel",
    ItemTruncate: "conversation.item.truncate",
    OutputAudioBufferClear: "output_audio_buffer.clear", ItemDelete: "conversation.item.delete",
    ItemRetrieve: "conversation.item.retrieve", InputAudioAppend: "input_audio_buffer.append",
    InputAudioCommit: "input_audio_buffer.commit", InputAudioClear: "input_audio_buffer.clear",
    PlaybackAck: "playback.ack", BargeIn: "barge_in",
}
"""The wire `type` of each client event class."""


def _is_integer(value: Any) -> bool:
    """True for a JSON integer (a Python int that is not a bool; 1.0 is a float)."""
    return isinstance(value, int) and not isinstance(value, bool)


_Trail = tuple[str | int, "_Trail"] | None
"""Where a value sits in an event: (its key or index, the trail of its container)."""


def _check_values(data: dict[str, Any], event_id: str | None) -> None:
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
            if is_object and not key.isascii() and _LONE_SURROGATE.search(key):
                raise refuse("A field name is not valid Unicode (lone surrogate).", trail)
            kind = type(value)  # json.loads makes exactly these types: identity is fastest
            if kind is str:
                if not value.isascii() and _LONE_SURROGATE.search(value):
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


class _Fields:
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
            _check_length(self, value, MAX_ID_CHARS, name)
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
        if not _is_integer(value):
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


def _check_length(fields: _Fields, value: str, limit: int, param: str) -> None:
    """Refuse a string longer than `limit` code points (`invalid_value`)."""
    if len(value) > limit:
        raise fields.error("invalid_value", f"'{param}' holds {len(value)} characters; at most "
                           f"{limit} are accepted.", param)


SESSION_EXTENSIONS = frozenset({"interruption", "extensions"})
"""Our own fields of the session object (PROTOCOL.md); every other field is OpenAI's."""

STORED_SESSION_FIELDS = ("tools", "tool_choice", "tracing", "include", "max_output_tokens",
                         "prompt", "truncation", "parallel_tool_calls", "reasoning")
"""OpenAI session fields this server keeps as given and reports back in `session.updated`
(`SessionUpdate.changes["stored"]`); what the responder honours of them is its business."""


def _refusal(errors: list[ProtocolError], event_id: str | None) -> ProtocolError:
    """One error naming every refused field: the first one's code and param, all messages."""
    first = errors[0]
    return ProtocolError(first.code, " ".join(e.message for e in errors), param=first.param,
                         event_id=event_id)


def _parse_session(fields: _Fields) -> SessionUpdate:
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
        raise _refusal(errors, fields.event_id)
    return SessionUpdate(fields.event_id, changes)


def _length_errors(fields: _Fields, session: dict[str, Any]) -> list[ProtocolError]:
    """The strings of a session object this server keeps, past their bounds (`_check_length`):
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
                _check_length(fields, value, limit, param)
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


def _parse_turn_detection(fields: _Fields, value: Any, param: str) -> TurnDetection | None:
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


def _parse_item_create(fields: _Fields) -> ItemCreate:
    item = fields.data.get("item")
    if not isinstance(item, dict):
        raise fields.error("invalid_type", "'item' must be an object.", "item")
    function = (parse_function_item(item, fields.error)
                if isinstance(item.get("type"), str) and item["type"] in FUNCTION_ITEM_TYPES
                else None)
    text = message_text(item, fields.error) if function is None else function.text
    return ItemCreate(fields.event_id, text, _item_id(fields, item),
                      fields.string("previous_item_id", required=False),
                      "tool" if function is not None else item["role"], function)


def _item_id(fields: _Fields, item: dict[str, Any]) -> str | None:
    """The client's `item.id` (None when absent), checked."""
    item_id = item.get("id")
    if item_id is not None and (not isinstance(item_id, str) or not item_id):
        raise fields.error("invalid_type", "item.id must be a non-empty string.", "item.id")
    if item_id is not None:
        _check_length(fields, item_id, MAX_ID_CHARS, "item.id")
    return item_id


def _parse_response_create(fields: _Fields) -> ResponseCreate:
    """A `response.create`: its response object is checked against OpenAI's GA schema
    (`openai_schema.response_errors`, every refused field named at once). `instructions`,
    `metadata` and `output_modalities` are honoured; the other fields are accepted and the
    reply is this server's (its voice, the session's conversation).

    Raises:
        ProtocolError: every field OpenAI refuses.
    """
    response = fields.data.get("response")
    if response is None:
        return ResponseCreate(fields.event_id)
    if not isinstance(response, dict):
        raise fields.error("invalid_type", "'response' must be an object.", "response")
    errors = [fields.error(e.code, e.message, e.param) for e in response_errors(response)]
    instructions = response.get("instructions")
    if isinstance(instructions, str):
        try:
            _check_length(fields, instructions, MAX_INSTRUCTIONS_CHARS, "response.instructions")
        except ProtocolError as exc:
            errors.append(exc)
    if errors:
        raise _refusal(errors, fields.event_id)
    modalities = response.get("output_modalities")
    return ResponseCreate(fields.event_id, instructions, response.get("metadata"),
                          parse_modalities(modalities) if modalities else None,
                          response.get("tools"), response.get("tool_choice"))


def _parse_audio_append(fields: _Fields) -> InputAudioAppend:
    audio = fields.string("audio", required=True)
    try:
        pcm16 = base64.b64decode(audio or "", validate=True)
    except (binascii.Error, ValueError):
        raise fields.error("invalid_audio", "'audio' is not valid base64.", "audio") from None
    return InputAudioAppend(fields.event_id, pcm16)


def _parse_ack(fields: _Fields) -> PlaybackAck:
    response_id = fields.string("response_id", required=False)
    item_id = fields.string("item_id", required=False)
    if response_id is None and item_id is None:
        raise fields.error(
            "missing_required_parameter",
            "playback.ack must name its response_id or item_id (positions are per response).",
            "response_id",
        )
    fields.milliseconds("committed_ms", required=False)  # checked; the commit follows played_ms
    return PlaybackAck(
        fields.event_id, response_id, item_id, fields.milliseconds("played_ms"),
        fields.boolean("truncate"),
    )


def _parse_barge_in(fields: _Fields) -> BargeIn:
    source = fields.data.get("source", "unknown")
    if not isinstance(source, str):
        raise fields.error("invalid_type", "'source' must be a string.", "source")
    _check_length(fields, source, MAX_NAME_CHARS, "source")
    return BargeIn(
        fields.event_id,
        fields.string("response_id", required=False),
        fields.string("item_id", required=False),
        fields.milliseconds("audio_end_ms") if "audio_end_ms" in fields.data else None,
        source,
        fields.boolean("pause"),
    )


def _parse_truncate(fields: _Fields) -> ItemTruncate:
    item_id = fields.string("item_id", required=True)
    content_index = fields.data.get("content_index", 0)
    if not _is_integer(content_index) or content_index != 0:
        raise fields.error("invalid_value", "content_index must be the integer 0.",
                           "content_index")
    return ItemTruncate(fields.event_id, item_id or "", 0, fields.milliseconds("audio_end_ms"))


_PARSERS: dict[str, tuple[set[str], Any]] = {
    "session.update": ({"session"}, _parse_session),
    "conversation.item.create": ({"item", "previous_item_id"}, _parse_item_create),
    "response.create": ({"response"}, _parse_response_create),
    "response.cancel": (
        {"response_id"},
        lambda f: ResponseCancel(f.event_id, f.string("response_id", required=False)),
    ),
    "conversation.item.truncate": (
        {"item_id", "content_index", "audio_end_ms"}, _parse_truncate,
    ),
    "output_audio_buffer.clear": (
        {"response_id"},
        lambda f: OutputAudioBufferClear(f.event_id, f.string("response_id", required=False)),
    ),
    "conversation.item.delete": (
        {"item_id"}, lambda f: ItemDelete(f.event_id, f.string("item_id", required=True) or ""),
    ),
    "conversation.item.retrieve": (
        {"item_id"}, lambda f: ItemRetrieve(f.event_id, f.string("item_id", required=True) or ""),
    ),
    "input_audio_buffer.append": ({"audio"}, _parse_audio_append),
    "input_audio_buffer.commit": (set(), lambda f: InputAudioCommit(f.event_id)),
    "input_audio_buffer.clear": (set(), lambda f: InputAudioClear(f.event_id)),
    "playback.ack": (
        {"response_id", "item_id", "played_ms", "committed_ms", "truncate"}, _parse_ack,
    ),
    "barge_in": ({"response_id", "item_id", "audio_end_ms", "source", "pause"},
                 _parse_barge_in),
}


def _decode(frame: str | bytes) -> dict[str, Any]:
    """The JSON object a text frame holds.

    Raises:
        ProtocolError: a binary or oversized frame, malformed JSON, JSON past Python's own
            limits (nesting past the recursion limit, integers of more than 4300 digits), a
            JSON value that is not an object.
    """
    if isinstance(frame, bytes):
        raise ProtocolError("invalid_frame", "Binary frames are not supported; send JSON text.")
    if len(frame) > MAX_FRAME_CHARS:
        raise ProtocolError("frame_too_large", f"Frames are limited to {MAX_FRAME_CHARS} chars.")
    try:
        data = json.loads(frame)
    except json.JSONDecodeError as exc:
        raise ProtocolError("invalid_json", f"Frame is not valid JSON: {exc.msg}.") from None
    except RecursionError:
        raise ProtocolError(
            "invalid_value", f"Objects and arrays nest at most {MAX_NESTING} deep."
        ) from None
    except ValueError:  # an integer literal longer than sys.get_int_max_str_digits()
        raise ProtocolError(
            "invalid_value", f"Numbers must be finite and within +-{MAX_EXACT_INTEGER}."
        ) from None
    if not isinstance(data, dict):
        raise ProtocolError("invalid_json", "A client event must be a JSON object.")
    return data


def _readable_event_id(data: dict[str, Any]) -> str | None:
    """The event's `event_id` when an error may echo it: a string without lone surrogates."""
    event_id = data.get("event_id")
    if isinstance(event_id, str) and not _LONE_SURROGATE.search(event_id):
        return event_id
    return None


def event_id_of(frame: str | bytes) -> str | None:
    """The `event_id` an error about `frame` names, whatever else is wrong with the frame: its
    `event_id` when it is a JSON object whose `event_id` is a valid string, else None. Never
    raises (for frames refused before parsing, e.g. above the event rate)."""
    try:
        return _readable_event_id(_decode(frame))
    except ProtocolError:
        return None


def parse_client_event(frame: str | bytes) -> ClientEvent:
    """Parse one WebSocket frame into a typed client event.

    Args:
        frame: a text frame (str) holding one JSON object; binary frames are rejected.

    Returns:
        One of the dataclasses in `ClientEvent`.

    Raises:
        ProtocolError: what `_decode` refuses, a value no event accepts (`_check_values`: lone
            surrogates, numbers beyond +-MAX_EXACT_INTEGER, NaN, Infinity, nesting deeper than
            MAX_NESTING), an unknown `type`, unknown or missing fields, wrong field types or
            values. `event_id` and `event_type` are filled when readable (`event_id_of`).
    """
    data = _decode(frame)
    try:
        return _parse_event(data)
    except ProtocolError as exc:
        event_type = data.get("type")
        if isinstance(event_type, str) and not _LONE_SURROGATE.search(event_type):
            exc.event_type = event_type
        raise


def _parse_event(data: dict[str, Any]) -> ClientEvent:
    """The typed event of a decoded frame (see `parse_client_event`)."""
    event_id = data.get("event_id")
    if event_id is not None and not isinstance(event_id, str):
        raise ProtocolError("invalid_type", "'event_id' must be a string.", param="event_id")
    _check_values(data, _readable_event_id(data))
    event_type = data.get("type")
    if not isinstance(event_type, str):
        raise ProtocolError(
            "missing_required_parameter", "Missing 'type'.", param="type", event_id=event_id
        )
    if event_type not in _PARSERS:
        raise ProtocolError(
            "unknown_event_type", f"Unknown event type '{event_type}'.",
            param="type", event_id=event_id,
        )
    allowed, parser = _PARSERS[event_type]
    return parser(_Fields(data, event_id, allowed))
