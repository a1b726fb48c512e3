"""The client events of the `/v1/realtime` protocol as typed values, their bounds, and the error
that refuses one (see PROTOCOL.md).

Event and field names follow the OpenAI Realtime GA API; `playback.ack` and `barge_in` are our
extensions. `server.realtime.event_parser.parse_client_event` turns one text frame into one of
these events or raises `ProtocolError`, which the session turns into an `error` event naming the
offending `event_id`; `server.realtime.event_fields` reads and bounds the fields and
`server.realtime.session_update` parses `session.update`. Sans-I/O: dataclasses only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from server.realtime.item_create import FunctionItem

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
