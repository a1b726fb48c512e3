"""Valid client frames for the protocol fuzzer (`tests/protocol_fuzz.py`): hypothesis strategies
over every client event type the server accepts and the values its fields hold.

Values come at every size class and in odd forms (NUL, RTL overrides, emoji, combining marks,
huge texts, the longest accepted names and ids). Ids are often references to the session's own
recent items and responses (`KNOWN_ID`), resolved just before sending, so that ACKs, truncates,
barge-ins and deletes meet real replies.
"""

from __future__ import annotations

import base64
import copy
import json
import operator
import re
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from server.realtime.protocol import MAX_EXACT_INTEGER, MAX_ID_CHARS, MAX_NAME_CHARS

EVENT_ID_SLOT = "@event_id@"
"""Placeholder `event_id` of a named frame; `run_batch` puts a unique id in its place."""

CHECK_PROMPT = "say: hello there"
"""The valid prompt `tests/protocol_fuzz.py` sends after each batch (and an odd text here)."""

Path = tuple[str | int, ...]
"""Where a value sits in an event: the keys and list indexes from the root."""


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


ODD_TEXT = ("", "\x00", "a\x00b", "\u202eevil\u202c", "\u05e9\u05dc\u05d5\u05dd", "😀👍🏽",
            "e\u0301", "\ufeff", "\u2028", "\U0010ffff", "say: \u202ehello\x00 😀", CHECK_PROMPT)


def repeated(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    """A long string cheaply: one short piece repeated (hypothesis would make it slowly).
    Even escaped (12 characters per emoji), a few of them fit in one frame."""
    return st.builds(operator.mul, st.sampled_from(["x", "é", "😀", "\u202e", "ab\x00"]),
                     st.integers(min_size, max_size))


texts = st.one_of(st.text(max_size=40), st.sampled_from(ODD_TEXT), repeated(1000, 10_000))
"""Any valid Unicode text: short, odd (NUL, RTL overrides, emoji, combining marks) or huge."""

names = st.one_of(st.text(max_size=20), st.sampled_from(ODD_TEXT),
                  repeated(MAX_NAME_CHARS, MAX_NAME_CHARS).map(lambda t: t[:MAX_NAME_CHARS]))
"""Names (model, voice, language, metadata values, barge-in source): up to `MAX_NAME_CHARS`."""

spoken_texts = st.one_of(st.text(max_size=60), st.sampled_from(ODD_TEXT),
                         st.just("tell me about tides"))
"""Texts of user items, which replies may read back: kept short so that replies stay short."""

KNOWN_ID = re.compile(r'"@(item|resp)~(\d+)@"')
"""A reference (a JSON string) to the n-th latest item or response the server announced in
the session, e.g. "@item~0@"; `run_batch` puts the real id (or an unknown one) in its place."""

ids = st.one_of(
    st.builds("@{}~{}@".format, st.sampled_from(["item", "resp"]), st.integers(0, 3)),
    st.text(min_size=1, max_size=20),
    repeated(MAX_ID_CHARS, MAX_ID_CHARS).map(lambda text: text[:MAX_ID_CHARS]),
)
"""Ids of the session's recent items and responses (see `KNOWN_ID`), others, and the longest
accepted (`MAX_ID_CHARS`)."""

milliseconds = st.one_of(st.integers(0, 5000), st.integers(0, MAX_EXACT_INTEGER))


def _audio(pcm: bytes) -> str:
    return base64.b64encode(pcm[: len(pcm) // 2 * 2]).decode()


audio = st.one_of(st.binary(min_size=2, max_size=4800),
                  st.integers(1, 2400).map(lambda n: b"\0" * n * 2))
"""Microphone audio: silence or random bytes (loud noise), up to 100 ms at 24 kHz."""


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


def encode(event: dict[str, Any], ascii_only: bool) -> str:
    return json.dumps(event, ensure_ascii=ascii_only)


event_types = st.sampled_from(EVENT_TYPES)


@st.composite
def valid_events(draw: st.DrawFn) -> dict[str, Any]:
    """A valid client event of any type, as a new dict (callers may change it)."""
    chosen = draw(event_types)
    fields = copy.deepcopy(draw(VALID_FIELDS[chosen]))  # st.just values are shared
    return {"type": chosen, "event_id": EVENT_ID_SLOT, **fields}


@st.composite
def valid_frames(draw: st.DrawFn) -> FuzzFrame:
    """A valid event, encoded as ASCII-escaped or as UTF-8 JSON."""
    event = draw(valid_events())
    return FuzzFrame(encode(event, draw(st.booleans())), False, True, f"valid {event['type']}")
