"""A protocol fuzzer for `/v1/realtime`: hypothesis strategies over client frames, and the loop
that sends a batch of them to a real server and checks how it answered.

Shared by `tests/test_protocol_fuzz.py` (a deterministic slice in CI) and
`benchmarks/fuzz_protocol.py` (a randomized run of >= 100,000 frames).

A frame is either *valid* (well formed; it may still be refused for the session's state, e.g.
an unknown item id) or *invalid* by construction: a valid event with one certain defect (a field
of the wrong type or value, a required field missing, an unknown field, a value no event accepts
anywhere such as a lone surrogate, NaN, 1e400, 2**53, a 5000-digit integer or nesting deeper
than `MAX_NESTING`, an unknown or missing `type`), or a frame that is no event at all (binary,
malformed JSON, a JSON value that is not an object, nesting of every size class from 1 to a
whole frame, a field name of every size class, an oversized frame); ids come at every size
class too, those past `MAX_ID_CHARS` as defects. Each invalid frame must
be answered by exactly one `error` event; a valid one by at most one, with a state error code.
Ids in frames are often references to the session's own recent items and responses
(`KNOWN_ID`), resolved just before sending, so that ACKs, truncates, barge-ins and deletes meet
real replies.
"""

from __future__ import annotations

import base64
import copy
import json
import operator
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed

from server.realtime.protocol import (
    MAX_EXACT_INTEGER,
    MAX_FRAME_CHARS,
    MAX_ID_CHARS,
    MAX_INSTRUCTIONS_CHARS,
    MAX_NAME_CHARS,
    MAX_NESTING,
)
from tests.realtime_client import RealtimeClient

EVENT_ID_SLOT = "@event_id@"
"""Placeholder `event_id` of a named frame; `run_batch` puts a unique id in its place."""

STATE_ERRORS = {
    "conversation_already_has_active_response", "duplicate_item_id", "history_limit_exceeded",
    "item_not_found", "item_response_mismatch", "input_audio_buffer_commit_empty",
    "input_audio_buffer_full", "response_cancel_not_active", "response_not_found",
}
"""Error codes a valid frame may get: what it names does not exist, or cannot be done now."""

STATE_INVALID_VALUES = {"audio_end_ms"}
"""Params of the `invalid_value` errors a valid frame may get (a truncate beyond the audio)."""

CHECK_PROMPT = "say: hello there"
CHECK_REPLY = "hello there"

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class FuzzFrame:
    """One client frame and what it must get.

    Attributes:
        payload: the frame (text, or bytes for a binary frame); a named frame holds
            `EVENT_ID_SLOT` as its `event_id`.
        invalid: True when it must be answered by exactly one `error` event.
        named: True when its `event_id` is readable, so that its error must name it.
        kind: what it is, for reports (e.g. "valid playback.ack", "wrong item.id").
    """

    payload: str | bytes
    invalid: bool
    named: bool
    kind: str


# ---------------------------------------------------------------------------------- values

ODD_TEXT = ("", "\x00", "a\x00b", "\u202eevil\u202c", "\u05e9\u05dc\u05d5\u05dd", "😀👍🏽",
            "e\u0301", "\ufeff", "\u2028", "\U0010ffff", "say: \u202ehello\x00 😀", CHECK_PROMPT)


