"""A completed response's function calls as OpenAI Realtime `function_call` output items.

Each call the responder made (`ResponseState.function_calls`) becomes, after the response's
message item and before `response.done`: `conversation.item.added` and
`response.output_item.added` (status "in_progress", empty arguments), one
`response.function_call_arguments.delta` per streamed piece of its arguments,
`response.function_call_arguments.done`, `response.output_item.done` and
`conversation.item.done` (status "completed"), as OpenAI's Realtime API sends them (its server
events reference). The item joins the history after the response's items, where a client's
`function_call_output` and the next `response.create` find it. Sans-I/O.
"""

from __future__ import annotations

from typing import Any

from server.realtime.events import EventLog
from server.realtime.history import HistoryItem
from server.realtime.items import ConversationItems
from server.realtime.response_state import ResponseState


def emit_function_calls(response: ResponseState, first_output_index: int,
                        items: ConversationItems, log: EventLog) -> list[dict[str, Any]]:
    """Add `response`'s function calls to the history and emit their output-item events.

    Args:
        response: a response that completed (its `function_calls` are read).
        first_output_index: the output index of the first call (after the message item).
        items: the session's items (new ids, history, `conversation.item.added`).
        log: the session's outbox.

    Returns:
        The calls' items in the wire shape (status "completed"), for `response.done`.
    """
    output = []
    after = response.item_id if response.item_id in items.history else None
    for index, call in enumerate(response.function_calls, start=first_output_index):
        item = HistoryItem(id=items.new_id(), role="tool", text="", kind="function_call",
                           call_id=call.call_id, name=call.name)
        items.add(item, after=after, status="in_progress")
        after = item.id
        common = {"response_id": response.id, "item_id": item.id, "output_index": index}
        log.emit("response.output_item.added", response_id=response.id, output_index=index,
                 item=item.as_wire("in_progress"))
        for piece in call.pieces or (call.arguments,):
            log.emit("response.function_call_arguments.delta", **common, call_id=call.call_id,
                     delta=piece)
        item.text = call.arguments
        log.emit("response.function_call_arguments.done", **common, call_id=call.call_id,
                 name=call.name, arguments=call.arguments)
        wire = item.as_wire("completed")
        log.emit("response.output_item.done", response_id=response.id, output_index=index,
                 item=wire)
        log.emit("conversation.item.done",
                 previous_item_id=items.history.previous_id(item.id), item=wire)
        output.append(wire)
    return output
