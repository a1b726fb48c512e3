"""What every responder receives and implements: the prompt built from history as heard.

`Prompt.as_messages()` is the OpenAI chat-completions message list a real LLM would receive;
`Responder` is the protocol the demo responder (and any model-backed one) implements.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from server.responders.tools import ToolCall

DEFAULT_INTERRUPTION_NOTE = 'Note: the user interrupted you; they heard only: "{heard}"'
DEFAULT_UNHEARD_NOTE = "Note: the user interrupted you; they heard nothing of it."


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One turn of the conversation history.

    Attributes:
        role: "user", "assistant" or "system" (a system item of the conversation: instructions
            given where it stands, sent to the model as a system message there), or "tool"
            (a function call's output).
        text: user: the prompt verbatim; assistant: the heard text as stored in history (an exact
            prefix of `full_text`, trailing whitespace stripped; "" when nothing was heard);
            tool: the function's output.
        full_text: assistant: the whole generated reply ("" means the same as `text`).
        interrupted: assistant: the listener did not hear all of the reply.
        tool_calls: assistant: the function calls the reply made (after its text).
        call_id: tool: the call whose output this is.
    """

    role: Literal["user", "assistant", "system", "tool"]
    text: str
    full_text: str = ""
    interrupted: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class Prompt:
    """Everything a responder sees for one reply.

    Attributes:
        instructions: the system prompt ("" for none).
        turns: the history, oldest first, ending with the user turn to answer.
        interruption_note: note placed after an interrupted assistant turn whose heard text is
            not empty; every "{heard}" in it is replaced by that heard text (no other braces are
            interpreted).
        unheard_note: note placed after an interrupted assistant turn of which nothing was heard.
        max_output_tokens: most tokens the client allows the reply (the session's OpenAI
            `max_output_tokens`, 1-4096), None for no bound of its own ("inf"); a responder
            that counts tokens keeps below it.
        tools: the functions the model may call, in the chat-completions shape
            (`server.responders.tools.chat_tools`); empty: none offered.
        tool_choice: the chat-completions `tool_choice` ("auto", "none", "required" or a
            named function).
    """

    instructions: str
    turns: tuple[ConversationTurn, ...]
    interruption_note: str = DEFAULT_INTERRUPTION_NOTE
    unheard_note: str = DEFAULT_UNHEARD_NOTE
    max_output_tokens: int | None = None
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: str | dict[str, Any] = "auto"

    def as_messages(self) -> list[dict[str, Any]]:
        """Return OpenAI chat messages: [{"role": ..., "content": ...}, ...].

        The instructions come first as a "system" message (omitted when empty); each turn
        becomes a "user" or "assistant" message with its (heard) text, an unheard reply an empty
        assistant message that keeps the turn order; an assistant turn's function calls are its
        message's `tool_calls`, a tool turn a "tool" message with its `tool_call_id`; after
        each interrupted assistant turn follows a "system" message with the interruption note,
        so the model knows its reply was cut and where.
        """
        messages: list[dict[str, Any]] = (
            [{"role": "system", "content": self.instructions}] if self.instructions else [])
        for turn in self.turns:
            message: dict[str, Any] = {"role": turn.role, "content": turn.text}
            if turn.tool_calls:
                message["tool_calls"] = [
                    {"id": call.call_id, "type": "function",
                     "function": {"name": call.name, "arguments": call.arguments}}
                    for call in turn.tool_calls]
            if turn.role == "tool":
                message["tool_call_id"] = turn.call_id
            messages.append(message)
            if turn.role == "assistant" and turn.interrupted:
                note = (
                    self.interruption_note.replace("{heard}", turn.text)
                    if turn.text
                    else self.unheard_note
                )
                messages.append({"role": "system", "content": note})
        return messages


class ResponderError(Exception):
    """A responder could not write (the rest of) its reply; the message says why, for the
    client's `error` event: no secrets, no user text."""


class Responder(Protocol):
    """Produces the assistant's reply to a prompt."""

    def respond(self, prompt: Prompt) -> AsyncIterator[str | ToolCall]:
        """Yield the reply as text deltas (sentences, or tokens as a model writes them); they
        join to the reply. A responder that calls the prompt's tools yields each `ToolCall`
        after the text. May raise `ResponderError`; closing the iterator stops the work."""
        ...
