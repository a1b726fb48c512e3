"""Committed user turns awaiting their transcript, and what the transcript makes of them.

`InputTurns` commits the person's audio as a user item without words (`expect`); when its
transcript is ready (`transcribed`) the item gets the words and `conversation.item.done`, or is
deleted: no words (noise, a cough), no room in the history, or a backchannel found after its
commit (`withdraw`). Sans-I/O.
"""

from __future__ import annotations

from server.realtime import limits
from server.realtime.events import EventLog
from server.realtime.items import ConversationItems


class UserTranscripts:
    """The user items of one session that wait for their transcript.

    Args:
        items: the session's item operations (the items are completed or deleted there).
        log: the session's outbox.
    """

    def __init__(self, items: ConversationItems, log: EventLog) -> None:
        self._items = items
        self._log = log
        self._pending: dict[str, float] = {}  # item id -> its audio, seconds

    @property
    def pending(self) -> bool:
        """True while a committed utterance still waits for its transcript."""
        return bool(self._pending)

    def expect(self, item_id: str, seconds: float) -> None:
        """User item `item_id` was committed with `seconds` of audio (reported as the
        transcription's `usage`) and waits for its transcript."""
        self._pending[item_id] = seconds

    def withdraw(self, item_id: str) -> None:
        """A committed utterance awaiting its transcript was a backchannel: delete its user
        item (`conversation.item.deleted`); its transcript is then ignored."""
        self._pending.pop(item_id, None)
        if item_id in self._items.history:
            self._items.delete(item_id)

    def transcribed(self, item_id: str, transcript: str) -> bool:
        """The transcript of a committed utterance is ready; True when it became a user turn
        (`conversation.item.input_audio_transcription.completed`, `conversation.item.done`).

        An utterance with no words (noise, a cough) is deleted instead (False); so is nothing
        when the item is gone. So is one whose words would take the history past its
        `max_chars` (the item itself is already counted among the items), with an `error`
        (`history_limit_exceeded`).
        """
        seconds = self._pending.pop(item_id, 0.0)
        item = self._items.history.get(item_id)
        if item is None:
            return False
        if not any(ch.isalnum() for ch in transcript):
            self._items.delete(item_id)
            return False
        text = transcript.strip()
        full = limits.history_limit_error(
            self._items.history, len(text), max_items=self._items.max_items + 1,
            max_chars=self._items.max_chars)
        if full is not None:
            self._items.delete(item_id)
            self._log.error(full)
            return False
        item.text = text
        self._log.emit("conversation.item.input_audio_transcription.completed",
                       item_id=item_id, content_index=0, transcript=item.text,
                       usage={"type": "duration", "seconds": round(seconds, 3)})
        self._log.emit("conversation.item.done",
                       previous_item_id=self._items.history.previous_id(item_id),
                       item=item.as_wire())
        return True
