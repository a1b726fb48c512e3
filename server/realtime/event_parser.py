"""Client frames of the `/v1/realtime` protocol into typed events (see PROTOCOL.md).

`parse_client_event` decodes one text frame (`_decode`: JSON past Python's own limits is an
error too), refuses values no event accepts (`event_fields.check_values`), and hands the fields
to the parser of the event's `type`: `session_update.parse_session_update` for `session.update`,
the parsers here for the conversation item, response, input audio buffer and playback
(`playback.ack`, `barge_in`, `output_audio_buffer.clear`) families. Sans-I/O: pure functions.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from server.realtime.event_fields import (
    LONE_SURROGATE,
    EventFields,
    check_length,
    check_values,
    is_integer,
    refusal,
)
from server.realtime.item_create import FUNCTION_ITEM_TYPES, message_text, parse_function_item
from server.realtime.modalities import parse_modalities
from server.realtime.openai_schema import response_errors
from server.realtime.protocol import (
    MAX_EXACT_INTEGER,
    MAX_FRAME_CHARS,
    MAX_ID_CHARS,
    MAX_INSTRUCTIONS_CHARS,
    MAX_NAME_CHARS,
    MAX_NESTING,
    BargeIn,
    ClientEvent,
    InputAudioAppend,
    InputAudioClear,
    InputAudioCommit,
    ItemCreate,
    ItemDelete,
    ItemRetrieve,
    ItemTruncate,
    OutputAudioBufferClear,
    PlaybackAck,
    ProtocolError,
    ResponseCancel,
    ResponseCreate,
)
from server.realtime.session_update import parse_session_update


def _parse_item_create(fields: EventFields) -> ItemCreate:
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


def _item_id(fields: EventFields, item: dict[str, Any]) -> str | None:
    """The client's `item.id` (None when absent), checked."""
    item_id = item.get("id")
    if item_id is not None and (not isinstance(item_id, str) or not item_id):
        raise fields.error("invalid_type", "item.id must be a non-empty string.", "item.id")
    if item_id is not None:
        check_length(fields, item_id, MAX_ID_CHARS, "item.id")
    return item_id


def _parse_response_create(fields: EventFields) -> ResponseCreate:
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
            check_length(fields, instructions, MAX_INSTRUCTIONS_CHARS, "response.instructions")
        except ProtocolError as exc:
            errors.append(exc)
    if errors:
        raise refusal(errors, fields.event_id)
    modalities = response.get("output_modalities")
    return ResponseCreate(fields.event_id, instructions, response.get("metadata"),
                          parse_modalities(modalities) if modalities else None,
                          response.get("tools"), response.get("tool_choice"))


def _parse_audio_append(fields: EventFields) -> InputAudioAppend:
    audio = fields.string("audio", required=True)
    try:
        pcm16 = base64.b64decode(audio or "", validate=True)
    except (binascii.Error, ValueError):
        raise fields.error("invalid_audio", "'audio' is not valid base64.", "audio") from None
    return InputAudioAppend(fields.event_id, pcm16)


def _parse_ack(fields: EventFields) -> PlaybackAck:
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


def _parse_barge_in(fields: EventFields) -> BargeIn:
    source = fields.data.get("source", "unknown")
    if not isinstance(source, str):
        raise fields.error("invalid_type", "'source' must be a string.", "source")
    check_length(fields, source, MAX_NAME_CHARS, "source")
    return BargeIn(
        fields.event_id,
        fields.string("response_id", required=False),
        fields.string("item_id", required=False),
        fields.milliseconds("audio_end_ms") if "audio_end_ms" in fields.data else None,
        source,
        fields.boolean("pause"),
    )


def _parse_truncate(fields: EventFields) -> ItemTruncate:
    item_id = fields.string("item_id", required=True)
    content_index = fields.data.get("content_index", 0)
    if not is_integer(content_index) or content_index != 0:
        raise fields.error("invalid_value", "content_index must be the integer 0.",
                           "content_index")
    return ItemTruncate(fields.event_id, item_id or "", 0, fields.milliseconds("audio_end_ms"))


_PARSERS: dict[str, tuple[set[str], Any]] = {
    "session.update": ({"session"}, parse_session_update),
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
    if isinstance(event_id, str) and not LONE_SURROGATE.search(event_id):
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
        ProtocolError: what `_decode` refuses, a value no event accepts
            (`event_fields.check_values`: lone surrogates, numbers beyond +-MAX_EXACT_INTEGER,
            NaN, Infinity, nesting deeper than MAX_NESTING), an unknown `type`, unknown or
            missing fields, wrong field types or values. `event_id` and `event_type` are
            filled when readable (`event_id_of`).
    """
    data = _decode(frame)
    try:
        return _parse_event(data)
    except ProtocolError as exc:
        event_type = data.get("type")
        if isinstance(event_type, str) and not LONE_SURROGATE.search(event_type):
            exc.event_type = event_type
        raise


def _parse_event(data: dict[str, Any]) -> ClientEvent:
    """The typed event of a decoded frame (see `parse_client_event`)."""
    event_id = data.get("event_id")
    if event_id is not None and not isinstance(event_id, str):
        raise ProtocolError("invalid_type", "'event_id' must be a string.", param="event_id")
    check_values(data, _readable_event_id(data))
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
    return parser(EventFields(data, event_id, allowed))
