"""One response's state: status, playback cursor, text and its paced outbound queue.

Sans-I/O: plain data plus the arithmetic of its outputs: queueing synthesized speech as paced
frames (`queue_speech`), releasing what pacing allows (`pop_sendable`, `send_budget_ms`) and
its wire shape (`as_wire`); the session decides, the asyncio driver sends.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from calibration.word_marks import WordMark
from server.realtime.ack_anchors import AckAnchors
from server.realtime.modalities import AUDIO
from server.realtime.playback import PlaybackCursor
from server.responders.tools import ToolCall

SEND_HISTORY_MS = 5000.0
"""How long the sends that bound the playing position are kept (ms of clock): longer than the
window of the input delay (`server.realtime.arrival.LATENESS_WINDOW_MS`), so a position
estimated back to an append's capture finds the sends before it."""


@dataclass(slots=True)
class QueuedTranscript:
    """Transcript text waiting to be sent, ahead of the audio that speaks it."""

    text: str


@dataclass(slots=True)
class QueuedAudio:
    """One audio frame let out by pacing: PCM16 bytes, its sample count, and the wire marks of
    the TTS chunk it starts (None for the chunk's later frames)."""

    pcm16: bytes
    samples: int
    marks: list[dict[str, object]] | None


@dataclass(slots=True)
class QueuedSpeech:
    """One synthesized chunk waiting for pacing, sent as frames of `frame_bytes` (the last may
    be shorter) from `offset` on; the first frame carries the chunk's wire marks.

    One queue entry per chunk, not per frame: the frames are cut as they are sent
    (`take_frame`), so the seconds of audio a reply holds queued (`GENERATION_AHEAD_MS` in
    `server.connection`) are a few objects, not one per 100 ms. Objects that live that long
    outlast two collections of the cyclic garbage collector and count towards its next full
    collection, which pauses the event loop for every session (measured under
    `benchmarks.bench_load`, 200 sessions: about 15,000 queued frames alive, a full
    collection every 15-20 s taking 30-110 ms)."""

    pcm16: bytes
    frame_bytes: int
    marks: list[dict[str, object]] | None
    offset: int = 0

    def take_frame(self) -> QueuedAudio:
        """The next frame; `offset` moves past it."""
        start = self.offset
        frame = self.pcm16[start:start + self.frame_bytes]
        self.offset = start + len(frame)
        return QueuedAudio(frame, len(frame) // 2, self.marks if start == 0 else None)

    @property
    def taken(self) -> bool:
        """True once every frame was taken."""
        return self.offset >= len(self.pcm16)


@dataclass(slots=True)
class ResponseState:
    """One response: its item, status, cursor, text and the outputs still waiting to be sent.

    Attributes:
        id, item_id: response and assistant item ids.
        epoch: session epoch when the response started.
        status: "in_progress" | "completed" | "cancelled" | "failed".
        cursor: the playback cursor (ms).
        text: the full text generated so far (the history item's `full_text`).
        queued_text_end, sent_text_end: how much of `text` was queued / sent as transcript
            deltas; `response.output_audio_transcript.done` carries exactly the deltas sent.
        generation_ended: the responder/TTS stopped (finished, cancelled or failed).
        generated_samples, sent_samples: sample counts at the output rate.
        queue: transcript and audio outputs waiting for pacing.
        first_send_ms, last_ack_ms: clock readings (ms) used by pacing.
        last_progress_ms, progress_played_ms: clock reading (ms) of the last ACK that moved
            the played position forward (or the first ACK), None before any, and that
            position (ms).
        ack_lag_ms: how far this client's ACKs were found to trail what it had played (ms,
            learned in `pop_sendable`; a new reply starts from the session's previous one's).
        timeline: what `estimated_played_ms` knows from each clock reading on, for the last
            `SEND_HISTORY_MS`: (clock ms, offset, bound, sent), one at each ACK
            (`acknowledged`), resume and audio frame sent. Offset: the ACKed position minus
            the ACK's clock (None before any ACK); sent: the audio sent by then (ms of this
            reply); bound: the least, over the frames sent since the ACK, of the audio sent
            before the frame minus the clock reading at which it was sent (the client cannot
            have played further than it plus the clock reading).
        anchors: its ACKs in audio time (`AckAnchors`), for `played_at_audio_ms`.
        paused: speech over the reply paused it (`server.realtime.pauses`): nothing is sent
            and playback reports do not settle it until it resumes or is cut.
        prompted_items: the ids of the items whose text its prompt held
            (`Generation.build_prompt`), None before the prompt was built.
        metadata: `response.create`'s `response.metadata`, echoed in the response object.
        function_calls: the function calls the responder made (`ToolCall`s), in order; they
            become `function_call` items when the response completes.
        tools, tool_choice: `response.create`'s own (OpenAI's shapes), None: the session's.
        output_modalities: `modalities.AUDIO` or `modalities.TEXT` (no speech).
    """

    id: str
    item_id: str
    epoch: int
    status: str = "in_progress"
    cursor: PlaybackCursor = field(default_factory=PlaybackCursor)
    text: str = ""
    queued_text_end: int = 0
    sent_text_end: int = 0
    generation_ended: bool = False
    generated_samples: int = 0
    sent_samples: int = 0
    queue: deque[QueuedTranscript | QueuedSpeech] = field(default_factory=deque)
    first_send_ms: float | None = None
    last_ack_ms: float | None = None
    last_progress_ms: float | None = None
    ack_lag_ms: float = 0.0
    progress_played_ms: int = 0
    timeline: list[tuple[float, float | None, float, int]] = field(default_factory=list)
    anchors: AckAnchors = field(default_factory=AckAnchors)
    status_reason: str | None = None
    error_message: str | None = None
    paused: bool = False
    prompted_items: frozenset[str] | None = None
    metadata: dict[str, str] | None = None
    function_calls: list[ToolCall] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    output_modalities: tuple[str, ...] = AUDIO

    @property
    def active(self) -> bool:
        """True until the response's terminal event was produced."""
        return self.status == "in_progress"

    @property
    def item_status(self) -> str:
        """The status of the response's item: "in_progress", "completed" or "incomplete"."""
        if self.status == "in_progress":
            return "in_progress"
        return "completed" if self.status == "completed" else "incomplete"

    def as_wire(self, conversation_id: str, output: list[dict[str, object]],
                audio_output: dict[str, object]) -> dict[str, object]:
        """The OpenAI Realtime `response` object.

        Args:
            conversation_id: the session id.
            output: the wire items it produced (its assistant item, or [] once deleted).
            audio_output: the `audio.output` object (format and voice).
        """
        wire: dict[str, object] = {
            "id": self.id, "object": "realtime.response", "status": self.status,
            "output_modalities": list(self.output_modalities),
            "conversation_id": conversation_id,
            "output": output, "audio": {"output": audio_output}, "metadata": self.metadata,
        }
        if self.status != "in_progress":
            details: dict[str, object] = {"type": self.status}
            if self.status_reason:
                details["reason"] = self.status_reason
            if self.error_message:
                details["error"] = {"type": "server_error", "message": self.error_message}
            wire["status_details"] = details
        return wire

    def queue_text(self, text_end: int) -> None:
        """Queue the transcript of `text` up to code point `text_end` (once per code point)."""
        if text_end > self.queued_text_end:
            self.queue.append(QueuedTranscript(self.text[self.queued_text_end:text_end]))
            self.queued_text_end = text_end

    def queue_speech(self, pcm16: bytes, marks: list[WordMark], sample_rate_hz: int,
                     frame_ms: int) -> list[WordMark]:
        """Queue one synthesized chunk as frames of `frame_ms` and place its marks.

        Args:
            pcm16: PCM16 LE mono at `sample_rate_hz` (non-empty).
            marks: the chunk's word marks, ms relative to the chunk start.
            sample_rate_hz: the output rate.
            frame_ms: audio per queued frame (the last may be shorter).

        Returns:
            The marks shifted onto the reply timeline; the chunk's first frame carries their
            wire form (`QueuedSpeech`).
        """
        offset_ms = self.generated_samples * 1000 // sample_rate_hz
        placed = [mark.shifted(0, offset_ms) for mark in marks]
        wire_marks = [mark.to_wire(self.text) for mark in placed]
        self.queue.append(QueuedSpeech(pcm16, sample_rate_hz * frame_ms // 1000 * 2,
                                       wire_marks))
        self.generated_samples += len(pcm16) // 2
        self.cursor.generated_ms = self.generated_samples * 1000 // sample_rate_hz
        return placed

    def pop_sendable(self, now_ms: float, sample_rate_hz: int, lead_ms: int, jitter_ms: int,
                     ack_timeout_ms: int, reports_playback: bool = True
                     ) -> QueuedTranscript | QueuedAudio | float | None:
        """Take the next output pacing lets out at clock `now_ms` (ms) (`send_budget_ms`).

        Transcript text always goes; an audio frame goes while the audio sent stays within
        `send_budget_ms` (its sample count then moves the cursor's `sent_ms`). Returns the
        output, or when the head frame must wait the clock reading (ms) at which the real-time
        fallback releases it (`fallback_deadline_ms`), or None when the queue is empty or only
        an ACK can release it.
        """
        if not self.queue:
            return None
        head = self.queue[0]
        if isinstance(head, QueuedSpeech):
            sent_ms = self.sent_samples * 1000 / sample_rate_hz
            self._learn_ack_lag(now_ms, sent_ms, ack_timeout_ms, reports_playback)
            budget = self.send_budget_ms(now_ms, lead_ms, jitter_ms, ack_timeout_ms,
                                         reports_playback)
            if sent_ms >= budget:
                return self.fallback_deadline_ms(sent_ms, lead_ms, ack_timeout_ms,
                                                 reports_playback)
            if self.first_send_ms is None:
                self.first_send_ms = now_ms
            bound = self.cursor.sent_ms - now_ms
            frame = head.take_frame()
            if head.taken:
                self.queue.popleft()
            self.sent_samples += frame.samples
            self.cursor.sent_ms = self.sent_samples * 1000 // sample_rate_hz
            offset = None
            if self.timeline:
                _, offset, previous, _ = self.timeline[-1]
                bound = min(bound, previous)
            self._note(now_ms, offset, bound)
            return frame
        self.sent_text_end += len(head.text)
        return self.queue.popleft()

    def send_budget_ms(self, now_ms: float, lead_ms: int, jitter_ms: int,
                       ack_timeout_ms: int, reports_playback: bool = True) -> float:
        """How far (ms of this response's audio) may have been sent at clock `now_ms`.

        The client's latest played position plus its learned `ack_lag_ms` plus `lead_ms`;
        before the first ACK also `jitter_ms`, the client's initial jitter buffer (it starts
        playing once that much is buffered, so the first ACK needs it). A client that does not
        report playback (no `playback.ack` yet in its session, `reports_playback` False) is
        paced by real time from the first send (`estimated_played_ms`): audio flows
        continuously, `lead_ms` ahead. A reporting client whose position has not moved for
        `ack_timeout_ms` since the first audio was sent (its ACKs stopped, or repeat one
        position) falls back to the same estimate, so it still receives the whole reply.
        """
        played = float(self.cursor.played_ms) + self.ack_lag_ms
        if self.first_send_ms is not None and (
                not reports_playback or now_ms - self._still_since() >= ack_timeout_ms):
            played = max(played, now_ms - self.first_send_ms - jitter_ms)
        initial_buffer = jitter_ms if self.last_ack_ms is None else 0
        return played + lead_ms + initial_buffer

    def fallback_deadline_ms(self, sent_ms: float, lead_ms: int, ack_timeout_ms: int,
                             reports_playback: bool = True) -> float | None:
        """The clock reading (ms) at which the real-time estimate of `send_budget_ms` next lets
        audio beyond `sent_ms` out; None before any audio was sent."""
        if self.first_send_ms is None:
            return None
        by_time = self.first_send_ms + sent_ms - lead_ms
        if not reports_playback:
            return by_time + 1
        return max(self._still_since() + ack_timeout_ms, by_time) + 1

    def _still_since(self) -> float:
        """The clock reading (ms) since which the client's reported position stood still:
        its last ACK that moved it, or the first send (audio sent)."""
        assert self.first_send_ms is not None
        return max(self.first_send_ms, self.last_progress_ms or 0.0)

    def _learn_ack_lag(self, now_ms: float, sent_ms: float, ack_timeout_ms: int,
                       reports_playback: bool) -> None:
        """Audio waits while the client keeps ACKing one position for `ack_timeout_ms`: a
        client that plays in real time has played all `sent_ms` by then (its buffer is the
        lead, under a second), so its ACKs trail its playback by `sent_ms` less that position
        (an output latency it reports in: a Bluetooth headset's; measured, a tester's client
        ACKing 500 ms behind stopped the reply for good at 564 ms). `ack_lag_ms` keeps the
        largest such lag, so the lead counts from where the client really is; learning
        restarts the wait (`last_progress_ms`), so one stall teaches once."""
        if (not reports_playback or self.first_send_ms is None or self.last_ack_ms is None
                or self.last_ack_ms <= self._still_since()
                or now_ms - self._still_since() < ack_timeout_ms):
            return
        self.ack_lag_ms = max(self.ack_lag_ms, sent_ms - self.cursor.played_ms)
        self.last_progress_ms = now_ms

    def resume(self, now_ms: float, paused_ms: int) -> None:
        """Resume after a pause of `paused_ms` ending at clock `now_ms`: the real-time pacing
        estimate skips the pause (`first_send_ms` and the `timeline`'s bound move by it; a
        reported position runs from the resume on, the ACKs before it are forgotten as
        anchors) and the ACK silence timer restarts (the client played nothing while paused,
        so its silence was expected)."""
        self.paused = False
        self.anchors.clear()
        if self.timeline:
            _, offset, bound, _ = self.timeline[-1]
            self._note(now_ms, None if offset is None else self.cursor.played_ms - now_ms,
                       bound - paused_ms)
        if self.first_send_ms is not None:
            self.first_send_ms += paused_ms
        if self.last_ack_ms is not None:
            self.last_ack_ms = now_ms
            self.last_progress_ms = now_ms

    def acknowledged(self, now_ms: float, input_end_ms: float) -> None:
        """A playback ACK (already applied to the cursor) was read at clock `now_ms` (ms),
        after the microphone appends up to input position `input_end_ms` (ms): the clock
        estimate runs from then (`estimated_played_ms`: only audio sent from now on bounds
        it), and the ACK waits in `anchors` to be placed in audio time by the next append
        (`played_at_audio_ms`)."""
        if self.last_progress_ms is None or self.cursor.played_ms > self.progress_played_ms:
            self.last_progress_ms = now_ms
            self.progress_played_ms = self.cursor.played_ms
        self.last_ack_ms = now_ms
        self._note(now_ms, self.cursor.played_ms - now_ms, float("inf"))
        self.anchors.read(self.cursor.played_ms, now_ms, input_end_ms)

    def _note(self, now_ms: float, offset: float | None, bound: float) -> None:
        """Add a `timeline` entry at clock `now_ms`; forget those older than
        `SEND_HISTORY_MS` but the one in force then."""
        timeline = self.timeline
        timeline.append((now_ms, offset, bound, self.cursor.sent_ms))
        while len(timeline) > 1 and timeline[1][0] < now_ms - SEND_HISTORY_MS:
            del timeline[0]

    def estimated_played_ms(self, now_ms: float, jitter_ms: int) -> int:
        """The position (ms) of this reply's audio estimated to be playing at clock `now_ms`:
        the latest ACK plus the time since it arrived; before any ACK, the time since the first
        audio was sent minus the client's initial jitter buffer; within [0, sent_ms]; 0 before
        any audio was sent. `now_ms` may lie back (when an append was captured,
        `played_at_audio_ms`): only the audio sent by then bounds the estimate.

        At most where the audio sent since that ACK lets the client be (`timeline`;
        never before the position ACKed from the ACK's arrival on, as the client cannot ACK
        audio it was not sent): a client that played all it had waits for more, and
        plays on from the moment it comes, whatever its last ACK said. Without the bound, a
        reply whose synthesis fell behind (Piper's second sentence came 480 ms after the
        client had played the first) was estimated to play as far ahead as that wait from the
        first audio sent after it to the next ACK (ACKs every 120 ms: three appends)."""
        if self.first_send_ms is None:
            return 0
        index = bisect.bisect_right(self.timeline, now_ms, key=lambda entry: entry[0])
        _, offset, bound, sent = self.timeline[max(index - 1, 0)]
        played = now_ms - self.first_send_ms - jitter_ms if offset is None else now_ms + offset
        played = min(played, now_ms + bound, sent)
        return int(min(max(played, 0.0), self.cursor.sent_ms))

    def played_at_audio_ms(self, audio_ms: float, delay_ms: float, least_delay_ms: float,
                           jitter_ms: int) -> int:
        """The position (ms) of this reply's audio estimated to be playing when the client's
        microphone was at input position `audio_ms` (ms), in audio time: the latest ACK placed
        at or before it (`anchors`) plus the microphone audio since; before any, the clock
        estimate at `audio_ms + least_delay_ms` (`estimated_played_ms`). Within [0, sent_ms].
        An ACK that repeated the position before it (`AckAnchor.moved` False) says the client
        stood there: the position stays until an ACK shows it playing again (when the client
        hands the next audio to its player is not known here). A client whose buffer ran
        dry and whose loop stalled as more audio came hands it over hundreds of ms after the
        server sent it: taking the send (or the standing ACK) as the resume put the positions
        up to 250 ms ahead of the loudspeaker until the next ACK, and the reply's echo alone
        started turns (`tests/test_echo_stalled_loop.py`, 1 in 5 runs at load 2-4). The ACK
        that moved places the resume: the echo detector carries its position back at real
        time (`server.listening.mic_timeline.MicTimeline.playing_frames`).
        `delay_ms`, `least_delay_ms`: `server.realtime.arrival.InputClock`'s.

        No more than the audio sent by clock `audio_ms + delay_ms` and its bound let the
        client have played (`timeline`: a client that ran dry waits for more), never less
        than the ACK said. The ACK is placed by the order of events on the socket, so a
        stall of the server's event loop that reads appends and ACKs late and in bursts moves
        no position; before, an ACK read 209 ms after the append it came with was taken as
        sent when read, the positions went that far back, and the reply's echo alone started
        turns (`tests/test_echo_stalled_loop.py`). The estimate before the first ACK uses the
        least delay: a server that fell seconds behind reading placed it seconds ahead of the
        client, and the echo detector takes the loudspeaker never to go back (one position
        ahead holds every later one)."""
        anchor = self.anchors.latest_at(audio_ms)
        if anchor is None or self.first_send_ms is None:
            return self.estimated_played_ms(audio_ms + least_delay_ms, jitter_ms)
        clock_ms = audio_ms + delay_ms
        if not anchor.moved:
            return int(min(anchor.played_ms, self.cursor.sent_ms))
        index = bisect.bisect_right(self.timeline, clock_ms, key=lambda entry: entry[0])
        _, _, bound, sent = self.timeline[max(index - 1, 0)]
        played = min(anchor.played_ms + audio_ms - anchor.audio_ms, clock_ms + bound, sent)
        played = max(played, anchor.played_ms)
        return int(min(max(played, 0.0), self.cursor.sent_ms))
