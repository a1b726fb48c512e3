"""Interruptions: the client's playback reports and the cuts they make in a reply.

`Interruptions` applies `playback.ack` (the played position, optionally a truncating one),
`barge_in`, `conversation.item.truncate`, `output_audio_buffer.clear` and `response.cancel`: it
moves the reply's playback cursor, cancels its generation when it is still running, marks the
reply interrupted and asks the calibration to cut its heard text. Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from server.realtime import protocol
from server.realtime.effects import WakeSender
from server.realtime.events import EventLog
from server.realtime.heard_text import HeardTextStore
from server.realtime.items import ConversationItems
from server.realtime.response_state import ResponseState
from server.realtime.responses import ResponseLifecycle

if TYPE_CHECKING:
    from calibration.history_calibration import HistoryCalibration


class Interruptions:
    """Playback reports and interruptions of one session's replies.

    Args:
        responses: the session's responses.
        heard_text: the session's heard-text store (announces the item's text).
        items: the session's item operations (the history).
        log: the session's outbox.
        calibration: the session's calibration controller, when there is one.
        estimate: the position (ms) of a reply estimated to be playing now
            (`ResponseState.estimated_played_ms` at the session clock), used for clients that
            do not report playback (`ConversationItems.reports_playback`).
    """

    def __init__(self, responses: ResponseLifecycle, heard_text: HeardTextStore,
                 items: ConversationItems, log: EventLog,
                 calibration: Callable[[], HistoryCalibration | None],
                 estimate: Callable[[ResponseState], int]) -> None:
        self._responses = responses
        self._heard_text = heard_text
        self._items = items
        self._log = log
        self._calibration = calibration
        self._estimate = estimate

    def mark_interrupted(self, response: ResponseState) -> None:
        """Mark `response`'s item interrupted unless it was played to its end, bring its
        stored text up to date and ask the calibration to cut it. For a client that does not
        report playback, the cut is first moved to the estimated playing position (a soft cut:
        the client's `conversation.item.truncate` may still set it, higher or lower)."""
        if not self._items.reports_playback:
            response.cursor.acknowledge(self._estimate(response))
        item = self._items.history.get(response.item_id)
        if item is not None and not response.cursor.fully_played:
            item.interrupted = True
        self._heard_text.refresh(response)
        self._request_calibration()

    def server_cut(self, response: ResponseState) -> None:
        """The server's own interruption of `response` (speech over it: server VAD, or a
        paused reply the utterance cut): mark it interrupted at the estimated position and
        announce the cut with `conversation.item.truncated`, as OpenAI does (the `openai-agents`
        SDK trims its history there); the client's truncate or final ACK may still refine it."""
        self.mark_interrupted(response)
        if response.item_id in self._items.history:
            self._log.emit("conversation.item.truncated", item_id=response.item_id,
                           content_index=0, audio_end_ms=response.cursor.cutoff_ms)

    def barge_in(self, event: protocol.BargeIn) -> None:
        """`barge_in`: stop the named reply (default: the active, else the latest one) at the
        client's rendered position `audio_end_ms` (a permanent cap); without one, at the
        position its ACKs reported (the real-time estimate for a client without ACKs).

        Raises:
            protocol.ProtocolError: no such response or item, or none to interrupt.
        """
        if event.response_id is None and event.item_id is None:
            response = self._responses.active() or self._responses.latest()
            if response is None:
                raise protocol.ProtocolError(
                    "response_not_found", "There is no response to interrupt.",
                    event_id=event.event_id,
                )
        else:
            response = self._responses.resolve(event.response_id, event.item_id, event.event_id)
        if response.cursor.fully_played:
            return
        reason = "turn_detected" if event.source == "vad" else "client_cancelled"
        self._responses.cancel_generation(response, reason)
        position = event.audio_end_ms
        if position is None:
            if not self._items.reports_playback:
                response.cursor.acknowledge(self._estimate(response))
            position = response.cursor.played_ms
        self._cap(response, position)

    def _cap(self, response: ResponseState, audio_end_ms: int) -> None:
        """Apply a permanent cap (ms), acknowledge it with `conversation.item.truncated` and
        treat the reply as interrupted (its heard text is recalibrated)."""
        cap = response.cursor.truncate(audio_end_ms)
        if response.item_id in self._items.history:
            self._log.emit("conversation.item.truncated", item_id=response.item_id,
                       content_index=0, audio_end_ms=cap)
        self.mark_interrupted(response)

    def response_cancel(self, event: protocol.ResponseCancel) -> None:
        """`response.cancel`: cancel the named (default: the active) response. Cancelling the
        latest response again after a cut ended it (a `conversation.item.truncate`, a barge-in,
        a cancel: the `openai-agents` SDK's `interrupt()` sends truncate, then cancel) quietly
        succeeds: with OpenAI, whose responses end when generation does, the pair never fails.

        Raises:
            protocol.ProtocolError: `response_cancel_not_active`, or an unknown response.
        """
        if event.response_id is not None:
            response = self._responses.resolve(event.response_id, None, event.event_id)
        else:
            response = self._responses.active() or self._responses.latest()
        if response is not None and response.status == "cancelled" and (
                response is self._responses.latest()):
            return  # already cut by a truncate, barge-in or cancel: done, as OpenAI's would be
        if response is None or not response.active:
            raise protocol.ProtocolError(
                "response_cancel_not_active", "There is no active response to cancel.",
                event_id=event.event_id,
            )
        self._responses.cancel_generation(response, "client_cancelled")
        self.mark_interrupted(response)

    def item_truncate(self, event: protocol.ItemTruncate) -> None:
        """`conversation.item.truncate`: cap the assistant item's audio at `audio_end_ms`.

        An interruption like `barge_in`: a reply still generating or sending is cancelled (the
        listener stopped hearing it there) and its heard text is calibrated at once.

        Raises:
            protocol.ProtocolError: unknown item, or `audio_end_ms` beyond its audio.
        """
        response = self._responses.resolve(None, event.item_id, event.event_id)
        if event.audio_end_ms > response.cursor.total_ms:
            raise protocol.ProtocolError(
                "invalid_value",
                f"audio_end_ms {event.audio_end_ms} is beyond the item's audio "
                f"({response.cursor.total_ms} ms).", param="audio_end_ms",
                event_id=event.event_id,
            )
        if response.cursor.fully_played:
            self._log.emit("conversation.item.truncated", item_id=event.item_id, content_index=0,
                       audio_end_ms=response.cursor.cutoff_ms)
            return
        self._responses.cancel_generation(response, "client_cancelled")
        self._cap(response, event.audio_end_ms)

    def output_clear(self, event: protocol.OutputAudioBufferClear) -> None:
        """`output_audio_buffer.clear`: the client dropped its queued audio; a latest reply
        still playing is cancelled and interrupted at its last ACK.

        Raises:
            protocol.ProtocolError: `response_not_found`.
        """
        if event.response_id is not None:
            response = self._responses.resolve(event.response_id, None, event.event_id)
        else:
            response = self._responses.latest()
        if response is None:
            raise protocol.ProtocolError(
                "response_not_found", "There is no output audio to clear.",
                event_id=event.event_id,
            )
        self._log.emit("output_audio_buffer.cleared", response_id=response.id)
        if response is not self._responses.latest() or response.cursor.fully_played:
            return
        self._responses.cancel_generation(response, "client_cancelled")
        self.mark_interrupted(response)

    def playback_ack(self, event: protocol.PlaybackAck, now_ms: float,
                     input_end_ms: float) -> None:
        """`playback.ack`: the client rendered `played_ms` of a reply by clock `now_ms` (ms),
        read after the microphone appends up to input position `input_end_ms` (ms): the
        playing position runs from there in audio time (`server.realtime.ack_anchors`);
        with `truncate`, playback stopped there for good. Announces
        `playback.acknowledged`; a reply whose playback is over is settled (interrupted
        when cut short), otherwise its stored text follows the new position. The ACK of a
        reply whose generation ended also frees the recordings of fully heard replies
        (`HistoryCalibration.release_confirmed`).

        Raises:
            protocol.ProtocolError: unknown response or item.
        """
        response = self._responses.resolve(event.response_id, event.item_id, event.event_id)
        self._items.reports_playback = True
        cursor = response.cursor
        was_fully_played = cursor.fully_played
        cursor.acknowledge(event.played_ms)
        response.acknowledged(now_ms, input_end_ms)
        if event.truncate and not was_fully_played:
            cursor.truncate(event.played_ms)
        self._log.emit("playback.acknowledged", response_id=response.id, item_id=response.item_id,
                   played_ms=cursor.played_ms, cursor=cursor.as_wire())
        item = self._items.history.get(response.item_id)
        interrupted = item is not None and item.interrupted
        superseded = response is not self._responses.latest()
        all_played = cursor.unplayed_ms == 0 and cursor.sent_ms >= cursor.generated_ms
        playback_over = all_played or superseded or interrupted
        if (event.truncate and not was_fully_played) or (
            response.generation_ended and playback_over and not response.paused
        ):
            self.mark_interrupted(response)
        else:
            self._heard_text.refresh(response)
        if response.generation_ended and (calibration := self._calibration()) is not None:
            # An ACK changes only its own reply, and a reply still generating keeps its audio:
            # the ACKs that stream in while a reply generates (ten a second) sweep nothing.
            calibration.release_confirmed()
        self._log.effect(WakeSender())

    def _request_calibration(self) -> None:
        if (calibration := self._calibration()) is not None:
            calibration.request_ready()
