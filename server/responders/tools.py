"""Function calling between OpenAI Realtime tools and an OpenAI-compatible chat model.

- `ToolCall`: one function call a responder writes (yielded after its text deltas);
- `chat_tools` / `chat_tool_choice`: a session's Realtime `tools` / `tool_choice` in the
  chat-completions shape (`{"type": "function", "function": {...}}`);
- `StreamedToolCalls`: the `delta.tool_calls` pieces of a chat-completions stream, joined by
  their `index` into calls;
- `ToolCallMarkup`: tool calls a model wrote into its content instead (Hermes / Qwen
  `<tool_call>{...}</tool_call>`, `<function_call>`, Llama 3's bare `{"name": ...,
  "parameters": {...}}`), cut out of the text and turned into calls when the named tool was
  offered. Sources: OpenAI's chat-completions and Realtime API references (the `tools`,
  `tool_calls` and `function_call` item shapes); the markup forms are those of the Hermes
  function-calling format and Meta's Llama 3.1 model card ("JSON based tool calling").

Sans-I/O.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

MAX_MARKUP_CHARS = 8192
"""Longest tool-call markup (code points) held back from the voice while it is being written;
longer text is released as it is (then the speech layer keeps markup silent anyway)."""

_OPENERS = ("<tool_call>", "<function_call>")
_CLOSERS = {"<tool_call>": "</tool_call>", "<function_call>": "</function_call>"}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call of a reply.

    Attributes:
        call_id: the call's id (the model's, else `call_` and 24 hex digits).
        name: the function's name.
        arguments: the arguments as a JSON text (an object; "{}" when the model wrote none).
        pieces: the argument text as it was streamed, in order (joins to `arguments`; one
            piece for a call found in markup).
    """

    call_id: str
    name: str
    arguments: str
    pieces: tuple[str, ...] = ()


def new_call_id() -> str:
    """A fresh call id: "call_" and 24 hexadecimal digits."""
    return "call_" + secrets.token_hex(12)


