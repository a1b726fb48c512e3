"""Invalid client frames for the protocol fuzzer (`tests/protocol_fuzz.py`): hypothesis
strategies over frames that must be answered by exactly one `error` event.

A valid event with one certain defect (a field of the wrong type or value, a required field
missing, an unknown field, a value no event accepts anywhere such as a lone surrogate, NaN,
1e400, 2**53, a 5000-digit integer or nesting deeper than `MAX_NESTING`, an unknown or missing
`type`), or a frame that is no event at all (binary, malformed JSON, a JSON value that is not an
object, nesting of every size class, a field name of every size class, an oversized frame).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from server.realtime.protocol import (
    MAX_EXACT_INTEGER,
    MAX_FRAME_CHARS,
    MAX_ID_CHARS,
    MAX_INSTRUCTIONS_CHARS,
    MAX_NESTING,
)
from tests.fuzz_frames import (
    EVENT_ID_SLOT,
    EVENT_TYPES,
    VALID_FIELDS,
    FuzzFrame,
    Path,
    encode,
    event_types,
    repeated,
    valid_events,
)

too_long = st.one_of(repeated(MAX_INSTRUCTIONS_CHARS + 1, 80_000))
"""A string past every length limit (`MAX_INSTRUCTIONS_CHARS`, the largest): refused."""

huge_ids = st.one_of(repeated(MAX_ID_CHARS + 1, 1000), repeated(1000, 10_000),
                     repeated(10_000, 80_000))
"""Ids past `MAX_ID_CHARS`, at every size class up to most of a frame (80,000 emoji escaped
as ASCII take 960,000 characters): refused."""

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
    text = encode(event, draw(st.booleans()))
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
    return f'{{"type": "{draw(event_types)}", "zz_deep": {value}}}'


@st.composite
def long_key_frames(draw: st.DrawFn) -> str:
    """An event with an unknown field whose name is long, at every size class."""
    key = draw(st.one_of(repeated(100, 1000), repeated(1000, 10_000),
                         repeated(10_000, 80_000)))  # escaped, within a frame
    return json.dumps({"type": draw(event_types), key: 1}, ensure_ascii=False)


_binary_frames = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]),
    valid_events().map(lambda event: encode(event, False).encode()),
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
        whole = encode(draw(valid_events()), draw(st.booleans()))
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
