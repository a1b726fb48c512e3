"""The client-event parsing parts on their own: `event_fields` (values any field may hold, typed
field access), `session_update` (the `session.update` parser) and `event_parser` (a frame into
a typed event). Pure functions: each is called directly, no session and no socket."""

from __future__ import annotations

import json
from typing import Any

import pytest

from server.listening.server_vad_settings import TurnDetection
from server.realtime import protocol
from server.realtime.event_fields import EventFields, check_values, is_integer
from server.realtime.event_parser import event_id_of, parse_client_event
from server.realtime.session_update import STORED_SESSION_FIELDS, parse_session_update


def refusal(call: Any, *args: Any, **kwargs: Any) -> protocol.ProtocolError:
    """The `ProtocolError` `call(*args, **kwargs)` raises."""
    with pytest.raises(protocol.ProtocolError) as refused:
        call(*args, **kwargs)
    return refused.value


# ------------------------------------------------------------------ event_fields


@pytest.mark.parametrize(("value", "integer"), [(1, True), (0, True), (True, False),
                                                (1.0, False), ("1", False), (None, False)])
def test_a_json_integer_is_an_int_that_is_not_a_bool(value: Any, integer: bool) -> None:
    assert is_integer(value) is integer


@pytest.mark.parametrize(("data", "param"), [
    ({"a": {"b": ["x", "\ud800"]}}, "a.b.1"),
    ({"a": [{"\udfff": 1}]}, "a.0"),
    ({"played_ms": protocol.MAX_EXACT_INTEGER + 1}, "played_ms"),
    ({"x": {"y": -float("inf")}}, "x.y"),
    ({"x": float("nan")}, None),
])
def test_check_values_names_the_path_of_the_refused_value(data: dict[str, Any],
                                                          param: str | None) -> None:
    error = refusal(check_values, data, "evt_1")
    assert (error.code, error.event_id) == ("invalid_value", "evt_1")
    if param is not None:
        assert error.param == param


def test_check_values_refuses_nesting_past_the_limit_and_accepts_it_at_the_limit() -> None:
    def nested(depth: int) -> dict[str, Any]:
        value: dict[str, Any] = {}
        for _ in range(depth - 1):
            value = {"a": value}
        return value

    check_values(nested(protocol.MAX_NESTING), None)
    assert refusal(check_values, nested(protocol.MAX_NESTING + 1), None).code == "invalid_value"


def test_check_values_accepts_the_bounds_and_valid_astral_text() -> None:
    check_values({"n": protocol.MAX_EXACT_INTEGER, "m": -protocol.MAX_EXACT_INTEGER,
                  "s": "emoji \U0001f600", "l": [[], {}]}, None)


def test_event_fields_refuse_an_unknown_parameter_before_any_field_is_read() -> None:
    error = refusal(EventFields, {"type": "x", "event_id": "e", "zzz": 1, "aaa": 2}, "e",
                    {"known"})
    assert (error.code, error.param, error.event_id) == ("unknown_parameter", "aaa", "e")


@pytest.mark.parametrize(("value", "code"), [
    (None, "missing_required_parameter"), (1.0, "invalid_type"), (True, "invalid_type"),
    ("5", "invalid_type"), (-1, "invalid_value"),
])
def test_milliseconds_are_non_negative_json_integers(value: Any, code: str) -> None:
    fields = EventFields({} if value is None else {"played_ms": value}, None, {"played_ms"})
    error = refusal(fields.milliseconds, "played_ms")
    assert (error.code, error.param) == (code, "played_ms")


def test_milliseconds_absent_and_optional_is_zero_and_booleans_default_false() -> None:
    fields = EventFields({"truncate": True}, None, {"played_ms", "truncate", "pause"})
    assert fields.milliseconds("played_ms", required=False) == 0
    assert fields.boolean("truncate") is True
    assert fields.boolean("pause") is False


def test_an_id_field_is_bounded_by_max_id_chars() -> None:
    longest = "i" * protocol.MAX_ID_CHARS
    fields = EventFields({"item_id": longest}, None, {"item_id"})
    assert fields.string("item_id", required=True) == longest
    fields = EventFields({"item_id": longest + "i"}, None, {"item_id"})
    error = refusal(fields.string, "item_id", required=True)
    assert (error.code, error.param) == ("invalid_value", "item_id")


# ------------------------------------------------------------------ session_update


def session_update(session: dict[str, Any]) -> protocol.SessionUpdate:
    return parse_session_update(EventFields({"type": "session.update", "event_id": "e1",
                                             "session": session}, "e1", {"session"}))


