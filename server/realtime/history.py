"""Conversation history and the heard-text rewrite of assistant turns.

An assistant turn holds the reply's full generated text, the text the listener heard (always an
exact prefix of the full text, cut at a unit boundary, trailing whitespace stripped) and whether it
was interrupted. `heard_text_for` is the history policy `ack_only` of REFERENCE.md sections 2.3 and
4.3: the full text only when the reply was completely synthesised and played to its end, otherwise
the calibrated prefix if its evidence is still covered by the cutoff, otherwise the empty text
("known empty" and "unknown" both store nothing; an unheard reply never falls back to its full
text). Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from calibration.units import heard_prefix
from server.realtime.playback import PlaybackCursor


@dataclass(frozen=True, slots=True)
class HeardPrefix:
    """A calibration result accepted by the session.

    Attributes:
        text: the full reply text the result was computed on.
        char_end: exclusive code-point end of the heard prefix in `text`.
        audio_end_ms: the cutoff (ms) the evidence covered; a later cutoff below it voids it.
        method: "marks" | "asr" | "ratio" | "custom".
        asr_text: the ASR transcript of the played audio, when ASR ran.
        marks_agree: whether marks and ASR gave the same cut, when both ran.
        source: the policy's result object this prefix came from (identifies it when a
            background cross-check reports later).
    """

    text: str
    char_end: int
    audio_end_ms: int
    method: str
    asr_text: str | None = None
    marks_agree: bool | None = None
    source: object = field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class HistoryItem:
    """One conversation item.

    Attributes:
        id: item id (client-given or `item_…`).
        role: "user", "assistant" or "system" (a client's instructions item).
        text: user text verbatim, or the assistant text history holds now (the heard text).
        full_text: assistant: the whole generated reply so far.
        response_id: assistant: the response that produced it.
        interrupted: assistant: the listener did not hear the reply to its end.
        method: how `text` was established: "none" | "full" | a calibration method.
        heard: the accepted calibration result, if any.
        content_type: "input_text", "input_audio", "output_audio" or "output_text" (an
            assistant reply of text only).
        kind: the OpenAI item type: "message", "function_call" (`text`: its arguments, a
            JSON text) or "function_call_output" (`text`: the output); function items have
            the role "tool" (neither a user's words nor a reply that is heard).
        call_id: function items: the call's id.
        name: function_call: the function's name.
    """

    id: str
    role: Literal["user", "assistant", "system", "tool"]
    text: str
    full_text: str = ""
    response_id: str | None = None
    interrupted: bool = False
    method: str = "none"
    heard: HeardPrefix | None = None
    content_type: str = "input_text"
    kind: Literal["message", "function_call", "function_call_output"] = "message"
    call_id: str = ""
    name: str = ""

    def as_wire(self, status: str = "completed") -> dict[str, object]:
        """The item in the OpenAI Realtime `ConversationItem` shape (assistant text = heard;
        function items as OpenAI's `function_call` / `function_call_output` items)."""
        common: dict[str, object] = {"id": self.id, "object": "realtime.item", "type": self.kind}
        if self.kind == "function_call":
            return {**common, "status": status, "call_id": self.call_id, "name": self.name,
                    "arguments": self.text}
        if self.kind == "function_call_output":
            return {**common, "status": status, "call_id": self.call_id, "output": self.text}
        if self.content_type == "output_text":
            content = [{"type": "output_text", "text": self.text}]
        elif self.role == "assistant":
            content = [{"type": "output_audio", "transcript": self.text}]
        elif self.content_type == "input_audio":
            content = [{"type": "input_audio", "transcript": self.text}]
        else:
            content = [{"type": "input_text", "text": self.text}]
        return {
            "id": self.id,
            "object": "realtime.item",
            "type": "message",
            "role": self.role,
            "status": status,
            "content": content,
        }


def heard_text_for(item: HistoryItem, cursor: PlaybackCursor,
                   heard_unless_cut: bool = False) -> tuple[str, str]:
    """Return (text, method) that history may hold for an assistant item now.

    Args:
        item: the assistant item (its `full_text` and accepted `heard` prefix are read).
        cursor: the playback cursor of the item's response.
        heard_unless_cut: the client does not report playback and the reply completed and
            was not interrupted: it counts as heard in full unless a truncate or barge-in
            capped it (OpenAI Realtime semantics for clients without `playback.ack`).

    Returns:
        ("<full text>", "full") when the reply was completely synthesised and played to its end
        (or, with `heard_unless_cut`, completed and never capped); (prefix, method) when a
        calibration result exists for the same text whose evidence (`audio_end_ms`) is still
        covered by the cutoff; otherwise ("", "none").
    """
    if cursor.fully_played or (
        heard_unless_cut and cursor.audio_complete and cursor.hard_cap_ms is None
    ):
        return item.full_text, "full"
    heard = item.heard
    covered = heard is not None and cursor.cutoff_ms >= heard.audio_end_ms
    if heard is not None and covered and heard.text == item.full_text:
        return heard_prefix(heard.text, heard.char_end), heard.method
    return "", "none"


class ConversationHistory:
    """Ordered conversation items; ids are unique. Sans-I/O."""

    def __init__(self) -> None:
        self._items: dict[str, HistoryItem] = {}

    def __iter__(self) -> Iterator[HistoryItem]:
        return iter(list(self._items.values()))

    def __contains__(self, item_id: str) -> bool:
        return item_id in self._items

    def ids(self) -> list[str]:
        """Every item id, in order."""
        return list(self._items)

    def get(self, item_id: str) -> HistoryItem | None:
        """Return the item with this id, or None."""
        return self._items.get(item_id)

    def append(self, item: HistoryItem) -> None:
        """Add an item at the end. Raises ValueError if its id is taken."""
        if item.id in self._items:
            raise ValueError(f"duplicate item id {item.id}")
        self._items[item.id] = item

    def insert_after(self, previous_id: str | None, item: HistoryItem) -> None:
        """Add an item right after `previous_id` (None: first). Raises ValueError if its id
        is taken or `previous_id` is unknown. O(len(history))."""
        if item.id in self._items:
            raise ValueError(f"duplicate item id {item.id}")
        if previous_id is not None and previous_id not in self._items:
            raise ValueError(f"unknown item id {previous_id}")
        items = list(self._items.items())
        at = 0 if previous_id is None else [key for key, _ in items].index(previous_id) + 1
        items.insert(at, (item.id, item))
        self._items = dict(items)

    def delete(self, item_id: str) -> HistoryItem | None:
        """Remove and return the item, or None when unknown."""
        return self._items.pop(item_id, None)

    def previous_id(self, item_id: str) -> str | None:
        """Id of the item before `item_id`, or None when it is first."""
        previous = None
        for current in self._items:
            if current == item_id:
                return previous
            previous = current
        return None

    def before(self, item_id: str) -> list[HistoryItem]:
        """Items before `item_id` (all items when it is unknown), in order."""
        result = []
        for item in self._items.values():
            if item.id == item_id:
                break
            result.append(item)
        return result
