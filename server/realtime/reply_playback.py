"""Where the assistant's latest reply is playing at the client, as far as the session knows.

`ReplyPlayback` answers, at the session clock, whether a reply is still playing (the VAD and
the echo detector listen differently then), which response and how far into its audio (ms) the
microphone heard when an append's audio was captured, and whether the client is known not to
report playback. Sans-I/O: it reads the responses, the pauses and the clock, and keeps only
where the input timeline sits on the clock (`InputClock`).
"""

from __future__ import annotations

from collections.abc import Callable

from server.listening.echo import ECHO_TAIL_MS
from server.realtime.arrival import InputClock
from server.realtime.heard_text import HeardTextStore
from server.realtime.history import ConversationHistory
from server.realtime.pauses import ReplyPauses
from server.realtime.response_state import ResponseState
from server.realtime.responses import ResponseLifecycle


class ReplyPlayback:
    """The client's playback of one session's replies, estimated at the session clock.

    Args:
        responses: the session's responses (the latest reply and its cursor).
        history: the session's conversation (whether the reply's item was interrupted).
        pauses: the session's paused replies (a paused reply is silent at its pause).
        heard_text: the session's calibration results (whether the client reports playback).
        clock: the session clock (ms, monotonic).
        jitter_ms: `SessionConfig.jitter_ms` (the real-time estimate's initial lead).
        ack_timeout_ms: `SessionConfig.ack_timeout_ms` (after this long past its last sent
            audio with no ACK, an ended reply counts as played out).

    Attributes:
        input_clock: where the input timeline sits on the clock (`InputClock`; fed by
            `position_ms`).
    """

    def __init__(self, responses: ResponseLifecycle, history: ConversationHistory,
                 pauses: ReplyPauses, heard_text: HeardTextStore, clock: Callable[[], float],
                 jitter_ms: int, ack_timeout_ms: int) -> None:
        self._responses = responses
        self._history = history
        self._pauses = pauses
        self._heard_text = heard_text
        self._clock = clock
        self._jitter_ms = jitter_ms
        self._ack_timeout_ms = ack_timeout_ms
        self.input_clock = InputClock()

    def playback_unreported(self) -> bool:
        """True once the client is known not to report playback
        (`HeardTextStore.playback_unreported` at the session clock)."""
        return self._heard_text.playback_unreported(self._clock())

    def is_playing(self, response: ResponseState) -> bool:
        """True while `response` is the latest reply and `assistant_playing`."""
        return response is self._responses.latest() and self.assistant_playing()

    def assistant_playing(self) -> bool:
        """True while the latest reply is generating or has audio the client has not played
        (an ended reply counts as played out `ack_timeout_ms` after its last audio would have
        played in real time)."""
        response = self._responses.latest()
        if response is None or response.cursor.fully_played:
            return False
        if response.first_send_ms is not None and not response.active:
            playback_end = response.first_send_ms + response.cursor.sent_ms
            if self._clock() > playback_end + self._ack_timeout_ms:
                return False
        item = self._history.get(response.item_id)
        return response.active or (
            item is not None and not item.interrupted and response.cursor.unplayed_ms > 0
        )

    def playing_unpaused(self) -> bool:
        """`assistant_playing`, except while the reply is paused (the client is silent)."""
        return self._pauses.current is None and self.assistant_playing()

    def position_ms(self, audio_end_ms: int) -> tuple[str, int] | None:
        """(response id, ms into its audio) of the latest reply's audio estimated to be playing
        when the client's microphone captured the end of an append arriving now, whose audio
        ends at `audio_end_ms` on the input timeline: in audio time
        (`ResponseState.played_at_audio_ms`, after placing the ACKs read before this append,
        `AckAnchors.place`). None before any of the reply was sent, and once it stopped
        playing (`assistant_playing`) more than `ECHO_TAIL_MS` after its last ACK.

        Network and capture latencies are not known here: the echo detector searches a lag
        range around this estimate (`server.listening.mic_timeline.LAG_RANGE_MS`). Their
        jitter is taken out: the echo detector maps every microphone frame by its own
        position, and neither appends that a stalled client sent in one burst (300-450 ms
        late, measured on a loaded machine) nor appends and ACKs this server read late and in
        bursts (its event loop stalled) move a position, as both are placed by the audio the
        client sent. The tail after playback ended is there because the microphone hears the
        end of the reply that much later.
        """
        now_ms = self._clock()
        self.input_clock.arrived(now_ms, audio_end_ms)
        delay_ms, least_delay_ms = self.input_clock.delay_ms, self.input_clock.least_delay_ms
        assert delay_ms is not None and least_delay_ms is not None  # an append just arrived
        response = self._responses.latest()
        if response is None or response.first_send_ms is None:
            return None
        response.anchors.place(audio_end_ms, delay_ms)
        pause = self._pauses.current
        if pause is not None and pause.response_id == response.id:
            if now_ms - pause.started_ms > ECHO_TAIL_MS:
                return None
            return response.id, pause.audio_end_ms
        if not self.assistant_playing() and (
                response.last_ack_ms is None or now_ms - response.last_ack_ms > ECHO_TAIL_MS):
            return None
        return response.id, response.played_at_audio_ms(audio_end_ms, delay_ms, least_delay_ms,
                                                         self._jitter_ms)