def chat_tools(tools: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Realtime session tools (`{"type": "function", "name", "description", "parameters"}`)
    as chat-completions tools (`{"type": "function", "function": {...}}`); MCP tools and
    anything without a name are left out (this server calls no MCP server)."""
    chat = []
    for tool in tools:
        if tool.get("type", "function") != "function" or not tool.get("name"):
            continue
        function = {"name": tool["name"],
                    "parameters": tool.get("parameters") or {"type": "object",
                                                             "properties": {}}}
        if tool.get("description"):
            function["description"] = tool["description"]
        chat.append({"type": "function", "function": function})
    return chat


def chat_tool_choice(choice: Any) -> Any:
    """A Realtime `tool_choice` ("auto" | "none" | "required" | `{"type": "function",
    "name": N}`) in the chat-completions shape; an MCP choice becomes "auto"."""
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name"):
        return {"type": "function", "function": {"name": choice["name"]}}
    return "auto"


@dataclass
class StreamedToolCalls:
    """Joins a chat-completions stream's `delta.tool_calls` pieces into `ToolCall`s.

    Each piece names its call by `index`; the first piece of a call carries its `id` and
    `function.name`, the others more `function.arguments` text.
    """

    _calls: dict[int, dict[str, Any]] = field(default_factory=dict)

    def feed(self, pieces: Iterable[Any]) -> None:
        """Add one delta's `tool_calls` (the `openai` package's objects or plain dicts)."""
        for piece in pieces:
            index = _get(piece, "index") or 0
            call = self._calls.setdefault(index, {"id": None, "name": "", "pieces": []})
            call["id"] = call["id"] or _get(piece, "id")
            function = _get(piece, "function")
            if function is not None:
                call["name"] += _get(function, "name") or ""
                if arguments := _get(function, "arguments"):
                    call["pieces"].append(arguments)

    def calls(self) -> list[ToolCall]:
        """The calls streamed so far, in index order (those without a name left out)."""
        return [ToolCall(call["id"] or new_call_id(), call["name"],
                         "".join(call["pieces"]) or "{}", tuple(call["pieces"]))
                for _, call in sorted(self._calls.items()) if call["name"]]


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else getattr(value, key, None)


class ToolCallMarkup:
    """Cuts tool calls a model wrote as text out of its streamed content.

    Recognised, for a function among `names` (the offered tools): a `<tool_call>` or
    `<function_call>` span holding a JSON object, and a JSON object at the start of the reply
    or of a line, each with `"name"` and `"arguments"` (or `"parameters"`: an object, or a JSON
    text of one). Text that may still become markup (from `<` or such a `{`) is held back
    until it is decided; anything else passes at once. Markup that names no offered function,
    is not JSON or grows past `MAX_MARKUP_CHARS` is released as text.

    Args:
        names: the names of the offered functions.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)
        self.calls: list[ToolCall] = []
        self._held = ""
        self._line_start = True

    def feed(self, text: str) -> str:
        """Take the next content delta; return the text that is certainly not markup."""
        self._held += text
        out = []
        while self._held:
            start = self._candidate_start(self._held)
            if start is None:
                out.append(self._pass(self._held))
                self._held = ""
                break
            out.append(self._pass(self._held[:start]))
            self._held = self._held[start:]
            end = self._markup_end(self._held)
            if end is None:
                if len(self._held) > MAX_MARKUP_CHARS:
                    out.append(self._pass(self._held))
                    self._held = ""
                break
            if end < 0:  # not markup: release its first character and look again
                out.append(self._pass(self._held[0]))
                self._held = self._held[1:]
                continue
            call = self._call(self._held[:end])
            if call is None:
                out.append(self._pass(self._held[:end]))
            else:
                self.calls.append(call)
            self._held = self._held[end:]
        return "".join(out)

    def flush(self) -> str:
        """The end of the content: return what is still held back (unfinished markup)."""
        held, self._held = self._held, ""
        return self._pass(held)

    def _pass(self, text: str) -> str:
        if text:
            self._line_start = text.rstrip(" \t").endswith("\n")
        return text

    def _candidate_start(self, text: str) -> int | None:
        """Index of the first place where markup may start, None when there is none."""
        line_start = self._line_start
        for index, char in enumerate(text):
            if char == "<":
                return index
            if char == "{" and line_start:
                return index
            if char == "\n":
                line_start = True
            elif char not in " \t":
                line_start = False
        return None

    def _markup_end(self, text: str) -> int | None:
        """End of the markup at the start of `text`: its index, -1 when `text` does not start
        markup, None when it cannot be told yet."""
        if text.startswith("<"):
            opener = next((o for o in _OPENERS if text.startswith(o)), None)
            if opener is None:
                return None if any(o.startswith(text) for o in _OPENERS) else -1
            closer = _CLOSERS[opener]
            at = text.find(closer)
            return None if at < 0 else at + len(closer)
        return _json_object_end(text)

    def _call(self, markup: str) -> ToolCall | None:
        """The call `markup` writes, None when it is no call of an offered function."""
        body = markup
        for opener in _OPENERS:
            if markup.startswith(opener):
                body = markup[len(opener):-len(_CLOSERS[opener])]
        try:
            value = json.loads(body.strip())
        except json.JSONDecodeError:
            return None
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, dict) or value.get("name") not in self.names:
            return None
        arguments = value.get("arguments", value.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                return None
        if not isinstance(arguments, dict):
            return None
        text = json.dumps(arguments, ensure_ascii=False)
        call_id = value.get("id") if isinstance(value.get("id"), str) else new_call_id()
        return ToolCall(call_id, value["name"], text, (text,))


def _json_object_end(text: str) -> int | None:
    """End index of the JSON object `text` starts with (braces balanced outside strings),
    None when it is not closed yet."""
    depth = 0
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    return None
