"""The session's side of heard-text calibration: what the controller may see of a reply, the
results it may store, and their announcement.

`HeardTextStore` implements the session half of the calibration API (`calibration_view`,
`apply_heard_text`, see `calibration.history_calibration`) over the session's responses and
items, re-validates every result before it is stored (REFERENCE.md section 4.1) and announces
`conversation.item.heard` whenever an assistant item's stored text, method or evidence changes.
Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from calibration.history_calibration import CalibrationView, HeardCut
from server.realtime.history import HeardPrefix
from server.realtime.items import ConversationItems
from server.realtime.response_state import ResponseState
from server.realtime.responses import ResponseLifecycle


class HeardTextStore:
    """Calibration results of one session's replies.

    Args:
        responses: the session's responses.
        items: the session's item operations (history and `conversation.item.heard`).
        playback_active: whether a response's audio is still playing to the listener.
        closed: whether the session is closed (nothing is shown or stored then).
        ack_timeout_ms: how long after the session's first audio a client that reports
            playback has sent its first `playback.ack` (ms).
    """

    def __init__(self, responses: ResponseLifecycle, items: ConversationItems,
                 playback_active: Callable[[ResponseState], bool],
                 closed: Callable[[], bool], ack_timeout_ms: int) -> None:
        self._responses = responses
        self._items = items
        self._playback_active = playback_active
        self._closed = closed
        self._ack_timeout_ms = ack_timeout_ms
        self._unreported_settled = False

    def playback_unreported(self, now_ms: float) -> bool:
        """True once the client is known not to report playback at clock `now_ms` (ms): no
        `playback.ack` arrived within `ack_timeout_ms` of the session's first audio (a standard
        OpenAI Realtime client, such as the `openai` SDK). Until then, and for clients that
        ACK, history holds only acknowledged audio."""
        if self._items.reports_playback:
            return False
        first = self._first_audio_ms()
        return first is not None and now_ms >= first + self._ack_timeout_ms

    def settle_unreported(self, now_ms: float) -> float | None:
        """While it is not known whether the client reports playback, the clock reading (ms)
        at which `playback_unreported` may turn true; once it did, every ended reply's stored
        text is brought up to date (a completed one counts as heard in full) and None."""
        if self._items.reports_playback or self._unreported_settled:
            return None
        first = self._first_audio_ms()
        if first is None:
            return None
        if not self.playback_unreported(now_ms):
            return first + self._ack_timeout_ms
        self._unreported_settled = True
        for response in list(self._responses.by_id.values()):
            if not response.active:
                self.refresh(response)
        return None

    def _first_audio_ms(self) -> float | None:
        """Clock reading (ms) at which the session's first audio was sent, None before."""
        return next((r.first_send_ms for r in self._responses.by_id.values()
                     if r.first_send_ms is not None), None)

    def refresh(self, response: ResponseState, elapsed_ms: float | None = None, *,
                again: bool = False) -> None:
        """Recompute the stored text of `response`'s item (`ConversationItems.announce_heard`);
        announce `conversation.item.heard` on change, or always with `again`."""
        item = self._items.history.get(response.item_id)
        if item is not None:
            self._items.announce_heard(item, response, elapsed_ms, again=again)

    def calibration_view(self, response_id: str) -> CalibrationView | None:
        """What the calibration controller may know of a reply (None when unknown, deleted or
        the session is closed)."""
        response = self._responses.by_id.get(response_id)
        if response is None or response.item_id not in self._items.history or self._closed():
            return None
        cursor = response.cursor
        complete = cursor.total_ms if cursor.audio_complete else None
        return CalibrationView(
            text=response.text,
            generating=not response.generation_ended,
            cutoff_ms=cursor.cutoff_ms,
            total_audio_ms=cursor.total_ms,
            complete_audio_duration_ms=complete,
            fully_heard=cursor.fully_played,
            playback_active=self._playback_active(response),
        )

    def apply_heard_text(
        self, response_id: str, *, text: str, audio_end_ms: int, char_end: int
    ) -> bool:
        """Store a calibration result after re-validating it (REFERENCE.md section 4.1).

        Args:
            response_id: the reply.
            text: the full text the result was computed on (must equal the reply's text now).
            audio_end_ms: the cutoff the evidence covered (must be > 0 and <= the cutoff now).
            char_end: exclusive code-point end of the heard prefix, 0 <= char_end <= len(text);
                a `HeardCut` also carries the method and the ASR transcript.

        Returns:
            True when the result was stored (the heard text is re-derived from it); False when
            any check fails, in which case nothing changes.
        """
        response = self._responses.by_id.get(response_id)
        if self._closed() or response is None or not response.generation_ended:
            return False
        item = self._items.history.get(response.item_id)
        if item is None or response.text != text or isinstance(char_end, bool):
            return False
        if not 0 <= char_end <= len(text) or audio_end_ms <= 0:
            return False
        if audio_end_ms > response.cursor.cutoff_ms:
            return False
        method = char_end.method if isinstance(char_end, HeardCut) else "custom"
        item.heard = HeardPrefix(
            text=text, char_end=int(char_end), audio_end_ms=audio_end_ms, method=method,
            asr_text=getattr(char_end, "asr_text", None),
            marks_agree=getattr(char_end, "marks_agree", None), source=char_end,
        )
        return True

    def report_cross_check(
        self, response_id: str, cut: int, asr_text: str | None, marks_agree: bool | None
    ) -> None:
        """Attach a finished ASR cross-check to the marks result `cut` and announce it.

        Nothing happens when the item's stored result is no longer `cut` (a newer calibration
        replaced it, or the item was deleted): evidence is only shown beside its own result.
        """
        response = self._responses.by_id.get(response_id)
        item = self._items.history.get(response.item_id) if response is not None else None
        heard = item.heard if item is not None else None
        if response is None or heard is None or heard.source is not cut:
            return
        item.heard = replace(heard, asr_text=asr_text, marks_agree=marks_agree)
        self.refresh(response, again=True)

    def announce_calibration(self, response_id: str, elapsed_ms: float) -> None:
        """After `apply_heard_text` succeeded, or after a calibration of the reply failed (then
        the text kept without it): re-derive and announce the item's heard text, settled
        (`elapsed_ms`: the calibration's run time, reported in `conversation.item.heard`)."""
        response = self._responses.by_id.get(response_id)
        if response is not None:
            self.refresh(response, elapsed_ms, again=True)