def test_session_update_collects_what_the_session_applies_and_stores() -> None:
    update = session_update({
        "type": "realtime", "instructions": "Be brief.", "output_modalities": ["text"],
        "tools": [], "tool_choice": "none", "max_output_tokens": 200,
        "audio": {"input": {"format": {"type": "audio/pcmu"},
                            "turn_detection": {"type": "server_vad", "threshold": 0.6,
                                               "silence_duration_ms": 700},
                            "noise_reduction": None},
                  "output": {"voice": "alloy"}},
    })
    changes = update.changes
    assert update.event_id == "e1"
    assert changes["instructions"] == "Be brief."
    assert changes["output_modalities"] == ("text",)
    assert changes["stored"] == {"tools": [], "tool_choice": "none", "max_output_tokens": 200}
    assert set(changes["stored"]) <= set(STORED_SESSION_FIELDS)
    assert changes["turn_detection"] == TurnDetection(threshold=0.6, silence_duration_ms=700)
    assert changes["voice"] == "alloy" and changes["noise_reduction"] is None
    assert "input_format" in changes and "output_format" not in changes


def test_turn_detection_null_turns_server_vad_off_and_semantic_vad_keeps_its_eagerness() -> None:
    off = session_update({"type": "realtime", "audio": {"input": {"turn_detection": None}}})
    assert off.changes["turn_detection"] is None
    semantic = session_update({"type": "realtime", "audio": {"input": {
        "turn_detection": {"type": "semantic_vad", "eagerness": "high",
                           "interrupt_response": False}}}})
    detection = semantic.changes["turn_detection"]
    assert (detection.type, detection.eagerness, detection.interrupt_response) == (
        "semantic_vad", "high", False)


def test_session_update_names_every_refused_field_in_one_error() -> None:
    error = refusal(session_update, {
        "type": "realtime", "instructions": "i" * (protocol.MAX_INSTRUCTIONS_CHARS + 1),
        "audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 2}}},
        "interruption": {"mode": "shout"},
    })
    assert (error.code, error.param, error.event_id) == (
        "invalid_value", "session.instructions", "e1")
    assert "'session.instructions' holds" in error.message
    assert "threshold must be in (0, 1)." in error.message
    assert "mode must be 'pause' or 'cancel'." in error.message


@pytest.mark.parametrize(("detection", "param"), [
    ({"type": "server_vad", "silence_duration_ms": 5001}, "silence_duration_ms"),
    ({"type": "server_vad", "prefix_padding_ms": 1.5}, "prefix_padding_ms"),
    ({"type": "server_vad", "eagerness": "low"}, "eagerness"),
    ({"type": "semantic_vad", "eagerness": "eager"}, "eagerness"),
    ({"type": "semantic_vad", "create_response": "yes"}, "create_response"),
    ({"type": "loud"}, None),
])
def test_a_bad_turn_detection_field_is_named(detection: dict[str, Any],
                                             param: str | None) -> None:
    error = refusal(session_update, {"type": "realtime",
                                     "audio": {"input": {"turn_detection": detection}}})
    expected = "session.audio.input.turn_detection"
    assert error.param == (f"{expected}.{param}" if param else expected)


# ------------------------------------------------------------------ event_parser


def test_parse_client_event_gives_the_typed_event_of_each_family() -> None:
    frames = {
        protocol.ItemCreate: {"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text",
                                                             "text": "hi"}]}},
        protocol.ResponseCreate: {"type": "response.create"},
        protocol.InputAudioAppend: {"type": "input_audio_buffer.append", "audio": "AAA="},
        protocol.PlaybackAck: {"type": "playback.ack", "response_id": "r", "played_ms": 5},
        protocol.BargeIn: {"type": "barge_in", "pause": True},
        protocol.ItemTruncate: {"type": "conversation.item.truncate", "item_id": "i",
                                "content_index": 0, "audio_end_ms": 10},
    }
    for kind, frame in frames.items():
        event = parse_client_event(json.dumps({**frame, "event_id": "e9"}))
        assert type(event) is kind and event.event_id == "e9"
        assert protocol.EVENT_TYPES[kind] == frame["type"]


def test_a_refused_event_carries_its_readable_type_and_id() -> None:
    error = refusal(parse_client_event, json.dumps(
        {"type": "playback.ack", "event_id": "e2", "played_ms": 5}))
    assert (error.code, error.event_type, error.event_id) == (
        "missing_required_parameter", "playback.ack", "e2")
    error = refusal(parse_client_event, '{"type": "\\ud800", "event_id": "e3"}')
    assert error.event_type is None and error.event_id == "e3"


@pytest.mark.parametrize("frame", [b"{}", "[1]", "{", "x" * (protocol.MAX_FRAME_CHARS + 1),
                                   '{"event_id": "\\udc00"}', '{"event_id": 7}'])
def test_event_id_of_never_raises_and_names_only_a_valid_string_id(frame: str | bytes) -> None:
    assert event_id_of(frame) is None


def test_event_id_of_reads_the_id_of_an_otherwise_bad_event() -> None:
    assert event_id_of('{"type": "nope", "event_id": "e4", "x": 1e999}') == "e4"
