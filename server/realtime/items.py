"""Conversation item operations: create, retrieve, delete, and announcing an item's heard text.

`ConversationItems` wraps the session's `ConversationHistory` and emits the OpenAI Realtime
item events (`conversation.item.added` / `done` / `retrieved` / `deleted`) and our
`conversation.item.heard` into the session's `EventLog`. What an operation does to a response
(cancelling the reply of a deleted item) stays with the session. Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from server.realtime import limits, protocol
from server.realtime.events import EventLog
from server.realtime.history import ConversationHistory, HistoryItem, heard_text_for
from server.realtime.response_state import ResponseState

ROOT = "root"
"""`previous_item_id` that puts a new item first (OpenAI Realtime)."""


class ConversationItems:
    """Item operations on one session's history.

    Args:
        history: the session's conversation history (shared, not copied).
        log: the session's outbox.
        playback_unreported: whether the client is known not to report playback
            (`ReplyPlayback.playback_unreported`); a completed reply then counts as heard in full
            unless a truncate or barge-in cut it (OpenAI Realtime semantics).
        max_items, max_chars: the history's size limits (`check_room`).

    Attributes:
        reports_playback: the client has sent a `playback.ack`: only acknowledged audio
            counts as heard.
        reserved: ids announced for items not yet added (a speech turn's user item).
    """

    def __init__(self, history: ConversationHistory, log: EventLog,
                 playback_unreported: Callable[[], bool], *, max_items: int,
                 max_chars: int) -> None:
        self.history = history
        self.max_items = max_items
        self.max_chars = max_chars
        self.reports_playback = False
        self._playback_unreported = playback_unreported
        self.reserved: set[str] = set()
        self._log = log
        self._announced: dict[str, tuple[str, str, bool]] = {}

    def taken(self, item_id: str) -> bool:
        """True when `item_id` names an item or is reserved for one already announced (the
        user item of a speech turn in progress)."""
        return item_id in self.history or item_id in self.reserved

    def new_id(self, prefix: str = "item") -> str:
        """A fresh server id (`EventLog.new_id`) that no item has or is reserved for."""
        return self._log.new_id(prefix, taken=self.reserved | set(self.history.ids()))

    def last_id(self) -> str | None:
        """Id of the newest item, or None when the history is empty."""
        items = list(self.history)
        return items[-1].id if items else None

    def add(self, item: HistoryItem, status: str = "completed", *,
            after: str | None = None) -> None:
        """Append `item` (or insert it after the item `after`, `"root"`: first); emit
        `conversation.item.added` (and `.done` when `completed`) naming the item before it."""
        if after is None:
            previous = self.last_id()
            self.history.append(item)
        else:
            previous = None if after == ROOT else after
            self.history.insert_after(previous, item)
        self._log.emit("conversation.item.added", previous_item_id=previous,
                       item=item.as_wire(status))
        if status == "completed":
            self._log.emit("conversation.item.done", previous_item_id=previous,
                           item=item.as_wire())

    def require(self, item_id: str, event_id: str | None) -> HistoryItem:
        """The item `item_id`.

        Raises:
            protocol.ProtocolError: `item_not_found` when there is none.
        """
        item = self.history.get(item_id)
        if item is None:
            raise protocol.ProtocolError(
                "item_not_found", f"No item '{item_id}'.", param="item_id", event_id=event_id,
            )
        return item

    def check_room(self, added_chars: int, event_id: str | None) -> None:
        """Refuse an event that would add one more item of `added_chars` characters.

        Raises:
            protocol.ProtocolError: `history_limit_exceeded` past `max_items` or `max_chars`
                (`limits.history_limit_error`).
        """
        error = limits.history_limit_error(self.history, added_chars, max_items=self.max_items,
                                           max_chars=self.max_chars, event_id=event_id)
        if error is not None:
            raise error

    def create(self, event: protocol.ItemCreate) -> None:
        """`conversation.item.create`: add the client's user or system text item or function
        item, at the end or after `previous_item_id` (`"root"`: first), as OpenAI Realtime
        does.

        Raises:
            protocol.ProtocolError: `duplicate_item_id` when the client's id is taken,
                `item_not_found` when `previous_item_id` names no item,
                `history_limit_exceeded` when the history is full.
        """
        item_id = event.item_id or self.new_id()
        if self.taken(item_id):
            raise protocol.ProtocolError(
                "duplicate_item_id", f"Item '{item_id}' already exists.", param="item.id",
                event_id=event.event_id,
            )
        after = event.previous_item_id
        if after is not None and after != ROOT and after not in self.history:
            raise protocol.ProtocolError(
                "item_not_found", f"No item '{after}' to insert after.",
                param="previous_item_id", event_id=event.event_id,
            )
        function = event.function
        self.check_room(len(item_id) + len(event.text) + (
            0 if function is None else len(function.call_id) + len(function.name)),
            event.event_id)
        self.add(HistoryItem(id=item_id, role=event.role, text=event.text)
                 if function is None else
                 HistoryItem(id=item_id, role="tool", text=function.text, kind=function.kind,
                             call_id=function.call_id, name=function.name), after=after)

    def retrieve(self, item: HistoryItem, status: str) -> None:
        """`conversation.item.retrieve`: emit `conversation.item.retrieved` with `status`."""
        self._log.emit("conversation.item.retrieved", item=item.as_wire(status))

    def delete(self, item_id: str) -> None:
        """Remove the item and emit `conversation.item.deleted` (the caller has stopped its
        reply, if any)."""
        self.history.delete(item_id)
        self._announced.pop(item_id, None)
        self._log.emit("conversation.item.deleted", item_id=item_id)

    def announce_heard(self, item: HistoryItem, response: ResponseState,
                       elapsed_ms: float | None = None, *, again: bool = False) -> None:
        """Recompute an assistant item's stored text from its cursor and calibration result
        (`history.heard_text_for`); emit `conversation.item.heard` when (text, method,
        interrupted) changed since the last announcement, or always with `again`.

        Args:
            item: the assistant item.
            response: its response (status and playback cursor).
            elapsed_ms: calibration time to report, when this follows a calibration.
            again: announce even when nothing changed (a new calibration result or evidence).
        """
        cursor = response.cursor
        heard_unless_cut = (response.status == "completed" and not item.interrupted
                            and self._playback_unreported())
        text, method = heard_text_for(item, cursor, heard_unless_cut)
        item.text, item.method = text, method
        if method == "full":
            item.interrupted = False
        state = (text, method, item.interrupted)
        if again:
            self._announced.pop(item.id, None)
        if state == self._announced.get(item.id) or (method == "none" and not item.interrupted):
            return
        self._announced[item.id] = state
        heard = item.heard if method not in ("none", "full") else None
        self._log.emit(
            "conversation.item.heard", item_id=item.id, response_id=response.id, text=text,
            full_text=item.full_text, played_ms=cursor.cutoff_ms, method=method,
            asr_text=heard.asr_text if heard else None,
            marks_agree=heard.marks_agree if heard else None,
            elapsed_ms=round(elapsed_ms, 1) if elapsed_ms is not None else None,
            interrupted=item.interrupted,
        )
