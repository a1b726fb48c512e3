"""The item of `conversation.item.create`, checked field by field: a user or system text
message, or an OpenAI Realtime `function_call` / `function_call_output` item. A client sends a
`function_call_output` with what its tool returned (then `response.create`, and the model goes
on); frameworks that keep their own chat context (LiveKit) also create `function_call` items.
Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

FUNCTION_ITEM_TYPES = frozenset({"function_call", "function_call_output"})
MAX_CALL_ID_CHARS = 64
"""Longest `call_id` / `name` (code points), as every other id a client names here."""

_FIELDS = {
    "function_call": ({"call_id", "name", "arguments"}, {"type", "id", "object", "status"}),
    "function_call_output": ({"call_id", "output"}, {"type", "id", "object", "status"}),
}
"""Per item type: (required fields, other allowed fields); from OpenAI's
`RealtimeConversationItemFunctionCall` / `...FunctionCallOutput`."""


ITEM_STATUSES = frozenset({"completed", "incomplete", "in_progress"})


@dataclass(frozen=True, slots=True)
class FunctionItem:
    """A validated function item.

    Attributes:
        kind: "function_call" or "function_call_output".
        call_id: the call's id.
        name: function_call: the function's name ("" for an output).
        text: function_call: its arguments (a JSON text); output: the output.
    """

    kind: Literal["function_call", "function_call_output"]
    call_id: str
    name: str
    text: str


def parse_function_item(item: dict[str, Any],
                        error: Callable[[str, str, str], Exception]) -> FunctionItem:
    """Check a `function_call` or `function_call_output` item (`item["type"]` is one of
    FUNCTION_ITEM_TYPES).

    Args:
        item: the event's `item` object.
        error: builds the exception to raise from (OpenAI error code, message, param).

    Raises:
        What `error` builds: an unknown field (`unknown_parameter`), a missing one
        (`missing_required_parameter`), a field that is not a string, an empty `call_id` or
        `name`, or one longer than MAX_CALL_ID_CHARS.
    """
    kind = item["type"]
    required, optional = _FIELDS[kind]
    unknown = sorted(set(item) - required - optional)
    if unknown:
        raise error("unknown_parameter", f"Unknown item field '{unknown[0]}'.",
                    f"item.{unknown[0]}")
    for name in sorted(required):
        if name not in item:
            raise error("missing_required_parameter", f"Missing '{name}'.", f"item.{name}")
        if not isinstance(item[name], str):
            raise error("invalid_type", f"item.{name} must be a string.", f"item.{name}")
    for name in ("call_id", "name"):
        value = item.get(name)
        if name in required and not value:
            raise error("invalid_value", f"item.{name} must not be empty.", f"item.{name}")
        if isinstance(value, str) and len(value) > MAX_CALL_ID_CHARS:
            raise error("invalid_value", f"'item.{name}' holds {len(value)} characters; at "
                        f"most {MAX_CALL_ID_CHARS} are accepted.", f"item.{name}")
    text = item["arguments"] if kind == "function_call" else item["output"]
    return FunctionItem(kind, item["call_id"], item.get("name", ""), text)


def message_text(item: dict[str, Any], error: Callable[[str, str, str], Exception]) -> str:
    """The text of a user or system `message` item: its `input_text` parts joined.

    Args:
        item: the event's `item` object.
        error: builds the exception to raise from (OpenAI error code, message, param).

    Raises:
        What `error` builds: another type or role, an unknown field, an `object` other than
        "realtime.item", an unknown `status`, empty or non-list content, a part that is not
        `input_text` (type, text) or whose text is not a string.
    """
    if item.get("type") != "message" or item.get("role") not in ("user", "system"):
        raise error("invalid_value",
                    "Only user and system messages with input_text can be created.", "item.role")
    unknown = set(item) - {"type", "role", "content", "id", "object", "status"}
    if unknown:
        name = sorted(unknown)[0]
        raise error("unknown_parameter", f"Unknown item field '{name}'.", f"item.{name}")
    if item.get("object", "realtime.item") != "realtime.item":
        raise error("invalid_value", "item.object must be 'realtime.item'.", "item.object")
    status = item.get("status", "completed")
    if not isinstance(status, str) or status not in ITEM_STATUSES:
        raise error("invalid_value", "item.status must be one of "
                    f"{', '.join(sorted(ITEM_STATUSES))}.", "item.status")
    content = item.get("content")
    if not isinstance(content, list) or not content:
        raise error("invalid_type", "item.content must be a non-empty list.", "item.content")
    texts = []
    for index, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "input_text" or (
            set(part) - {"type", "text"}
        ):
            raise error("invalid_value", "Only input_text content (type, text) is supported.",
                        f"item.content.{index}")
        text = part.get("text")
        if not isinstance(text, str):
            raise error("invalid_type", "input_text.text must be a string.",
                        f"item.content.{index}.text")
        texts.append(text)
    return "".join(texts)
