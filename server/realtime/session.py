"""The sans-I/O duplex session: items, responses, epochs, playback cursors and history.

Events in (client frames, generation output, clock readings), events out (`take_events`) and
effects out (`take_effects`: start or cancel a generation, wake the sender). No sockets, no sleeps,
no tasks: the asyncio layer in `server.connection` drives it. Rules follow PROTOCOL.md and
REFERENCE.md sections 1.3, 2 and 4: one terminal per response; no audio of a response after its
cancellation; ACKs are per response and stay admissible after a newer response started; caps only
tighten; history holds only what the listener heard (`server.realtime.history.heard_text_for`).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from calibration.history_calibration import CalibrationView, HeardCut
from calibration.word_marks import WordMark
from server.listening.echo import ECHO_TAIL_MS
from server.listening.input_audio import InputAudioBuffer
from server.listening.server_vad_settings import (
    SPEECH_DETECTION_LATENCY_MS,
    UTTERANCE_TAIL_MS,
    TurnDetection,
)
from server.realtime import protocol
from server.realtime.effects import (
    CancelGeneration,
    DetectSpeech,
    DiscardTranscription,
    Effect,
    PrepareTranscription,
    StartGeneration,
    Transcribe,
    WakeSender,
)
from server.realtime.history import ConversationHistory, HeardPrefix, HistoryItem, heard_text_for
from server.realtime.response_state import QueuedAudio, QueuedTranscript, ResponseState
from server.responders.prompt import DEFAULT_INTERRUPTION_NOTE, ConversationTurn, Prompt

if TYPE_CHECKING:
    from calibration.history_calibration import HistoryCalibration

DEFAULT_INSTRUCTIONS = "You are a friendly voice assistant. Keep answers spoken and clear."


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """Per-session settings (all server-owned; `session.update` may change instructions only).

    Attributes:
        instructions: system instructions given to the responder.
        voice: voice name reported in `session.created`.
        sample_rate_hz: output PCM16 rate (24000, the OpenAI Realtime rate).
        lead_ms: how far audio may be sent ahead of the client's latest ACK.
        jitter_ms: initial jitter buffer: extra lead allowed before the first ACK.
        frame_ms: audio per `response.output_audio.delta`.
        ack_timeout_ms: with no ACK for this long, pacing falls back to real time.
        interruption_note: template told to the responder after an interrupted turn.
        input_audio_max_bytes: bound on buffered microphone audio.
    """

    instructions: str = DEFAULT_INSTRUCTIONS
    voice: str = "joe"
    sample_rate_hz: int = protocol.OUTPUT_SAMPLE_RATE_HZ
    lead_ms: int = 400
    jitter_ms: int = 100
    frame_ms: int = 100
    ack_timeout_ms: int = 1000
    interruption_note: str = DEFAULT_INTERRUPTION_NOTE
    input_audio_max_bytes: int = 24000 * 2 * 600


class Session:
    """One duplex session (one WebSocket connection). Sans-I/O.

    Args:
        config: session settings.
        session_id: id reported in `session.created`.
    """

    def __init__(self, config: SessionConfig | None = None, *, session_id: str = "sess_1") -> None:
        self.config = config or SessionConfig()
        self.id = session_id
        self.instructions = self.config.instructions
        self.history = ConversationHistory()
        self.responses: dict[str, ResponseState] = {}
        self.current_response_id: str | None = None
        self.epoch = 0
        self.closed = False
        self.calibration: HistoryCalibration | None = None
        self.input_audio = InputAudioBuffer(self.config.sample_rate_hz,
                                            self.config.input_audio_max_bytes)
        self.turn_detection: TurnDetection | None = None
        self._speech_item: tuple[str, int] | None = None
        self._prepared: tuple[str, bytes] | None = None
        self._pending_transcripts: set[str] = set()
        self._events: list[dict[str, Any]] = []
        self._effects: list[Effect] = []
        self._seq = 0
        self._ids = 0
        self._announced: dict[str, tuple[str, str, bool]] = {}
        self._response_instructions: dict[str, str] = {}
        self._clock_ms = 0.0

    # ------------------------------------------------------------------ outputs

    def take_events(self) -> list[dict[str, Any]]:
        """Return and clear the server events produced so far (in order)."""
        events, self._events = self._events, []
        return events

    def take_effects(self) -> list[Effect]:
        """Return and clear the effects produced so far (in order)."""
        effects, self._effects = self._effects, []
        return effects

    def _emit(self, event_type: str, **fields: Any) -> None:
        self._seq += 1
        self._events.append({"type": event_type, "event_id": f"event_{self._seq:06d}", **fields})

    def _error(self, exc: protocol.ProtocolError) -> None:
        self._emit(
            "error",
            error={
                "type": "invalid_request_error",
                "code": exc.code,
                "message": exc.message,
                "param": exc.param,
                "event_id": exc.event_id,
            },
        )

    def _new_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}_{self._ids:04d}"

    # ------------------------------------------------------------------ session

    def session_wire(self) -> dict[str, Any]:
        """The session object of `session.created` / `session.updated`."""
        audio_format = {"type": "audio/pcm", "rate": self.config.sample_rate_hz}
        return {
            "type": "realtime",
            "id": self.id,
            "object": "realtime.session",
            "model": "duplex-demo",
            "instructions": self.instructions,
            "output_modalities": ["audio"],
            "audio": {
                "input": {"format": audio_format,
                          "turn_detection": self._turn_detection_wire()},
                "output": {"format": audio_format, "voice": self.config.voice, "speed": 1.0},
            },
        }

    def _turn_detection_wire(self) -> dict[str, Any] | None:
        detection = self.turn_detection
        if detection is None:
            return None
        return {"type": "server_vad", "threshold": detection.threshold,
                "prefix_padding_ms": detection.prefix_padding_ms,
                "silence_duration_ms": detection.silence_duration_ms,
                "create_response": detection.create_response,
                "interrupt_response": detection.interrupt_response}

    def open(self) -> None:
        """Emit `session.created`; call once when the connection opens."""
        self._emit("session.created", session=self.session_wire())

    def close(self) -> None:
        """Mark the session closed: generation is cancelled, calibration stops."""
        self.closed = True
        for response in self.responses.values():
            if response.active:
                self._effects.append(CancelGeneration(response.id))
        if self.calibration is not None:
            self.calibration.close()

    # ------------------------------------------------------------------ client events

    def receive(self, frame: str | bytes) -> None:
        """Apply one client frame; bad input yields an `error` event and changes nothing."""
        try:
            event = protocol.parse_client_event(frame)
            self._dispatch(event)
        except protocol.ProtocolError as exc:
            self._error(exc)

    def _dispatch(self, event: protocol.ClientEvent) -> None:
        match event:
            case protocol.SessionUpdate():
                self._session_update(event)
            case protocol.ItemCreate():
                self._item_create(event)
            case protocol.ResponseCreate():
                self._response_create(event)
            case protocol.ResponseCancel():
                self._response_cancel(event)
            case protocol.ItemTruncate():
                self._item_truncate(event)
            case protocol.OutputAudioBufferClear():
                self._output_clear(event)
            case protocol.ItemDelete():
                self._item_delete(event)
            case protocol.ItemRetrieve():
                self._item_retrieve(event)
            case protocol.InputAudioAppend():
                self._input_append(event)
            case protocol.InputAudioCommit():
                self._input_commit(event)
            case protocol.InputAudioClear():
                self.input_audio.clear()
                self._speech_item = None
                self._discard_prepared()
                self._emit("input_audio_buffer.cleared")
            case protocol.PlaybackAck():
                self._playback_ack(event)
            case protocol.BargeIn():
                self._barge_in(event)

    def _session_update(self, event: protocol.SessionUpdate) -> None:
        voice = event.changes.get("voice")
        if voice is not None and voice != self.config.voice:
            raise protocol.ProtocolError(
                "invalid_value", f"Voice '{voice}' is not available; this server speaks with "
                f"'{self.config.voice}'.", param="session.audio.output.voice",
                event_id=event.event_id,
            )
        if "instructions" in event.changes:
            self.instructions = event.changes["instructions"]
        if "turn_detection" in event.changes:
            self.turn_detection = event.changes["turn_detection"]
            self._speech_item = None
            self._discard_prepared()
        self._emit("session.updated", session=self.session_wire())

    def _last_item_id(self) -> str | None:
        items = list(self.history)
        return items[-1].id if items else None

    def _add_item(self, item: HistoryItem, status: str = "completed") -> None:
        previous = self._last_item_id()
        self.history.append(item)
        self._emit("conversation.item.added", previous_item_id=previous,
                   item=item.as_wire(status))
        if status == "completed":
            self._emit("conversation.item.done", previous_item_id=previous, item=item.as_wire())

    def _item_create(self, event: protocol.ItemCreate) -> None:
        item_id = event.item_id or self._new_id("item")
        if item_id in self.history:
            raise protocol.ProtocolError(
                "duplicate_item_id", f"Item '{item_id}' already exists.", param="item.id",
                event_id=event.event_id,
            )
        self._add_item(HistoryItem(id=item_id, role="user", text=event.text))

    def assistant_playing(self) -> bool:
        """True while the latest reply is generating or has audio the client has not played."""
        response = self._latest_response()
        if response is None or response.cursor.fully_played:
            return False
        if response.first_send_ms is not None and not response.active:
            playback_end = response.first_send_ms + response.cursor.sent_ms
            if self._clock_ms > playback_end + self.config.ack_timeout_ms:
                return False
        item = self.history.get(response.item_id)
        return response.active or (
            item is not None and not item.interrupted and response.cursor.unplayed_ms > 0
        )

    def _input_append(self, event: protocol.InputAudioAppend) -> None:
        try:
            position_ms = self.input_audio.append(event.pcm16)
        except OverflowError:
            raise protocol.ProtocolError(
                "input_audio_buffer_full", "The input audio buffer is full; commit or clear it.",
                param="audio", event_id=event.event_id,
            ) from None
        detection = self.turn_detection
        if detection is None:
            return
        if self._speech_item is None:
            self.input_audio.keep_last(detection.prefix_padding_ms + SPEECH_DETECTION_LATENCY_MS)
        playback = self.playback_position_ms()
        self._effects.append(DetectSpeech(
            event.pcm16, self.assistant_playing(), detection, position_ms,
            response_id=playback[0] if playback else None,
            playback_ms=playback[1] if playback else None,
        ))

    def playback_position_ms(self) -> tuple[str, int] | None:
        """(response id, ms into its audio) of the latest reply's audio estimated to be playing
        at the session clock (`set_clock`); None before any of it was sent, and once the reply
        stopped playing (`assistant_playing`) more than `ECHO_TAIL_MS` after its last ACK.

        The client's latest ACK (`played_ms`) plus the time since that ACK arrived; before the
        first ACK, the time since the first audio was sent minus the client's initial jitter
        buffer (`jitter_ms`); at least 0 and at most the audio sent (`cursor.sent_ms`). Network
        and capture latencies are not known here: the echo detector searches a lag range
        around this estimate (`server.listening.echo.LAG_RANGE_MS`). The tail after playback ended
        is there because the microphone hears the end of the reply that much later.
        """
        response = self._latest_response()
        if response is None or response.first_send_ms is None:
            return None
        if not self.assistant_playing() and (
                response.last_ack_ms is None
                or self._clock_ms - response.last_ack_ms > ECHO_TAIL_MS):
            return None
        if response.last_ack_ms is None:
            played = self._clock_ms - response.first_send_ms - self.config.jitter_ms
        else:
            played = response.cursor.played_ms + self._clock_ms - response.last_ack_ms
        return response.id, int(min(max(played, 0.0), response.cursor.sent_ms))

    def _commit_input(self, start_ms: int, end_ms: int) -> None:
        """Turn input audio [start_ms, end_ms) into a user item awaiting its transcript."""
        pcm16 = self.input_audio.take(start_ms, end_ms)
        item_id = self._speech_item[0] if self._speech_item else self._new_id("item")
        prepared = self._prepared == (item_id, pcm16)
        self._prepared = None
        item = HistoryItem(id=item_id, role="user", text="", content_type="input_audio")
        self._emit("input_audio_buffer.committed", item_id=item.id,
                   previous_item_id=self._last_item_id())
        self._add_item(item, status="in_progress")
        self._pending_transcripts.add(item.id)
        self._effects.append(Transcribe(item.id, pcm16, prepared=prepared))

    def _input_commit(self, event: protocol.InputAudioCommit) -> None:
        if not self.input_audio:
            raise protocol.ProtocolError(
                "input_audio_buffer_commit_empty", "The input audio buffer is empty.",
                event_id=event.event_id,
            )
        self._speech_item = None
        self._commit_input(self.input_audio.start_ms, self.input_audio.end_ms)

    def on_speech_started(self, audio_start_ms: int) -> None:
        """Server VAD heard speech begin at `audio_start_ms` (ms of input audio).

        Announces `input_audio_buffer.speech_started`; with `interrupt_response`, a reply still
        playing is interrupted at the client's latest ACK (a soft cut: the client's final ACK
        may still refine it) and the client is told to clear its queued audio.
        """
        detection = self.turn_detection
        if detection is None or self._speech_item is not None:
            return
        item_id = self._new_id("item")
        self._speech_item = (item_id, audio_start_ms)
        self._emit("input_audio_buffer.speech_started", audio_start_ms=audio_start_ms,
                   item_id=item_id)
        response = self._latest_response()
        if detection.interrupt_response and response is not None and self.assistant_playing():
            self._cancel_generation(response, "turn_detected")
            self._emit("output_audio_buffer.cleared", response_id=response.id)
            self._mark_interrupted(response)

    def on_speech_paused(self, audio_end_ms: int) -> None:
        """Server VAD heard `UTTERANCE_TAIL_MS` of silence after speech ending at `audio_end_ms`
        (ms of input audio): the turn may be over.

        Emits `PrepareTranscription` of exactly the audio `on_speech_stopped(audio_end_ms)`
        would commit, so transcription overlaps the rest of the silence; the commit claims it
        (`Transcribe.prepared`) only when its audio is byte-identical. No event is announced.
        When speech resumes, a later pause prepares again (replacing this one) or the stop
        commits different audio: one transcription wasted per resumed pause.
        """
        if self.turn_detection is None or self._speech_item is None:
            return
        item_id, start_ms = self._speech_item
        pcm16 = self.input_audio.peek(start_ms, min(audio_end_ms + UTTERANCE_TAIL_MS,
                                                    self.input_audio.end_ms))
        self._prepared = (item_id, pcm16)
        self._effects.append(PrepareTranscription(item_id, pcm16))

    def _discard_prepared(self) -> None:
        """Drop the prepared transcription of a turn that will not be committed."""
        if self._prepared is not None:
            self._effects.append(DiscardTranscription(self._prepared[0]))
            self._prepared = None

    def on_speech_stopped(self, audio_end_ms: int) -> None:
        """Server VAD heard the utterance end at `audio_end_ms`: commit it for transcription."""
        if self.turn_detection is None or self._speech_item is None:
            return
        item_id, start_ms = self._speech_item
        self._emit("input_audio_buffer.speech_stopped", audio_end_ms=audio_end_ms,
                   item_id=item_id)
        self._commit_input(start_ms, min(audio_end_ms + UTTERANCE_TAIL_MS,
                                         self.input_audio.end_ms))
        self._speech_item = None

    def on_transcription(self, item_id: str, transcript: str) -> None:
        """The transcript of a committed utterance is ready.

        An utterance with no words (noise, a cough) is deleted instead of becoming a user turn.
        Otherwise the item gets its transcript and, under server VAD with `create_response`,
        a response starts when none is active.
        """
        self._pending_transcripts.discard(item_id)
        item = self.history.get(item_id)
        if item is None:
            return
        if not any(ch.isalnum() for ch in transcript):
            self.history.delete(item_id)
            self._emit("conversation.item.deleted", item_id=item_id)
            return
        item.text = transcript.strip()
        self._emit("conversation.item.input_audio_transcription.completed", item_id=item_id,
                   content_index=0, transcript=item.text)
        self._emit("conversation.item.done", previous_item_id=self.history.previous_id(item_id),
                   item=item.as_wire())
        detection = self.turn_detection
        if detection is not None and detection.create_response and (
            self._active_response() is None
        ):
            self._start_response(None)

    def pending_transcripts(self) -> bool:
        """True while a committed utterance still waits for its transcript."""
        return bool(self._pending_transcripts)

    # ------------------------------------------------------------------ responses

    def _active_response(self) -> ResponseState | None:
        response = self.responses.get(self.current_response_id or "")
        return response if response is not None and response.active else None

    def _response_wire(self, response: ResponseState) -> dict[str, Any]:
        item = self.history.get(response.item_id)
        wire: dict[str, Any] = {
            "id": response.id,
            "object": "realtime.response",
            "status": response.status,
            "output_modalities": ["audio"],
            "conversation_id": self.id,
            "output": [item.as_wire(self._item_status(response))] if item else [],
            "audio": {"output": {"format": {"type": "audio/pcm",
                                            "rate": self.config.sample_rate_hz},
                                 "voice": self.config.voice}},
        }
        if response.status != "in_progress":
            details: dict[str, Any] = {"type": response.status}
            if response.status_reason:
                details["reason"] = response.status_reason
            if response.error_message:
                details["error"] = {"type": "server_error", "message": response.error_message}
            wire["status_details"] = details
        return wire

    @staticmethod
    def _item_status(response: ResponseState) -> str:
        if response.status == "in_progress":
            return "in_progress"
        return "completed" if response.status == "completed" else "incomplete"

    def _response_create(self, event: protocol.ResponseCreate) -> None:
        if self._active_response() is not None:
            raise protocol.ProtocolError(
                "conversation_already_has_active_response",
                f"Response '{self.current_response_id}' is still in progress; cancel it first.",
                event_id=event.event_id,
            )
        self._start_response(event.instructions)

    def _start_response(self, instructions: str | None) -> None:
        previous = self._latest_response()
        if previous is not None and not previous.cursor.fully_played:
            self._mark_interrupted(previous)
        response = ResponseState(id=self._new_id("resp"), item_id=self._new_id("item"),
                                 epoch=self.epoch)
        self.responses[response.id] = response
        self.current_response_id = response.id
        item = HistoryItem(id=response.item_id, role="assistant", text="",
                           response_id=response.id, content_type="output_audio")
        self._emit("response.created", response=self._response_wire(response))
        self._add_item(item, status="in_progress")
        self._emit("response.output_item.added", response_id=response.id, output_index=0,
                   item=item.as_wire("in_progress"))
        self._emit("response.content_part.added", response_id=response.id, item_id=item.id,
                   output_index=0, content_index=0, part={"type": "audio", "transcript": ""})
        if instructions is not None:
            self._response_instructions[response.id] = instructions
        self._effects.append(StartGeneration(response.id))

    def build_prompt(self, response_id: str) -> Prompt | None:
        """The responder's prompt for `response_id`: history before its item, as heard.

        Returns None when the response is no longer active (it was cancelled while waiting).
        User turns are verbatim; assistant turns carry the heard text, the full text and whether
        they were interrupted (the responder adds the interruption note).
        """
        response = self.responses.get(response_id)
        if response is None or not response.active:
            return None
        turns = []
        for item in self.history.before(response.item_id):
            if item.role == "user":
                turns.append(ConversationTurn(role="user", text=item.text))
            else:
                turns.append(ConversationTurn(role="assistant", text=item.text,
                                              full_text=item.full_text,
                                              interrupted=item.interrupted))
        return Prompt(
            instructions=self._response_instructions.get(response_id, self.instructions),
            turns=tuple(turns),
            interruption_note=self.config.interruption_note,
        )

    # ------------------------------------------------------------------ generation output

    def _generating(self, response_id: str, epoch: int | None = None) -> ResponseState | None:
        response = self.responses.get(response_id)
        if response is None or not response.active or response.generation_ended:
            return None
        if epoch is not None and epoch != response.epoch:
            return None
        return response

    def on_text(self, response_id: str, delta: str) -> bool:
        """Append responder text to the reply; False when the response no longer generates."""
        response = self._generating(response_id)
        if response is None:
            return False
        response.text += delta
        item = self.history.get(response.item_id)
        if item is not None:
            item.full_text = response.text
        return True

    def on_speech(
        self, response_id: str, text_end: int, pcm16: bytes, marks: list[WordMark]
    ) -> bool:
        """Queue the transcript up to `text_end` and one synthesized chunk of audio.

        Args:
            response_id: the response the chunk belongs to.
            text_end: code-point end (in the reply text) of the segment this chunk speaks.
            pcm16: PCM16 LE mono at the session's output rate (may be empty).
            marks: the chunk's word marks relative to the chunk start and to the reply text's
                start (char offsets already shifted by the segment's start).

        Returns:
            False (and nothing is queued) when the response was cancelled, ended or is unknown:
            late output of a cancelled response is dropped.
        """
        response = self._generating(response_id)
        if response is None:
            return False
        if text_end > response.queued_text_end:
            response.queue.append(QueuedTranscript(response.text[response.queued_text_end:text_end]))
            response.queued_text_end = text_end
        samples = len(pcm16) // 2
        if samples:
            offset_ms = response.generated_samples * 1000 // self.config.sample_rate_hz
            placed = [mark.shifted(0, offset_ms) for mark in marks]
            response.marks.extend(placed)
            wire_marks = [mark.to_wire(response.text) for mark in placed]
            frame_bytes = self.config.sample_rate_hz * self.config.frame_ms // 1000 * 2
            for start in range(0, len(pcm16), frame_bytes):
                frame = pcm16[start:start + frame_bytes]
                response.queue.append(QueuedAudio(frame, len(frame) // 2,
                                                   wire_marks if start == 0 else None))
            response.generated_samples += samples
            response.cursor.generated_ms = (
                response.generated_samples * 1000 // self.config.sample_rate_hz
            )
            if self.calibration is not None:
                pcm_f32 = _pcm16_to_f32le(pcm16)
                self.calibration.record(response.id, {
                    "pcm_f32le": pcm_f32, "sample_rate_hz": self.config.sample_rate_hz,
                    "marks": placed,
                })
        self._effects.append(WakeSender())
        return True

    def on_generation_done(self, response_id: str) -> None:
        """The responder and TTS finished the whole reply: the audio is complete."""
        response = self._generating(response_id)
        if response is None:
            return
        if response.queued_text_end < len(response.text):
            response.queue.append(QueuedTranscript(response.text[response.queued_text_end:]))
            response.queued_text_end = len(response.text)
        response.generation_ended = True
        response.cursor.audio_complete = True
        self._effects.append(WakeSender())

    def on_generation_failed(self, response_id: str, message: str) -> None:
        """Generation raised: end the response as failed; history keeps what was heard."""
        response = self._generating(response_id)
        if response is None:
            return
        response.generation_ended = True
        response.queue.clear()
        response.error_message = message
        self._finish(response, "failed", None)
        self._mark_interrupted(response)

    # ------------------------------------------------------------------ pacing

    def pull_outbound(self, now_ms: float) -> float | None:
        """Move sendable outputs of the current response to the event list.

        Pacing: audio may run at most `lead_ms` (+ `jitter_ms`) ahead of the client's latest ACK
        for this response; with no ACK for `ack_timeout_ms`, the played position is estimated
        from real time since the first audio was sent (so a client that never ACKs still gets
        the whole reply). When the queue is drained and generation ended, the terminal events are
        emitted (exactly once).

        Args:
            now_ms: a monotonic clock reading in ms.

        Returns:
            The clock reading (ms) at which more audio becomes sendable by the real-time
            fallback, or None when only an ACK, new output or a cancel can unblock it.
        """
        response = self.responses.get(self.current_response_id or "")
        if response is None or not response.active:
            return None
        rate = self.config.sample_rate_hz
        while response.queue:
            head = response.queue[0]
            if isinstance(head, QueuedAudio):
                config = self.config
                budget = response.send_budget_ms(now_ms, config.lead_ms, config.jitter_ms,
                                                 config.ack_timeout_ms)
                sent_ms = response.sent_samples * 1000 / rate
                if sent_ms >= budget:
                    return response.fallback_deadline_ms(sent_ms, config.lead_ms,
                                                         config.ack_timeout_ms)
                if response.first_send_ms is None:
                    response.first_send_ms = now_ms
                response.queue.popleft()
                response.sent_samples += head.samples
                response.cursor.sent_ms = response.sent_samples * 1000 // rate
                fields: dict[str, Any] = {
                    "response_id": response.id, "item_id": response.item_id,
                    "output_index": 0, "content_index": 0,
                    "delta": base64.b64encode(head.pcm16).decode("ascii"),
                    "audio_end_ms": response.cursor.sent_ms,
                }
                if head.marks is not None:
                    fields["marks"] = head.marks
                self._emit("response.output_audio.delta", **fields)
            else:
                response.queue.popleft()
                response.sent_text_end += len(head.text)
                self._emit("response.output_audio_transcript.delta", response_id=response.id,
                           item_id=response.item_id, output_index=0, content_index=0,
                           delta=head.text)
        if response.generation_ended:
            self._finish(response, "completed", None)
        return None

    def _finish(self, response: ResponseState, status: str, reason: str | None) -> None:
        """Emit the terminal sequence of a response (once) and end it."""
        if not response.active:
            return
        response.status = status
        response.status_reason = reason
        response.queue.clear()
        if self.current_response_id == response.id:
            self.current_response_id = None
        item = self.history.get(response.item_id)
        common = {"response_id": response.id, "item_id": response.item_id,
                  "output_index": 0, "content_index": 0}
        self._emit("response.output_audio.done", **common)
        sent_text = response.text[:response.sent_text_end]
        self._emit("response.output_audio_transcript.done", **common, transcript=sent_text)
        self._emit("response.content_part.done", **common,
                   part={"type": "audio", "transcript": sent_text})
        if item is not None:
            self._refresh_history(response)
            wire = item.as_wire(self._item_status(response))
            self._emit("response.output_item.done", response_id=response.id, output_index=0,
                       item=wire)
            self._emit("conversation.item.done",
                       previous_item_id=self.history.previous_id(item.id), item=wire)
        self._emit("response.done", response=self._response_wire(response))
        self._effects.append(WakeSender())

    # ------------------------------------------------------------------ interruptions

    def _resolve(
        self, response_id: str | None, item_id: str | None, event_id: str | None
    ) -> ResponseState:
        """Find the response an event names (response_id and/or item_id); errors otherwise."""
        response = None
        if response_id is not None:
            response = self.responses.get(response_id)
            if response is None:
                raise protocol.ProtocolError(
                    "response_not_found", f"Unknown response '{response_id}'.",
                    param="response_id", event_id=event_id,
                )
        if item_id is not None:
            by_item = next((r for r in self.responses.values() if r.item_id == item_id), None)
            if by_item is None or item_id not in self.history:
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

    def _latest_response(self) -> ResponseState | None:
        return next(reversed(self.responses.values()), None)

    def _cancel_generation(self, response: ResponseState, reason: str) -> None:
        """Stop generating and sending `response`; emit its cancelled terminal sequence."""
        if not response.active:
            return
        if not response.generation_ended:
            response.generation_ended = True
            self._effects.append(CancelGeneration(response.id))
        self.epoch += 1
        self._finish(response, "cancelled", reason)

    def _mark_interrupted(self, response: ResponseState) -> None:
        item = self.history.get(response.item_id)
        if item is not None and not response.cursor.fully_played:
            item.interrupted = True
        self._refresh_history(response)
        self._request_calibration()

    def _barge_in(self, event: protocol.BargeIn) -> None:
        if event.response_id is None and event.item_id is None:
            response = self._active_response() or self._latest_response()
            if response is None:
                raise protocol.ProtocolError(
                    "response_not_found", "There is no response to interrupt.",
                    event_id=event.event_id,
                )
        else:
            response = self._resolve(event.response_id, event.item_id, event.event_id)
        if response.cursor.fully_played:
            return
        reason = "turn_detected" if event.source == "vad" else "client_cancelled"
        self._cancel_generation(response, reason)
        self._cap(response, event.audio_end_ms)

    def _cap(self, response: ResponseState, audio_end_ms: int) -> None:
        """Apply a permanent cap (ms), acknowledge it with `conversation.item.truncated` and
        treat the reply as interrupted (its heard text is recalibrated)."""
        cap = response.cursor.truncate(audio_end_ms)
        if response.item_id in self.history:
            self._emit("conversation.item.truncated", item_id=response.item_id,
                       content_index=0, audio_end_ms=cap)
        self._mark_interrupted(response)

    def _response_cancel(self, event: protocol.ResponseCancel) -> None:
        if event.response_id is not None:
            response = self._resolve(event.response_id, None, event.event_id)
        else:
            response = self._active_response()
        if response is None or not response.active:
            raise protocol.ProtocolError(
                "response_cancel_not_active", "There is no active response to cancel.",
                event_id=event.event_id,
            )
        self._cancel_generation(response, "client_cancelled")
        self._mark_interrupted(response)

    def _item_truncate(self, event: protocol.ItemTruncate) -> None:
        response = self._resolve(None, event.item_id, event.event_id)
        if event.audio_end_ms > response.cursor.total_ms:
            raise protocol.ProtocolError(
                "invalid_value",
                f"audio_end_ms {event.audio_end_ms} is beyond the item's audio "
                f"({response.cursor.total_ms} ms).", param="audio_end_ms",
                event_id=event.event_id,
            )
        if response.cursor.fully_played:
            self._emit("conversation.item.truncated", item_id=event.item_id, content_index=0,
                       audio_end_ms=response.cursor.cutoff_ms)
            return
        self._cap(response, event.audio_end_ms)

    def _output_clear(self, event: protocol.OutputAudioBufferClear) -> None:
        if event.response_id is not None:
            response = self._resolve(event.response_id, None, event.event_id)
        else:
            response = self._latest_response()
        if response is None:
            raise protocol.ProtocolError(
                "response_not_found", "There is no output audio to clear.",
                event_id=event.event_id,
            )
        self._emit("output_audio_buffer.cleared", response_id=response.id)
        if response is not self._latest_response() or response.cursor.fully_played:
            return
        self._cancel_generation(response, "client_cancelled")
        self._mark_interrupted(response)

    def _playback_ack(self, event: protocol.PlaybackAck) -> None:
        response = self._resolve(event.response_id, event.item_id, event.event_id)
        response.last_ack_ms = self._clock_ms
        cursor = response.cursor
        was_fully_played = cursor.fully_played
        cursor.acknowledge(event.played_ms)
        if event.truncate and not was_fully_played:
            cursor.truncate(event.played_ms)
        self._emit("playback.acknowledged", response_id=response.id, item_id=response.item_id,
                   played_ms=cursor.played_ms, cursor=cursor.as_wire())
        item = self.history.get(response.item_id)
        interrupted = item is not None and item.interrupted
        superseded = response is not self._latest_response()
        playback_over = cursor.unplayed_ms == 0 or superseded or interrupted
        if (event.truncate and not was_fully_played) or (
            response.generation_ended and playback_over
        ):
            self._mark_interrupted(response)
        else:
            self._refresh_history(response)
        if self.calibration is not None:
            self.calibration.release_confirmed()
        self._effects.append(WakeSender())

    def set_clock(self, now_ms: float) -> None:
        """Tell the session the current monotonic time (ms) before feeding it an ACK."""
        self._clock_ms = now_ms

    def _request_calibration(self) -> None:
        if self.calibration is not None:
            self.calibration.request_ready()

    # ------------------------------------------------------------------ items

    def _item_delete(self, event: protocol.ItemDelete) -> None:
        item = self.history.get(event.item_id)
        if item is None:
            raise protocol.ProtocolError(
                "item_not_found", f"No item '{event.item_id}'.", param="item_id",
                event_id=event.event_id,
            )
        if item.response_id is not None:
            response = self.responses[item.response_id]
            self._cancel_generation(response, "client_cancelled")
            if self.calibration is not None:
                self.calibration.discard(response.id)
        self.history.delete(item.id)
        self._announced.pop(item.id, None)
        self._emit("conversation.item.deleted", item_id=item.id)

    def _item_retrieve(self, event: protocol.ItemRetrieve) -> None:
        item = self.history.get(event.item_id)
        if item is None:
            raise protocol.ProtocolError(
                "item_not_found", f"No item '{event.item_id}'.", param="item_id",
                event_id=event.event_id,
            )
        status = "completed"
        if item.response_id is not None:
            status = self._item_status(self.responses[item.response_id])
        self._emit("conversation.item.retrieved", item=item.as_wire(status))

    # ------------------------------------------------------------------ history

    def _refresh_history(self, response: ResponseState, elapsed_ms: float | None = None) -> None:
        """Recompute the item's stored text; announce `conversation.item.heard` on change."""
        item = self.history.get(response.item_id)
        if item is None:
            return
        text, method = heard_text_for(item, response.cursor)
        item.text, item.method = text, method
        if method == "full":
            item.interrupted = False
        state = (text, method, item.interrupted)
        if state == self._announced.get(item.id) or (method == "none" and not item.interrupted):
            return
        self._announced[item.id] = state
        heard = item.heard if method not in ("none", "full") else None
        self._emit(
            "conversation.item.heard", item_id=item.id, response_id=response.id, text=text,
            full_text=item.full_text, played_ms=response.cursor.cutoff_ms, method=method,
            asr_text=heard.asr_text if heard else None,
            marks_agree=heard.marks_agree if heard else None,
            elapsed_ms=round(elapsed_ms, 1) if elapsed_ms is not None else None,
            interrupted=item.interrupted,
        )

    # ------------------------------------------------------------------ calibration session

    def calibration_view(self, response_id: str) -> CalibrationView | None:
        """What the calibration controller may know of a reply (None when unknown/deleted)."""
        response = self.responses.get(response_id)
        if response is None or response.item_id not in self.history or self.closed:
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
            playback_active=response is self._latest_response() and self.assistant_playing(),
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
        response = self.responses.get(response_id)
        if self.closed or response is None or not response.generation_ended:
            return False
        item = self.history.get(response.item_id)
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
        response = self.responses.get(response_id)
        item = self.history.get(response.item_id) if response is not None else None
        heard = item.heard if item is not None else None
        if response is None or heard is None or heard.source is not cut:
            return
        item.heard = replace(heard, asr_text=asr_text, marks_agree=marks_agree)
        self._announced.pop(item.id, None)
        self._refresh_history(response)

    def announce_calibration(self, response_id: str, elapsed_ms: float) -> None:
        """After `apply_heard_text` succeeded: re-derive and announce the item's heard text."""
        response = self.responses.get(response_id)
        if response is not None:
            self._announced.pop(response.item_id, None)
            self._refresh_history(response, elapsed_ms)


def _pcm16_to_f32le(pcm16: bytes) -> bytes:
    """PCM16 LE bytes -> float32 LE bytes in [-1, 1)."""
    return (np.frombuffer(pcm16, dtype="<i2").astype("<f4") / 32768.0).tobytes()
