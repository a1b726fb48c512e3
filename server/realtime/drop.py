"""What a dropped connection does to its session, and what a resumed one is told. Sans-I/O.

`cut_at_drop` treats the drop as the listener's barge-in where their playback stopped: the
latest reply, when it was not heard to its end, is cancelled and capped at the position the
client's last `playback.ack` reported (for a client that does not report playback, at the
real-time estimate), exactly as a `barge_in` without `audio_end_ms` at that moment would be
(`Interruptions.barge_in`); its heard text is then calibrated like any other cut. A paused
reply ends as a cut too. The input audio buffer (speech never committed) is dropped.

`resumed_fields` is the body of `session.resumed` (PROTOCOL.md): the history as heard, each
item in OpenAI's `ConversationItem` shape (an assistant item's transcript is its heard text),
and, per assistant item, the heard-text state that `conversation.item.heard` would announce.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from server.realtime import protocol

if TYPE_CHECKING:
    from server.realtime.session import Session

DROP_SOURCE = "disconnect"
"""The `barge_in` source a drop is applied as (metrics count its cut as `disconnect`)."""


def cut_at_drop(session: Session) -> protocol.BargeIn | None:
    """Apply a dropped connection to `session` (its clock set to the moment of the drop).

    Returns the `barge_in` the drop was applied as (for the session's observers: metrics count
    the cut as `disconnect`), None when no reply was playing."""
    session.pauses.cut(DROP_SOURCE)
    if session.input_turns.audio or session.input_turns.speech_turn is not None:
        session.input_turns.clear()
        session.pauses.input_replaced(None)
    response = session.lifecycle.latest()
    if response is None or response.cursor.fully_played or (
            response.item_id not in session.history):
        return None
    if not response.active and response.cursor.hard_cap_ms is not None:
        return None  # already cut (a barge-in, a truncate): that cut stands
    drop = protocol.BargeIn(event_id=None, response_id=response.id, item_id=None,
                            audio_end_ms=None, source=DROP_SOURCE)
    session.interruptions.barge_in(drop)
    return drop


def resumed_fields(session: Session, parked_ms: float) -> dict[str, Any]:
    """The fields of `session.resumed` for `session`, parked for `parked_ms` (ms)."""
    items, heard = [], []
    for item in session.history:
        response = session.responses.get(item.response_id or "")
        status = session.lifecycle.item_status(item)
        items.append(item.as_wire(status))
        if item.role == "assistant" and response is not None:
            evidence = item.heard if item.method not in ("none", "full") else None
            heard.append({
                "item_id": item.id, "response_id": response.id, "text": item.text,
                "full_text": item.full_text, "played_ms": response.cursor.cutoff_ms,
                "method": item.method, "interrupted": item.interrupted,
                "asr_text": evidence.asr_text if evidence else None,
                "marks_agree": evidence.marks_agree if evidence else None,
            })
    return {"session_id": session.id, "parked_ms": round(parked_ms), "items": items,
            "heard": heard}