def _repeated(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    """A long string cheaply: one short piece repeated (hypothesis would make it slowly).
    Even escaped (12 characters per emoji), a few of them fit in one frame."""
    return st.builds(operator.mul, st.sampled_from(["x", "é", "😀", "\u202e", "ab\x00"]),
                     st.integers(min_size, max_size))


texts = st.one_of(st.text(max_size=40), st.sampled_from(ODD_TEXT), _repeated(1000, 10_000))
"""Any valid Unicode text: short, odd (NUL, RTL overrides, emoji, combining marks) or huge."""

names = st.one_of(st.text(max_size=20), st.sampled_from(ODD_TEXT),
                  _repeated(MAX_NAME_CHARS, MAX_NAME_CHARS).map(lambda t: t[:MAX_NAME_CHARS]))
"""Names (model, voice, language, metadata values, barge-in source): up to `MAX_NAME_CHARS`."""

too_long = st.one_of(_repeated(MAX_INSTRUCTIONS_CHARS + 1, 80_000))
"""A string past every length limit (`MAX_INSTRUCTIONS_CHARS`, the largest): refused."""

spoken_texts = st.one_of(st.text(max_size=60), st.sampled_from(ODD_TEXT),
                         st.just("tell me about tides"))
"""Texts of user items, which replies may read back: kept short so that replies stay short."""

KNOWN_ID = re.compile(r'"@(item|resp)~(\d+)@"')
"""A reference (a JSON string) to the n-th latest item or response the server announced in
the session, e.g. "@item~0@"; `run_batch` puts the real id (or an unknown one) in its place."""

ids = st.one_of(
    st.builds("@{}~{}@".format, st.sampled_from(["item", "resp"]), st.integers(0, 3)),
    st.text(min_size=1, max_size=20),
    _repeated(MAX_ID_CHARS, MAX_ID_CHARS).map(lambda text: text[:MAX_ID_CHARS]),
)
"""Ids of the session's recent items and responses (see `KNOWN_ID`), others, and the longest
accepted (`MAX_ID_CHARS`)."""

huge_ids = st.one_of(_repeated(MAX_ID_CHARS + 1, 1000), _repeated(1000, 10_000),
                     _repeated(10_000, 80_000))
"""Ids past `MAX_ID_CHARS`, at every size class up to most of a frame (80,000 emoji escaped
as ASCII take 960,000 characters): refused."""

milliseconds = st.one_of(st.integers(0, 5000), st.integers(0, MAX_EXACT_INTEGER))

_anything = st.one_of(
    st.text(max_size=8), st.integers(-(10**6), 10**6), st.booleans(),
    st.floats(-1e6, 1e6), st.sampled_from([0.0, -0.0, 1.0, 24000.0, 0.5]),
    st.lists(st.integers(0, 9), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=2),
)
"""Plain JSON values of every type (None excluded: absent and null mean the same)."""


def _refusing(accepts: Callable[[Any], bool]) -> st.SearchStrategy[Any]:
    return _anything.filter(lambda value: not accepts(value))


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


WRONG_ID = st.one_of(_refusing(lambda v: isinstance(v, str) and v != ""), huge_ids)
WRONG_TEXT = _refusing(lambda v: isinstance(v, str))
WRONG_MS = _refusing(lambda v: _is_int(v) and v >= 0)
WRONG_BOOL = _refusing(lambda v: isinstance(v, bool))
WRONG_OBJECT = _refusing(lambda v: isinstance(v, dict))


def _not(expected: Any) -> st.SearchStrategy[Any]:
    return _refusing(lambda v: v == expected and type(v) is type(expected))


MODALITIES = _refusing(lambda v: isinstance(v, list) and set(v) <= {"text", "audio"}
                      and all(isinstance(m, str) for m in v))
"""Values OpenAI refuses as `output_modalities` (a list of "text" and "audio")."""


def _audio(pcm: bytes) -> str:
    return base64.b64encode(pcm[: len(pcm) // 2 * 2]).decode()


audio = st.one_of(st.binary(min_size=2, max_size=4800),
                  st.integers(1, 2400).map(lambda n: b"\0" * n * 2))
"""Microphone audio: silence or random bytes (loud noise), up to 100 ms at 24 kHz."""


# ---------------------------------------------------------------------------------- valid events


def _some(**optional: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A dict holding any subset of the optional fields."""
    return st.fixed_dictionaries({}, optional=optional)


def _merged(*parts: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """One dict with the fields of every part."""
    return st.tuples(*parts).map(lambda drawn: {k: v for part in drawn for k, v in part.items()})


pcm_formats = _some(type=st.just("audio/pcm"), rate=st.just(24000))
turn_detections = st.one_of(st.none(), st.fixed_dictionaries(
    {"type": st.just("server_vad")},
    optional={"threshold": st.floats(0.01, 0.99), "prefix_padding_ms": st.integers(0, 2000),
              "silence_duration_ms": st.integers(0, 5000), "create_response": st.booleans(),
              "interrupt_response": st.booleans(),
              "idle_timeout_ms": st.one_of(st.none(), st.integers(5000, 30000))}),
    st.fixed_dictionaries(
        {"type": st.just("semantic_vad")},
        optional={"eagerness": st.sampled_from(["low", "medium", "high", "auto"]),
                  "create_response": st.booleans(), "interrupt_response": st.booleans()}))
modalities = st.sampled_from([["audio"], ["text"]])
sessions = _some(
    type=st.just("realtime"), instructions=texts, output_modalities=modalities,
    model=names, tools=st.just([]), tool_choice=st.sampled_from(["auto", "none", "required"]),
    tracing=st.sampled_from([None, "auto", {"workflow_name": "w"}]),
    max_output_tokens=st.one_of(st.just("inf"), st.integers(1, 4096)),
    truncation=st.sampled_from(["auto", "disabled"]),
    audio=_some(
        input=_some(format=pcm_formats, turn_detection=turn_detections,
                    noise_reduction=st.sampled_from([None, {"type": "near_field"}]),
                    transcription=st.one_of(st.none(), _some(model=names, language=names))),
        output=_some(format=pcm_formats, speed=st.sampled_from([1.0, 1, 0.25, 1.5]),
                     voice=st.sampled_from(["alloy", "marin", "joe", {"id": "voice_1"}]))),
)
user_items = st.fixed_dictionaries(
    {"type": st.just("message"), "role": st.just("user"),
     "content": st.lists(st.fixed_dictionaries({"type": st.just("input_text"),
                                                "text": spoken_texts}), min_size=1, max_size=3)},
    optional={"id": ids, "object": st.just("realtime.item"),
              "status": st.sampled_from(["completed", "incomplete", "in_progress"])})

VALID_FIELDS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "session.update": st.fixed_dictionaries({"session": sessions}),
    "conversation.item.create": st.fixed_dictionaries({"item": user_items},
                                                      optional={"previous_item_id": ids}),
    "conversation.item.retrieve": st.fixed_dictionaries({"item_id": ids}),
    "conversation.item.delete": st.fixed_dictionaries({"item_id": ids}),
    "conversation.item.truncate": st.fixed_dictionaries(
        {"item_id": ids, "audio_end_ms": milliseconds}, optional={"content_index": st.just(0)}),
    "response.create": _some(response=_some(
        instructions=texts, output_modalities=modalities,
        metadata=st.dictionaries(st.text(max_size=8), names, max_size=3))),
    "response.cancel": _some(response_id=ids),
    "input_audio_buffer.append": st.fixed_dictionaries({"audio": audio.map(_audio)}),
    "input_audio_buffer.commit": st.just({}),
    "input_audio_buffer.clear": st.just({}),
    "output_audio_buffer.clear": _some(response_id=ids),
    "playback.ack": _merged(
        st.one_of(st.fixed_dictionaries({"response_id": ids}, optional={"item_id": ids}),
                  st.fixed_dictionaries({"item_id": ids})),
        st.fixed_dictionaries({"played_ms": milliseconds},
                              optional={"truncate": st.booleans(), "committed_ms": milliseconds}),
    ),
    "barge_in": _some(response_id=ids, item_id=ids, audio_end_ms=milliseconds, source=names),
}
"""Every client event type the server accepts -> its valid fields (`type`, `event_id` apart)."""

EVENT_TYPES = tuple(VALID_FIELDS)


# ---------------------------------------------------------------------------------- defects

_TD = ("session", "audio", "input", "turn_detection")
WRONG_FIELDS: dict[str, list[tuple[Path, st.SearchStrategy[Any]]]] = {
    "session.update": [
        (("session",), WRONG_OBJECT), (("session", "instructions"), WRONG_TEXT),
        (("session", "instructions"), too_long), (("session", "model"), too_long),
        (("session", "audio", "output", "voice"), too_long),
        (("session", "type"), _not("realtime")),
        (("session", "output_modalities"), MODALITIES),
        (("session", "model"), WRONG_TEXT), (("session", "audio"), WRONG_OBJECT),
        (("session", "audio", "input"), WRONG_OBJECT),
        (("session", "audio", "output"), WRONG_OBJECT),
        (("session", "audio", "output", "voice"), WRONG_TEXT),
        (("session", "audio", "output", "speed"),
         _refusing(lambda v: _is_number(v) and 0.25 <= v <= 1.5)),
        (("session", "audio", "input", "format"), WRONG_OBJECT),
        (("session", "audio", "output", "format", "type"), _not("audio/pcm")),
        (("session", "audio", "input", "format", "rate"),
         _refusing(lambda v: _is_int(v) and v == 24000)),
        (_TD, WRONG_OBJECT),
        ((*_TD, "type"), _refusing(lambda v: v in ("server_vad", "semantic_vad"))),
        ((*_TD, "threshold"), _refusing(lambda v: _is_number(v) and 0 < v < 1)),
        ((*_TD, "prefix_padding_ms"), _refusing(lambda v: _is_int(v) and 0 <= v <= 2000)),
        ((*_TD, "silence_duration_ms"), _refusing(lambda v: _is_int(v) and 0 <= v <= 5000)),
        ((*_TD, "create_response"), WRONG_BOOL), ((*_TD, "interrupt_response"), WRONG_BOOL),
        ((*_TD, "idle_timeout_ms"),
         _refusing(lambda v: v is None or (_is_int(v) and 5000 <= v <= 30000))),
        ((*_TD, "eagerness"), _refusing(lambda v: v in ("low", "medium", "high", "auto"))),
        (("session", "audio", "input", "transcription"), WRONG_OBJECT),
        (("session", "audio", "input", "transcription", "model"), WRONG_TEXT),
    ],
    "conversation.item.create": [
        (("item",), WRONG_OBJECT), (("item", "type"), _not("message")),
        (("item", "role"), _refusing(lambda v: v in ("user", "system"))),
        (("item", "content"), _refusing(lambda v: isinstance(v, list) and v != [])),
        (("item", "content", 0), WRONG_OBJECT),
        (("item", "content", 0, "type"), _not("input_text")),
        (("item", "content", 0, "text"), WRONG_TEXT), (("item", "id"), WRONG_ID),
        (("item", "object"), _not("realtime.item")),
        (("item", "status"), _refusing(lambda v: v in ("completed", "incomplete", "in_progress"))),
        (("previous_item_id",), WRONG_ID),
    ],
    "conversation.item.retrieve": [(("item_id",), WRONG_ID)],
    "conversation.item.delete": [(("item_id",), WRONG_ID)],
    "conversation.item.truncate": [
        (("item_id",), WRONG_ID), (("content_index",), _refusing(lambda v: _is_int(v) and v == 0)),
        (("audio_end_ms",), WRONG_MS),
    ],
    "response.create": [
        (("response",), WRONG_OBJECT), (("response", "instructions"), WRONG_TEXT),
        (("response", "instructions"), too_long), (("response", "metadata", "key"), too_long),
        (("response", "output_modalities"), MODALITIES),
        (("response", "metadata"), WRONG_OBJECT), (("response", "metadata", "key"), WRONG_TEXT),
    ],
    "response.cancel": [(("response_id",), WRONG_ID)],
    "input_audio_buffer.append": [
        # neither "AAAA" (3 bytes) nor huge ids (long runs of a letter are base64 too): an odd
        # byte count is wrong in PCM16 only, and a batch may have set the input format to
        # G.711 (one byte a sample); tests/test_append_sizes.py has the PCM16 case
        (("audio",), st.one_of(WRONG_TEXT, st.sampled_from(["@@@", "AAA", "A", "é="]))),
    ],
    "input_audio_buffer.commit": [],
    "input_audio_buffer.clear": [],
    "output_audio_buffer.clear": [(("response_id",), WRONG_ID)],
    "playback.ack": [
        (("response_id",), WRONG_ID), (("item_id",), WRONG_ID), (("played_ms",), WRONG_MS),
        (("committed_ms",), WRONG_MS), (("truncate",), WRONG_BOOL),
    ],
    "barge_in": [
        (("response_id",), WRONG_ID), (("item_id",), WRONG_ID), (("audio_end_ms",), WRONG_MS),
        (("source",), WRONG_TEXT), (("source",), too_long),
    ],
}
"""Per event type: a field and values it refuses, whatever the rest of the event holds."""

MISSING_FIELDS: dict[str, list[tuple[Path, ...]]] = {
    "session.update": [(("session",),)],
    "conversation.item.create": [(("item",),), (("item", "type"),), (("item", "role"),),
                                 (("item", "content"),), (("item", "content", 0, "type"),),
                                 (("item", "content", 0, "text"),)],
    "conversation.item.retrieve": [(("item_id",),)],
    "conversation.item.delete": [(("item_id",),)],
    "conversation.item.truncate": [(("item_id",),), (("audio_end_ms",),)],
    "input_audio_buffer.append": [(("audio",),)],
    "playback.ack": [(("played_ms",),), (("response_id",), ("item_id",))],
}
"""Per event type: sets of fields whose absence is an error."""

STRICT_OBJECTS: dict[str, list[Path]] = {
    "session.update": [("session",), ("session", "audio"), ("session", "audio", "input"),
                       ("session", "audio", "output"), ("session", "audio", "input", "format"),
                       ("session", "audio", "output", "format"), _TD,
                       ("session", "audio", "input", "transcription")],
    "conversation.item.create": [("item",), ("item", "content", 0)],
    "response.create": [("response",)],
}
"""Per event type: objects (besides the event itself) that refuse unknown fields."""


def _set(tree: dict[str, Any], path: Path, value: Any) -> None:
    """Put `value` at `path`, creating (or replacing non-container) objects on the way."""
    node: Any = tree
    for key in path[:-1]:
        child = node[key] if isinstance(node, list) else node.get(key)
        if not isinstance(child, dict | list):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


def _delete(tree: dict[str, Any], path: Path) -> None:
    """Remove the field at `path` if it is there."""
    node: Any = tree
    for key in path[:-1]:
        node = node[key] if isinstance(node, list) else node.get(key)
        if not isinstance(node, dict | list):
            return
    if isinstance(node, dict):
        node.pop(path[-1], None)


def _locations(tree: Any, path: Path = ()) -> list[Path]:
    """Paths of every value in `tree` (the root excluded)."""
    found: list[Path] = []
    children = tree.items() if isinstance(tree, dict) else (
        enumerate(tree) if isinstance(tree, list) else ())
    for key, child in children:
        found.append((*path, key))
        found.extend(_locations(child, (*path, key)))
    return found


def _get(tree: Any, path: Path) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _objects(tree: dict[str, Any]) -> list[Path]:
    """Paths of every object in `tree`, the root included."""
    return [path for path in [(), *_locations(tree)] if isinstance(_get(tree, path), dict)]


def _encode(event: dict[str, Any], ascii_only: bool) -> str:
    return json.dumps(event, ensure_ascii=ascii_only)


POISON = "@poison@"
"""Placeholder string replaced by a raw JSON literal (`readable_poisons`,
`unreadable_poisons`) in the encoded frame: as a value, or as a field name."""


def _surrogate_literal(prefix: str, code_point: int, suffix: str) -> str:
    return json.dumps(prefix + chr(code_point) + suffix)


surrogates = st.one_of(
    st.builds(_surrogate_literal, st.text(max_size=5), st.integers(0xD800, 0xDFFF),
              st.text(max_size=5)),
    st.just('"\\ude00\\ud83d"'), st.just('"\\ud83d"'), st.just('"\\udc00\\udc00"'),
)
"""JSON string literals holding a lone surrogate (a valid pair would be one code point)."""

readable_poisons = st.one_of(
    surrogates,
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1E999", "1e16", "9.1e15",
                     str(MAX_EXACT_INTEGER + 1), str(-MAX_EXACT_INTEGER - 1), str(2**64)]),
    st.integers(17, 4290).map(lambda n: "1" + "0" * n),
    st.integers(MAX_NESTING, 300).map(lambda n: "[" * n + "]" * n),
    st.integers(MAX_NESTING, 300).map(lambda n: '{"a":' * n + "0" + "}" * n),
    surrogates.map(lambda key: "{" + key + ": 1}"),
)
"""Values no field accepts, that still decode: the error names the event."""

unreadable_poisons = st.one_of(
    st.integers(4301, 20_000).map(lambda n: "9" * n),
    st.integers(3000, 100_000).map(lambda n: "[" * n + "]" * n),
)
"""Values past Python's own limits (int digits, recursion): the frame cannot be decoded."""


_event_types = st.sampled_from(EVENT_TYPES)


@st.composite
def valid_events(draw: st.DrawFn) -> dict[str, Any]:
    """A valid client event of any type, as a new dict (callers may change it)."""
    chosen = draw(_event_types)
    fields = copy.deepcopy(draw(VALID_FIELDS[chosen]))  # st.just values are shared
    return {"type": chosen, "event_id": EVENT_ID_SLOT, **fields}


@st.composite
def valid_frames(draw: st.DrawFn) -> FuzzFrame:
    """A valid event, encoded as ASCII-escaped or as UTF-8 JSON."""
    event = draw(valid_events())
    return FuzzFrame(_encode(event, draw(st.booleans())), False, True, f"valid {event['type']}")


def _dotted(path: Path) -> str:
    return ".".join(map(str, path))


def _index(draw: st.DrawFn, options: list[Any]) -> Any:
    """One of `options` (an index is drawn: a new `sampled_from` per draw is slow)."""
    return options[draw(st.integers(0, len(options) - 1))]


def _wrong_field(draw: st.DrawFn, event: dict[str, Any]) -> str:
    path, wrong = draw(_WRONG_CHOICES[event["type"]])
    _set(event, path, draw(wrong))
    return "wrong " + _dotted(path)


def _missing_field(draw: st.DrawFn, event: dict[str, Any]) -> str:
    paths = draw(_MISSING_CHOICES[event["type"]])
    for path in paths:
        _delete(event, path)
    return "missing " + " and ".join(map(_dotted, paths))


def _unknown_field(draw: st.DrawFn, event: dict[str, Any]) -> str:
    path = draw(_STRICT_CHOICES[event["type"]])
    _set(event, (*path, "zz_" + draw(st.text(max_size=8))), draw(_anything))
    return "unknown field in " + (_dotted(path) or "the event")


def _bad_type(draw: st.DrawFn, event: dict[str, Any]) -> str:
    bad = draw(_bad_types)
    if bad is None:
        del event["type"]
        return "missing type"
    event["type"] = bad
    return "unknown type" if isinstance(bad, str) else "wrong type"


_WRONG_CHOICES = {name: st.sampled_from([(("event_id",), WRONG_TEXT), *fields])
                  for name, fields in WRONG_FIELDS.items()}
_MISSING_CHOICES = {name: st.sampled_from(paths) for name, paths in MISSING_FIELDS.items()}
_STRICT_CHOICES = {name: st.sampled_from([(), *STRICT_OBJECTS.get(name, [])])
                   for name in EVENT_TYPES}
_bad_types = st.one_of(st.none(), st.text(max_size=30).filter(lambda t: t not in VALID_FIELDS),
                       WRONG_TEXT)
_DEFECTS = {name: st.sampled_from([_wrong_field, _unknown_field, _bad_type, "poison"]
                                  + ([_missing_field] if name in MISSING_FIELDS else []))
            for name in EVENT_TYPES}


@st.composite
def defective_frames(draw: st.DrawFn) -> FuzzFrame:
    """A valid event with exactly one certain defect (see the module docstring)."""
    event = draw(valid_events())
    defect = draw(_DEFECTS[event["type"]])
    literal = None
    if defect != "poison":
        kind = defect(draw, event)
    else:
        readable = draw(st.integers(0, 9)) > 0
        literal = draw(readable_poisons if readable else unreadable_poisons)
        if literal.startswith('"') and draw(st.booleans()):
            path = (*_index(draw, _objects(event)), POISON)
            _set(event, path, 0)  # the literal is a field name
        else:
            path = _index(draw, _locations(event) + [(*obj, "zz_poison")
                                                     for obj in _objects(event)])
            _set(event, path, POISON)
        kind = ("poison " if readable else "poison past Python's limits ") + _dotted(path)
    text = _encode(event, draw(st.booleans()))
    if literal is not None:
        text = text.replace(json.dumps(POISON), literal, 1)
    named = event.get("event_id") == EVENT_ID_SLOT and (literal is None or readable)
    return FuzzFrame(text, True, named, kind)


_non_event_kinds = st.sampled_from(  # one time in 100 a frame of 1 MB
    ["binary", "malformed", "not an object", "deep", "long key"] * 20 + ["oversized"])


def _nesting_depth(size_class: int, fraction: float) -> int:
    """A depth in size class 10**k .. 10**(k+1) (k = 0..5: 1 to a whole frame's worth)."""
    return max(1, int(10 ** (size_class + fraction)))


_depths = st.builds(_nesting_depth, st.integers(0, 5), st.floats(0, 1))
_deep_shapes = st.sampled_from([
    lambda n: "[" * n + "]" * n,  # arrays, closed
    lambda n: '{"a":' * n + "0" + "}" * n,  # objects, closed
    lambda n: "[" * n,  # never closed: malformed at every depth
    lambda n: '{"a":[' * (n // 2 + 1),
])


@st.composite
def deep_frames(draw: st.DrawFn) -> str:
    """An event of a real `type` (an ACK's, which metrics looks at) holding nesting of any
    size class, from 1 to past the recursion limit (issue 26: 2 kB of it killed a session
    in a second parse): an unknown field, or the whole frame. No `event_id`: whether the
    frame decodes depends on the recursion limit."""
    value = draw(_deep_shapes)(draw(_depths))[:MAX_FRAME_CHARS - 100]
    if draw(st.booleans()):
        return value
    return f'{{"type": "{draw(_event_types)}", "zz_deep": {value}}}'


@st.composite
def long_key_frames(draw: st.DrawFn) -> str:
    """An event with an unknown field whose name is long, at every size class."""
    key = draw(st.one_of(_repeated(100, 1000), _repeated(1000, 10_000),
                         _repeated(10_000, 80_000)))  # escaped, within a frame
    return json.dumps({"type": draw(_event_types), key: 1}, ensure_ascii=False)
_binary_frames = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]),
    valid_events().map(lambda event: _encode(event, False).encode()),
)
_bad_json_tails = st.sampled_from([" x", ",", "}", "\x00"])
_not_json = st.sampled_from(["'type'", "{'type': 'x'}", "{type: 1}", "\ufeff{}", ""])
_not_objects = st.one_of(_anything.filter(lambda v: not isinstance(v, dict)), st.none())


@st.composite
def non_events(draw: st.DrawFn) -> FuzzFrame:
    """A frame that is no JSON object: binary, malformed, another JSON value, oversized."""
    kind = draw(_non_event_kinds)
    if kind == "binary":
        payload: str | bytes = draw(_binary_frames)
    elif kind == "malformed":
        whole = _encode(draw(valid_events()), draw(st.booleans()))
        cut = draw(st.integers(0, 2))
        payload = (whole[:draw(st.integers(0, len(whole) - 1))] if cut == 0
                   else whole + draw(_bad_json_tails) if cut == 1 else draw(_not_json))
    elif kind == "not an object":
        payload = json.dumps(draw(_not_objects))
    elif kind == "deep":
        payload = draw(deep_frames())
    elif kind == "long key":
        payload = draw(long_key_frames())
    else:
        payload = '{"type": "response.create", "pad": "' + "x" * (
            MAX_FRAME_CHARS + draw(st.integers(1, 1000))) + '"}'
    return FuzzFrame(payload, True, False, kind)


def _prompt_frames(text: str = CHECK_PROMPT) -> list[FuzzFrame]:
    item = {"type": "conversation.item.create", "event_id": EVENT_ID_SLOT, "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}
    create = {"type": "response.create", "event_id": EVENT_ID_SLOT}
    return [FuzzFrame(json.dumps(item), False, True, "valid prompt"),
            FuzzFrame(json.dumps(create), False, True, "valid response.create")]


client_frames = st.one_of(valid_frames(), defective_frames(), non_events())
"""Any single client frame: valid, defective or no event at all."""


def frame_batches(min_frames: int = 1, max_frames: int = 15) -> st.SearchStrategy[
        list[FuzzFrame]]:
    """A list of `min_frames` to `max_frames` frames and valid prompts (a user item
    "say: hello there" then `response.create`, two frames), interleaved."""
    steps = st.one_of(client_frames.map(lambda frame: [frame]), st.just(_prompt_frames()))
    return st.lists(steps, min_size=min_frames, max_size=max_frames).map(
        lambda groups: [frame for group in groups for frame in group])


# ---------------------------------------------------------------------------------- the driver


@dataclass(slots=True)
class BatchOutcome:
    """How the server answered one batch.

    Attributes:
        unanswered: kinds of invalid frames not answered by an `error` event.
        refused_valid: "kind: code param" of valid frames refused for their form.
        duplicated: kinds of frames answered by more than one `error` event.
        server_errors: messages of `server_error` events (a failure on the server's side).
        closed: "code reason" when the server closed the connection, else None.
        prompt_failure: what went wrong with the valid prompt after the batch, else None.
    """

    unanswered: list[str] = field(default_factory=list)
    refused_valid: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    closed: str | None = None
    prompt_failure: str | None = None

    @property
    def clean(self) -> bool:
        """True when every check held."""
        return not (self.unanswered or self.refused_valid or self.duplicated
                    or self.server_errors or self.closed or self.prompt_failure)


async def run_batch(client: RealtimeClient, frames: list[FuzzFrame], label: str,
                    timeout: float = 30.0) -> BatchOutcome:
    """Send `frames` (named ones get the ids `{label}.{index}`), then check the answers and that
    a valid prompt still gets a whole reply.

    The server applies frames in order, so once the `error` of a probe frame (an unknown
    `type`) arrives every frame sent before it has been answered. A probe comes last, and
    before each frame that names a `KNOWN_ID`, which is then resolved. Errors are matched to
    named frames by `event_id`; the errors without one must be exactly as many as the invalid
    frames without a readable id.

    Raises:
        TimeoutError: the probe's error or the prompt's reply did not come within `timeout` s.
    """
    outcome = BatchOutcome()
    start = len(client.events)
    named: dict[str, FuzzFrame] = {}
    probes: set[str] = set()

    async def settle() -> None:
        """Wait until the server answered every frame sent so far."""
        probe = f"{label}.probe{len(probes)}"
        probes.add(probe)
        await client.send({"type": "fuzz.probe", "event_id": probe})
        await client.wait_for("error", lambda e: e["error"]["event_id"] == probe, timeout)

    try:
        for index, frame in enumerate(frames):
            payload = frame.payload
            if frame.named and isinstance(payload, str):
                event_id = f"{label}.{index}"
                named[event_id] = frame
                payload = payload.replace(json.dumps(EVENT_ID_SLOT), json.dumps(event_id), 1)
            if isinstance(payload, str) and KNOWN_ID.search(payload):
                await settle()
                payload = _resolve_known_ids(client, payload)
            await client.send_raw(payload)
        await settle()
        errors = Counter[str | None]()
        codes: dict[str, str] = {}
        for event in client.events[start:]:
            if event["type"] == "error" and event["error"]["event_id"] not in probes:
                error = event["error"]
                if error["type"] == "server_error":
                    outcome.server_errors.append(f"{error['code']}: {error['message']}")
                    continue
                errors[error["event_id"]] += 1
                codes[error["event_id"]] = f"{error['code']} {error['param']}"
        for event_id, frame in named.items():
            if errors[event_id] > 1:
                outcome.duplicated.append(frame.kind)
            if frame.invalid and not errors[event_id]:
                outcome.unanswered.append(frame.kind)
            if not frame.invalid and errors[event_id]:
                code, param = codes[event_id].split(" ", 1)
                if code not in STATE_ERRORS and not (
                        code == "invalid_value" and param in STATE_INVALID_VALUES):
                    outcome.refused_valid.append(f"{frame.kind}: {codes[event_id]}")
        anonymous = [f.kind for f in frames if f.invalid and not f.named]
        if errors[None] < len(anonymous):
            outcome.unanswered.append(f"{len(anonymous) - errors[None]} of {anonymous}")
        elif errors[None] > len(anonymous):
            outcome.duplicated.append(f"{errors[None] - len(anonymous)} anonymous errors")
        outcome.prompt_failure = await check_prompt(client, label, timeout)
    except ConnectionClosed as closed:
        outcome.closed = f"{closed.rcvd.code if closed.rcvd else 1006} " + (
            closed.rcvd.reason if closed.rcvd else "no close frame")
    return outcome


def _resolve_known_ids(client: RealtimeClient, payload: str) -> str:
    """Replace each `KNOWN_ID` reference in `payload` by the id it names (an unknown id when
    the session has fewer items or responses)."""
    known = {"item": [e["item"]["id"] for e in client.of_type("conversation.item.added")],
             "resp": [e["response"]["id"] for e in client.of_type("response.created")]}

    def real_id(match: re.Match[str]) -> str:
        kind, back = match.group(1), int(match.group(2))
        announced = known[kind]
        return json.dumps(announced[-1 - back] if back < len(announced) else f"{kind}_unknown")

    return KNOWN_ID.sub(real_id, payload)


async def check_prompt(client: RealtimeClient, label: str, timeout: float = 30.0) -> str | None:
    """Turn server VAD off and audio output on (a batch may have asked for text only), cancel
    any reply, then send `CHECK_PROMPT` and `response.create`;
    return None when the new reply completes, its audio and transcript reading back
    `CHECK_REPLY`, else what went wrong.

    Raises:
        TimeoutError: the reply did not complete within `timeout` s.
        ConnectionClosed: the server closed the connection.
    """
    await client.send({"type": "session.update", "event_id": f"{label}.vad-off",
                       "session": {"audio": {"input": {"turn_detection": None}},
                                   "output_modalities": ["audio"]}})
    await client.send({"type": "response.cancel", "event_id": f"{label}.cancel"})
    await client.send({"type": "fuzz.probe", "event_id": f"{label}.settled"})
    await client.wait_for("error", lambda e: e["error"]["event_id"] == f"{label}.settled",
                          timeout)
    known = {e["response"]["id"] for e in client.of_type("response.created")}
    for frame in _prompt_frames():
        assert isinstance(frame.payload, str)
        await client.send(json.loads(frame.payload) | {"event_id": f"{label}.{frame.kind}"})
    created = await client.wait_for("response.created",
                                    lambda e: e["response"]["id"] not in known, timeout)
    response_id = created["response"]["id"]
    done = await client.wait_for("response.done", lambda e: e["response"]["id"] == response_id,
                                 timeout)
    spoken = client.of_type("response.output_audio_transcript.done", response_id=response_id)
    transcript = spoken[0]["transcript"] if spoken else None
    if done["response"]["status"] != "completed" or transcript != CHECK_REPLY or not (
            client.audio_bytes(response_id)):
        return f"reply {done['response']['status']} with transcript {transcript!r}"
    return None
