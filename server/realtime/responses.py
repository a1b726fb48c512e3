"""The responses of one session: their registry, the current one, the epoch and their
lifecycle events.

`ResponseLifecycle` starts a response (`response.created`, its assistant item and content part),
ends it exactly once (the terminal sequence up to `response.done`), cancels its generation
(a new epoch) and finds the response a client event names. When an interruption happens and
what the history then holds is the session's decision. Sans-I/O.
"""

from __future__ import annotations

from typing import Any

from server.realtime import modalities, protocol
from server.realtime.effects import CancelGeneration, StartGeneration, WakeSender
from server.realtime.events import EventLog
from server.realtime.function_calls import emit_function_calls
from server.realtime.history import HistoryItem
from server.realtime.items import ConversationItems
from server.realtime.response_state import ResponseState


class ResponseLifecycle:
    """Responses of one session, oldest first.

    Args:
        session_id: the conversation id reported in response objects.
        audio_output: the `audio.output` object of response objects (format and voice).
        items: the session's item operations (assistant items are added there).
        log: the session's outbox.

    Attributes:
        by_id: every response by id, in creation order, but those whose item was deleted
            (`release`): the latest of them until the next response starts.
        current_id: the response being generated or sent, None between responses.
        epoch: incremented by every cancelled generation (late output of an older epoch is
            dropped).
    """

    def __init__(self, session_id: str, audio_output: dict[str, Any], items: ConversationItems,
                 log: EventLog) -> None:
        self.by_id: dict[str, ResponseState] = {}
        self.current_id: str | None = None
        self.epoch = 0
        self._session_id = session_id
        self._audio_output = audio_output
        self._items = items
        self._log = log
        self._instructions: dict[str, str] = {}
        self._released: str | None = None

    def latest(self) -> ResponseState | None:
        """The newest response, or None before the first."""
        return next(reversed(self.by_id.values()), None)

    def active(self) -> ResponseState | None:
        """The current response while it is in progress, else None."""
        response = self.by_id.get(self.current_id or "")
        return response if response is not None and response.active else None

    def generating(self, response_id: str) -> ResponseState | None:
        """The response `response_id` while its responder/TTS may still add output, else None."""
        response = self.by_id.get(response_id)
        if response is None or not response.active or response.generation_ended:
            return None
        return response

    def instructions(self, response_id: str, default: str) -> str:
        """The instructions `response.create` gave this response, else `default`."""
        return self._instructions.get(response_id, default)

    def item_status(self, item: HistoryItem) -> str:
        """The wire status of an item: "completed" for a user item, else its response's
        (`ResponseState.item_status`)."""
        if item.response_id is None:
            return "completed"
        return self.by_id[item.response_id].item_status

    def wire(self, response: ResponseState) -> dict[str, Any]:
        """The OpenAI Realtime `response` object of `response`."""
        item = self._items.history.get(response.item_id)
        return response.as_wire(self._session_id,
                                [item.as_wire(response.item_status)] if item else [],
                                self._audio_output)

    def start(self, instructions: str | None, metadata: dict[str, str] | None = None,
              output_modalities: tuple[str, ...] = modalities.AUDIO) -> ResponseState:
        """Create a response (its object echoing `metadata`; speech, or text only with
        `modalities.TEXT`) and its assistant item; emit `response.created`, the item's
        `conversation.item.added`, `response.output_item.added` and
        `response.content_part.added`; ask for its generation (`StartGeneration`)."""
        previous = next(reversed(self.by_id.values()), None)  # the latest: its ACK lag
        if self._released is not None:
            self.by_id.pop(self._released, None)
            self._released = None
        response = ResponseState(id=self._log.new_id("resp", taken=self.by_id),
                                 item_id=self._items.new_id(), epoch=self.epoch,
                                 metadata=metadata, output_modalities=output_modalities,
                                 ack_lag_ms=0.0 if previous is None else previous.ack_lag_ms)
        self.by_id[response.id] = response
        self.current_id = response.id
        item = HistoryItem(id=response.item_id, role="assistant", text="",
                           response_id=response.id,
                           content_type=modalities.content_type(output_modalities))
        self._log.emit("response.created", response=self.wire(response))
        self._items.add(item, status="in_progress")
        self._log.emit("response.output_item.added", response_id=response.id, output_index=0,
                       item=item.as_wire("in_progress"))
        self._log.emit("response.content_part.added", response_id=response.id,
                       item_id=item.id, output_index=0, content_index=0,
                       part=modalities.part(output_modalities, ""))
        if instructions is not None:
            self._instructions[response.id] = instructions
        self._log.effect(StartGeneration(response.id))
        return response

    def finish(self, response: ResponseState, status: str, reason: str | None) -> None:
        """End `response` with `status` ("completed" | "cancelled" | "failed") and `reason`:
        drop its queued output and emit its terminal sequence (once; later calls do nothing).
        The item's stored text is brought up to date (`announce_heard`) before it is sent; a
        completed response's function calls follow its message item
        (`function_calls.emit_function_calls`)."""
        if not response.active:
            return
        response.status = status
        response.status_reason = reason
        response.queue.clear()
        self._instructions.pop(response.id, None)  # up to 32 kB a response, for its prompt only
        if self.current_id == response.id:
            self.current_id = None
        item = self._items.history.get(response.item_id)
        common = {"response_id": response.id, "item_id": response.item_id,
                  "output_index": 0, "content_index": 0}
        sent_text = response.text[:response.sent_text_end]
        for event_type, fields in modalities.done_events(response.output_modalities, sent_text):
            self._log.emit(event_type, **common, **fields)
        self._log.emit("response.content_part.done", **common,
                       part=modalities.part(response.output_modalities, sent_text))
        output = []
        if item is not None and response.output_modalities == modalities.TEXT:
            item.full_text = sent_text  # read, not played: its reader has what was sent
            response.cursor.audio_complete = True
        if item is not None:
            self._items.announce_heard(item, response)
            wire = item.as_wire(response.item_status)
            if status == "completed" and not self._items.reports_playback:
                # OpenAI semantics for a client that does not (yet) report playback: a
                # completed reply counts as heard in full unless a cut comes
                # (`HeardTextStore.settle_unreported`), so its terminal events carry its
                # transcript even before that is known (the first reply of a session).
                text_key = "text" if response.output_modalities == modalities.TEXT else (
                    "transcript")
                wire["content"][0][text_key] = sent_text
            output.append(wire)
            self._log.emit("response.output_item.done", response_id=response.id,
                           output_index=0, item=wire)
            self._log.emit("conversation.item.done",
                           previous_item_id=self._items.history.previous_id(item.id), item=wire)
        if status == "completed" and response.function_calls:
            output += emit_function_calls(response, len(output), self._items, self._log)
        self._log.emit("response.done", response=response.as_wire(self._session_id, output,
                                                                  self._audio_output))
        self._log.effect(WakeSender())

    def release(self, response: ResponseState) -> None:
        """Free `response`, whose item was deleted, after its generation was cancelled
        (`cancel_generation`): it leaves `by_id` at once (an event naming it is then refused
        with `response_not_found`), or, when it is the latest, once the next response starts
        (until then it is still the reply that may be playing: `latest`). Without this, every
        create / cancel / delete cycle kept its response, about 8.7 kB
        (`benchmarks/bench_session_memory.py`)."""
        if response is self.latest():
            self._released = response.id
        else:
            self.by_id.pop(response.id, None)

    def cancel_generation(self, response: ResponseState, reason: str) -> None:
        """Stop generating and sending `response` (a new epoch); emit its cancelled terminal
        sequence with `reason`. Nothing happens once it ended."""
        if not response.active:
            return
        if not response.generation_ended:
            response.generation_ended = True
            self._log.effect(CancelGeneration(response.id))
        self.epoch += 1
        self.finish(response, "cancelled", reason)

    def resolve(self, response_id: str | None, item_id: str | None,
                event_id: str | None) -> ResponseState:
        """The response a client event names by `response_id` and/or its assistant `item_id`.

        Raises:
            protocol.ProtocolError: `response_not_found`, `item_not_found`,
                `item_response_mismatch`, or `missing_required_parameter` when neither is given.
        """
        response = None
        if response_id is not None:
            response = self.by_id.get(response_id)
            if response is None:
                raise protocol.ProtocolError(
                    "response_not_found", f"Unknown response '{response_id}'.",
                    param="response_id", event_id=event_id,
                )
        if item_id is not None:
            by_item = next((r for r in self.by_id.values() if r.item_id == item_id), None)
            if by_item is None or item_id not in self._items.history:
                raise protocol.ProtocolError(
                    "item_not_found", f"No assistant item '{item_id}'.", param="item_id",
                    event_id=event_id,
                )
            if response is not None and response is not by_item:
                raise protocol.ProtocolError(
                    "item_response_mismatch",
                    f"Item '{item_id}' does not belong to response '{response_id}'.",
                    param="item_id", event_id=event_id,
                )
            response = by_item
        if response is None:
            raise protocol.ProtocolError(
                "missing_required_parameter", "Name the response_id or item_id.",
                param="response_id", event_id=event_id,
            )
        return response
