"""The conversation history as a responder's turns (`ConversationTurn`): what `Session.
build_prompt` sends to the model. Sans-I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from server.realtime.history import HistoryItem
from server.responders.prompt import ConversationTurn
from server.responders.tools import ToolCall


def conversation_turns(items: Iterable[HistoryItem],
                       failed: Callable[[HistoryItem], bool]) -> tuple[ConversationTurn, ...]:
    """The prompt's turns for history `items` (oldest first).

    User and system turns are verbatim; assistant turns carry the heard text, the full text and
    whether they were interrupted (the responder adds the interruption note). An assistant item
    that holds no text at all (a reply that failed or was cancelled before it wrote a word, or
    one that only called functions) is left out: it said nothing, and a note would tell the
    model of an interruption that never cut anything it said; so is the item of a failed
    response of which nothing was heard (`failed(item)`: the responder failed, the listener
    did not interrupt it). A `function_call` item joins the assistant turn right before it
    as one of its `tool_calls` (a turn of its own, with no text, when the turn before is not
    the assistant's); a `function_call_output` item is a "tool" turn.
    """
    turns: list[ConversationTurn] = []
    for item in items:
        if item.kind == "function_call":
            call = ToolCall(item.call_id, item.name, item.text or "{}")
            last = turns[-1] if turns else None
            if last is not None and last.role == "assistant":
                turns[-1] = ConversationTurn(
                    "assistant", last.text, last.full_text, last.interrupted,
                    (*last.tool_calls, call))
            else:
                turns.append(ConversationTurn("assistant", "", tool_calls=(call,)))
        elif item.kind == "function_call_output":
            turns.append(ConversationTurn("tool", item.text, call_id=item.call_id))
        elif item.role in ("user", "system"):
            turns.append(ConversationTurn(role=item.role, text=item.text))
        elif item.text.strip() or (item.full_text.strip() and not failed(item)):
            turns.append(ConversationTurn(role="assistant", text=item.text,
                                          full_text=item.full_text,
                                          interrupted=item.interrupted))
    return tuple(turns)
