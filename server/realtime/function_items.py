"""Function items of `conversation.item.create`: the OpenAI Realtime `function_call` and
`function_call_output` item shapes, checked field by field. A client sends a
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
