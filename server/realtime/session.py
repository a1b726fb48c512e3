"""The sans-I/O duplex session: responses, epochs, playback cursors and history as heard.

Events in (client frames, generation output, VAD reports, transcripts, clock readings), events
out (`take_events`) and effects out (`take_effects`: start or cancel a generation, wake the
sender, detect speech, transcribe). No sockets, no sleeps, no tasks: the asyncio layer in
`server.connection` drives it. The person's input-audio turns live in `InputTurns`, item
operations in `ConversationItems`, paused replies and what ends their pause in `ReplyPauses`;
the session keeps the responses and the interruption rules.
Rules follow PROTOCOL.md and REFERENCE.md sections 1.3, 2 and 4: one terminal per response; no
audio of a response after its cancellation; ACKs are per response and stay admissible after a
newer response started; caps only tighten; history holds only what the listener heard
(`server.realtime.history.heard_text_for`).
"""

from __future__ import annotations

import base64
import weakref
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from calibration.history_calibration import CalibrationView
from calibration.word_marks import WordMark
from server.listening.backchannel import VOCABULARIES, Verdict
from server.listening.echo import ECHO_TAIL_MS
from server.listening.pcm16 import pcm16_to_float
from server.listening.server_vad_settings import TurnDetection
from server.realtime import modalities, protocol
from server.realtime.arrival import ArrivalLateness
from server.realtime.audio_formats import WireAudio
from server.realtime.effects import CancelGeneration, Effect, WakeSender
from server.realtime.events import EventLog
from server.realtime.extensions import ClientView
from server.realtime.heard_text import HeardTextStore
from server.realtime.history import ConversationHistory, HistoryItem
from server.realtime.input_turns import InputTurns
from server.realtime.interruption_settings import InterruptionSettings
from server.realtime.interruptions import Interruptions
from server.realtime.items import ConversationItems
from server.realtime.limits import stored_settings_error
from server.realtime.pauses import ReplyPauses
from server.realtime.prompt_turns import conversation_turns
from server.realtime.response_state import QueuedAudio, QueuedTranscript, ResponseState
from server.realtime.responses import ResponseLifecycle
from server.realtime.turn_ends import TurnEnds
from server.responders.prompt import DEFAULT_INTERRUPTION_NOTE, Prompt
from server.responders.tools import ToolCall, chat_tool_choice, chat_tools

if TYPE_CHECKING:
    from calibration.history_calibration import HistoryCalibration

DEFAULT_INSTRUCTIONS = "You are a friendly voice assistant. Keep answers spoken and clear."

OPENAI_SESSION_DEFAULTS: dict[str, Any] = {
    "noise_reduction": None, "transcription": None, "tools": [], "tool_choice": "auto",
    "tracing": None, "max_output_tokens": "inf", "prompt": None, "truncation": "auto",
}
"""OpenAI session fields this server stores and reports back, at OpenAI's defaults (as in
OpenAI's `session.created`); `session.update` replaces them (`protocol.STORED_SESSION_FIELDS`,
`noise_reduction` and `transcription`)."""


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
        max_history_items: items the conversation may hold (user and assistant); a
            `conversation.item.create`, `response.create` or `input_audio_buffer.commit` that
            would add one more is refused with `history_limit_exceeded`.
        max_history_chars: characters all items may hold (`limits.item_chars`); refused alike.
        max_turn_ms: the longest server VAD turn (`TurnDetectionConfig.max_turn_ms`): speech
            still going then is committed and the detector listens anew.
        interruption: how speech over a reply is handled (`server.realtime.pauses`); a
            session may change it with `session.update` (`session.interruption`).
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
    max_history_items: int = 500
    max_history_chars: int = 200_000
    max_turn_ms: int = 30_000
    interruption: InterruptionSettings = field(default_factory=InterruptionSettings)


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
        self.closed = False
        self.calibration: HistoryCalibration | None = None
        self._log = EventLog()
        # The parts call back into the session through a weak proxy: they belong to it, and
        # callbacks holding the session itself would put it, and all it holds, in reference
        # cycles, which only a full collection of the cyclic GC frees (on the event loop,
        # 50-250 ms at 200 sessions: benchmarks/README.md, "Load benchmark"). Each callback
        # is a lambda: a bound method taken from the proxy holds the session again.
        me = weakref.proxy(self)
        jitter_ms = self.config.jitter_ms
        self.items = ConversationItems(self.history, self._log,
                                       lambda: me.playback_unreported(),
                                       max_items=self.config.max_history_items,
                                       max_chars=self.config.max_history_chars)
        self.input_turns = InputTurns(self.config.sample_rate_hz,
                                      self.config.input_audio_max_bytes, self.items, self._log)
        self.wire_audio = WireAudio(self.config.voice, self.config.sample_rate_hz)
        self.lifecycle = ResponseLifecycle(session_id, self.wire_audio.audio_output, self.items,
                                           self._log)
        self.responses = self.lifecycle.by_id
        self.heard_text = HeardTextStore(self.lifecycle, self.items,
                                         lambda response: me._playback_active(response),
                                         lambda: me.closed, self.config.ack_timeout_ms)
        self.interruptions = Interruptions(
            self.lifecycle, self.heard_text, self.items, self._log, lambda: me.calibration,
            lambda response: response.estimated_played_ms(me._clock_ms, jitter_ms))
        self.pauses = ReplyPauses(self.lifecycle, self.input_turns, self.interruptions,
                                  self._log, self.config.sample_rate_hz,
                                  self.config.interruption, lambda: me._clock_ms)
        self._clock_ms = 0.0
        self._arrival = ArrivalLateness()
        self.turn_ends = TurnEnds(self.input_turns, self.lifecycle, self._log,
                                  lambda: me._start_response(None))
        self.stored: dict[str, Any] = dict(OPENAI_SESSION_DEFAULTS)
        self.output_modalities = modalities.AUDIO
        self.client_view = ClientView(lambda: me.items.reports_playback,
                                      lambda: me.calibration is not None)

    def take_events(self) -> list[dict[str, Any]]:
        """Return and clear the server events produced so far (in order)."""
        return self._log.take_events()

    def client_events(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Of `events` (from `take_events`), those the client receives: extension events only
        once it opted in (`server.realtime.extensions.ClientView`)."""
        return self.client_view.visible(events)

    def refuse(self, error: protocol.ProtocolError) -> None:
        """Emit `error` for a client frame refused before it reached the session (the I/O
        layer's event rate limit), in sequence with the session's other events."""
        self._log.error(error)

    def take_effects(self) -> list[Effect]:
        """Return and clear the effects produced so far (in order)."""
        return self._log.take_effects()

    @property
    def epoch(self) -> int:
        """Incremented by every cancelled generation."""
        return self.lifecycle.epoch

    @property
    def current_response_id(self) -> str | None:
        """The response being generated or sent, None between responses."""
        return self.lifecycle.current_id

    @property
    def turn_detection(self) -> TurnDetection | None:
        """The `server_vad` settings in force, None without server VAD."""
        return self.input_turns.turn_detection

    # ------------------------------------------------------------------ session

    def session_wire(self) -> dict[str, Any]:
        """The session object of `session.created` / `session.updated`."""
        detection = self.turn_detection
        stored = dict(self.stored)
        return {
            "type": "realtime",
            "id": self.id,
            "object": "realtime.session",
            "model": "duplex-demo",
            "instructions": self.instructions,
            "output_modalities": list(self.output_modalities),
            "audio": {
                "input": {"format": self.wire_audio.input_format,
                          "noise_reduction": stored.pop("noise_reduction"),
                          "transcription": stored.pop("transcription"),
                          "turn_detection": detection.as_wire() if detection else None},
                "output": {"format": self.wire_audio.output_format, "voice": self.config.voice,
                           "speed": 1.0},
            },
            **stored,
            "interruption": self.pauses.settings.as_wire(),
            "extensions": self.client_view.settings.as_wire(),
        }

    def open(self, resume: dict[str, Any] | None = None, resumed: dict[str, Any] | None = None,
             refused: protocol.ProtocolError | None = None) -> None:
        """Emit `session.created` once per connection, with `resume` (`server.resumption`) in
        its session; then `session.resumed` (fields `resumed`) or a refused resume's `error`."""
        self.closed = False
        self._log.emit("session.created", session={**self.session_wire(), **(
            {"resume": resume} if resume is not None else {})})
        if resumed is not None:
            self._log.emit("session.resumed", **resumed)
        if refused is not None:
            self._log.error(refused)

    def close(self) -> None:
        """Mark the session closed: generation is cancelled, calibration stops, and the
        session lets go of its calibration (which holds the session: a reference cycle; a
        closed calibration does nothing anyway)."""
        self.closed = True
        for response in self.responses.values():
            if response.active:
                self._log.effect(CancelGeneration(response.id))
        if self.calibration is not None:
            self.calibration.close()
            self.calibration = None

    def set_clock(self, now_ms: float) -> None:
        """Tell the session the current monotonic time (ms) before feeding it an ACK (also set
        by `pull_outbound`)."""
        self._clock_ms = now_ms

    # ------------------------------------------------------------------ client events

    def receive(self, frame: str | bytes) -> protocol.ClientEvent | protocol.ProtocolError:
        """Apply one client frame; bad input yields an `error` event and changes nothing.

        Replies of a client found not to report playback are settled first
        (`HeardTextStore.settle_unreported`), so a retrieve or a prompt never sees them stale.
        Returns the applied event, or the `ProtocolError` the frame was refused with (its
        `event_type` tells what the frame claimed to be: nothing parses the frame again).
        """
        self.heard_text.settle_unreported(self._clock_ms)
        event = None
        try:
            event = protocol.parse_client_event(frame)
            self._dispatch(event)
        except protocol.ProtocolError as exc:
            if event is not None:
                exc.event_type = protocol.EVENT_TYPES[type(event)]
            self._log.error(exc)
            return exc
        return event

    def _dispatch(self, event: protocol.ClientEvent) -> None:
        turns, interruptions = self.input_turns, self.interruptions
        match event:
            case protocol.SessionUpdate():
                self._session_update(event)
            case protocol.ItemCreate():
                self.items.create(event)
            case protocol.ResponseCreate():
                self._response_create(event)
            case protocol.ResponseCancel():
                interruptions.response_cancel(event)
            case protocol.ItemTruncate():
                interruptions.item_truncate(event)
            case protocol.OutputAudioBufferClear():
                interruptions.output_clear(event)
            case protocol.ItemDelete():
                self._item_delete(event)
            case protocol.ItemRetrieve():
                item = self.items.require(event.item_id, event.event_id)
                self.items.retrieve(item, self.lifecycle.item_status(item))
            case protocol.InputAudioAppend():
                try:
                    event = replace(event, pcm16=self.wire_audio.decode_input(event.pcm16))
                except ValueError as exc:
                    raise protocol.ProtocolError("invalid_audio", str(exc), param="audio",
                                                 event_id=event.event_id) from None
                turns.append(event, self._playing_unpaused, self.playback_position_ms)
                self.pauses.appended(turns.audio.end_ms)
            case protocol.InputAudioCommit():
                self.items.check_room(1, event.event_id)
                self.pauses.input_replaced(turns.commit(event))
            case protocol.InputAudioClear():
                turns.clear()
                self.pauses.input_replaced(None)
            case protocol.PlaybackAck():
                interruptions.playback_ack(event, self._clock_ms,
                                           self._arrival.burst_late_ms(self._clock_ms))
            case protocol.BargeIn() if event.pause and self.pauses.settings.mode == "pause":
                self._barge_in_pause(event)
            case protocol.BargeIn():
                interruptions.barge_in(event)

    def _session_update(self, event: protocol.SessionUpdate) -> None:
        """Apply a validated `session.update` (`protocol._parse_session` says what each field
        does here) and report the session as it now is in `session.updated`. A requested
        voice is accepted and reported as the server's own."""
        changed = {**event.changes["stored"], **{key: event.changes[key] for key in (
            "noise_reduction", "transcription") if key in event.changes}}
        stored = {**self.stored, **changed}
        if (error := stored_settings_error(stored, changed, event.event_id)) is not None:
            raise error
        self.stored = stored
        self.wire_audio.configure(event.changes.get("input_format"),
                                  event.changes.get("output_format"))
        if "extensions" in event.changes:
            self.client_view.settings = event.changes["extensions"]
        if "instructions" in event.changes:
            self.instructions = event.changes["instructions"]
        self.output_modalities = event.changes.get("output_modalities", self.output_modalities)
        if "turn_detection" in event.changes:
            self.input_turns.configure(event.changes["turn_detection"])
            if event.changes["turn_detection"] is None:
                self.pauses.input_replaced(None)
        if "interruption" in event.changes:
            self.pauses.settings = self.pauses.settings.updated(event.changes["interruption"],
                                                                frozenset(VOCABULARIES))
        self._log.emit("session.updated", session=self.session_wire())

    def _item_delete(self, event: protocol.ItemDelete) -> None:
        item = self.items.require(event.item_id, event.event_id)
        response = self.responses.get(item.response_id or "")
        if response is not None:
            self.lifecycle.cancel_generation(response, "client_cancelled")
            if self.calibration is not None:
                self.calibration.discard(response.id)
        self.items.delete(item.id)
        if response is not None:
            self.lifecycle.release(response)

    # ------------------------------------------------------------------ playback position

    def playback_unreported(self) -> bool:
        """True once the client is known not to report playback
        (`HeardTextStore.playback_unreported` at the session clock)."""
        return self.heard_text.playback_unreported(self._clock_ms)

    def _playback_active(self, response: ResponseState) -> bool:
        return response is self.lifecycle.latest() and self.assistant_playing()

    def assistant_playing(self) -> bool:
        """True while the latest reply is generating or has audio the client has not played."""
        response = self.lifecycle.latest()
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

    def _playing_unpaused(self) -> bool:
        """`assistant_playing`, except while the reply is paused (the client is silent)."""
        return self.pauses.current is None and self.assistant_playing()

    def playback_position_ms(self, audio_end_ms: int | None = None) -> tuple[str, int] | None:
        """(response id, ms into its audio) of the latest reply's audio estimated to be playing
        at the session clock (`set_clock`), or, for an append whose audio ends at
        `audio_end_ms` on the input timeline (arriving now), when that audio was captured: that
        much earlier than now as the append came later than the earliest recent ones
        (`ArrivalLateness`). None before any of the reply was sent, and once it stopped playing
        (`assistant_playing`) more than `ECHO_TAIL_MS` after its last ACK.

        The estimate is `ResponseState.estimated_played_ms`. Network and capture latencies are
        not known here: the echo detector searches a lag range around this estimate
        (`server.listening.mic_timeline.LAG_RANGE_MS`). Their jitter is taken out: the echo detector
        maps every microphone frame by its own position, and appends that a stalled client
        sent in one burst (300-450 ms late, measured on a loaded machine) were estimated that
        far on, so that their echo did not align with the rest and started turns. The tail
        after playback ended is there because the microphone hears the end of the reply that
        much later.
        """
        late_ms = 0.0 if audio_end_ms is None else self._arrival.late_ms(self._clock_ms,
                                                                          audio_end_ms)
        response = self.lifecycle.latest()
        if response is None or response.first_send_ms is None:
            return None
        pause = self.pauses.current
        if pause is not None and pause.response_id == response.id:
            if self._clock_ms - pause.started_ms > ECHO_TAIL_MS:
                return None
            return response.id, pause.audio_end_ms
        if not self.assistant_playing() and (
                response.last_ack_ms is None
                or self._clock_ms - response.last_ack_ms > ECHO_TAIL_MS):
            return None
        return response.id, response.estimated_played_ms(self._clock_ms - late_ms,
                                                          self.config.jitter_ms)

    # ------------------------------------------------------------------ input turns

    def on_speech_started(self, audio_start_ms: int) -> None:
        """Server VAD heard speech begin at `audio_start_ms` (ms of input audio).

        Announces `input_audio_buffer.speech_started`; with `interrupt_response`, a reply still
        playing is paused (`server.realtime.pauses`: the utterance decides) when the session's
        interruption mode is "pause" and the client reports playback; otherwise (mode "cancel",
        or a client without ACKs, which cannot say where it stopped nor follow a pause: OpenAI
        semantics) it is interrupted at the client's latest ACK or the real-time estimate (a
        soft cut: the client's final ACK or truncate may still refine it) and the client is
        told to clear its queued audio. A turn starting while a reply is paused decides it.
        """
        self.turn_ends.speech_heard(self._clock_ms)
        if not self.input_turns.speech_started(audio_start_ms):
            return
        turn = self.input_turns.speech_turn
        if turn is not None and self.pauses.attach_turn(*turn):
            return
        detection = self.turn_detection
        response = self.lifecycle.latest()
        if detection is not None and detection.interrupt_response and response is not None and (
            self.assistant_playing()
        ):
            if self.pauses.settings.mode == "pause" and response.active and (
                    self.items.reports_playback):
                self.pauses.pause(response, "speech_started", response.cursor.played_ms)
                return
            self.lifecycle.cancel_generation(response, "turn_detected")
            self._log.emit("output_audio_buffer.cleared", response_id=response.id)
            self.interruptions.server_cut(response)

    def _barge_in_pause(self, event: protocol.BargeIn) -> None:
        """`barge_in` with `pause`: the client's VAD paused the named (default: the active)
        reply at `audio_end_ms`; a reply not in progress is interrupted as by `barge_in`."""
        if event.response_id is None and event.item_id is None:
            response = self.lifecycle.active()
        else:
            response = self.lifecycle.resolve(event.response_id, event.item_id, event.event_id)
        if response is None or not response.active:
            self.interruptions.barge_in(event)
            return
        if event.audio_end_ms is not None:
            response.cursor.acknowledge(event.audio_end_ms)
        self.pauses.pause(response, "barge_in", response.cursor.played_ms)

    def on_speech_gap(self, audio_end_ms: int) -> None:
        """Server VAD heard the decision tail of silence after `audio_end_ms` (ms of input
        audio): a paused reply is cut when the speech was too long for a backchannel, else a
        turn it waits for is transcribed for the decision now (`InputTurns.decide`)."""
        turn = self.input_turns.speech_turn
        if turn is None:
            return
        self.input_turns.speech_gap(audio_end_ms)
        self.pauses.speech_paused(turn[0], audio_end_ms)
        if self.pauses.awaits(turn[0]):
            self.input_turns.decide()

    def on_speech_resumed(self) -> None:
        """Server VAD heard speech again after a reported gap or pause of the turn."""
        self.input_turns.speech_resumed()
        self.turn_ends.resumed()

    def on_turn_end_probability(self, item_id: str, audio_end_ms: int,
                                probability: float) -> None:
        """`semantic_vad`: the end-of-turn model's `probability` (0-1) that the turn `item_id`
        was finished at its pause after `audio_end_ms` (`PredictTurnEnd`); with its transcript,
        a finished turn ends (`TurnEnds`)."""
        self.turn_ends.probability(item_id, audio_end_ms, probability)

    def on_decision_transcription(self, item_id: str, audio_end_ms: int,
                                  transcript: str) -> None:
        """The transcript of `item_id`'s speech up to its gap at `audio_end_ms` is ready
        (`DecideTranscription`): it resumes or cuts the reply it paused
        (`ReplyPauses.decide`), and the turn is dropped (a backchannel) or goes on
        (`InputTurns.decided`). A stale one (the person spoke on) is ignored."""
        pcm16 = self.input_turns.decision_audio(item_id, audio_end_ms)
        if pcm16 is None:
            return
        verdict = self.pauses.decide(item_id, transcript, pcm16)
        self.input_turns.decided(item_id, verdict is Verdict.BACKCHANNEL, transcript)
        self.turn_ends.transcript(item_id, audio_end_ms, transcript)

    def on_speech_paused(self, audio_end_ms: int) -> None:
        """Server VAD heard the utterance tail of silence after `audio_end_ms` (ms of input
        audio): prepare its transcription (`InputTurns.speech_paused`); a paused reply is cut
        when the speech was too long for a backchannel (`ReplyPauses.speech_paused`)."""
        turn = self.input_turns.speech_turn
        self.input_turns.speech_paused(audio_end_ms)
        self.pauses.speech_paused(turn[0] if turn else None, audio_end_ms)

    def on_speech_stopped(self, audio_end_ms: int) -> None:
        """Server VAD heard the utterance end at `audio_end_ms`: commit it for transcription
        (unless it was found to be a backchannel at its pause)."""
        turn = self.input_turns.speech_turn
        self.turn_ends.speech_heard(self._clock_ms)
        self.input_turns.speech_stopped(audio_end_ms)
        if turn is not None and self.input_turns.committed_audio(turn[0]) is not None:
            self.pauses.committed(turn[0])

    def on_prepared_transcription(self, item_id: str, transcript: str) -> None:
        """The speculative transcript of `item_id`'s audio up to its pause is ready: it decides
        a reply paused by that utterance (`ReplyPauses.prepared`), and under `semantic_vad`
        whether the turn is finished."""
        self.pauses.prepared(item_id, transcript)
        self.turn_ends.transcript(item_id, None, transcript)

    def on_transcription(self, item_id: str, transcript: str) -> None:
        """The transcript of a committed utterance is ready.

        An utterance with no words (noise, a cough) is deleted instead of becoming a user turn.
        Otherwise the item gets its transcript and, under server VAD with `create_response`,
        a response starts when the history has room for its item (else an `error`,
        `history_limit_exceeded`, as for a client's `response.create`). A response in
        progress whose prompt was built without this turn (it started after this turn's
        speech did, e.g. two turns in one append, or a turn begun while the previous one was
        being transcribed) answers earlier turns only: with `interrupt_response` it is
        interrupted, as this turn's speech start would have interrupted it, and the new
        response answers both; without, this turn gets no response of its own (OpenAI: "this
        may fail to create a response if the model is already responding"). One whose prompt
        holds this turn, or will (`_answers`), answers it.
        """
        if self.pauses.transcribed(item_id, transcript):
            return
        if not self.input_turns.transcribed(item_id, transcript):
            return
        detection = self.turn_detection
        if detection is None or not detection.create_response:
            return
        active = self.lifecycle.active()
        if active is not None and (not detection.interrupt_response
                                   or self._answers(active, item_id)):
            return
        try:
            self.items.check_room(1, None)
        except protocol.ProtocolError as full:
            self._log.error(full)
            return
        if active is not None:
            self.lifecycle.cancel_generation(active, "turn_detected")
            self._log.emit("output_audio_buffer.cleared", response_id=active.id)
            self.interruptions.mark_interrupted(active)
        self._start_response(None)

    def _answers(self, response: ResponseState, item_id: str) -> bool:
        """True when `response`'s prompt holds the user item `item_id` with its transcript,
        or will: it was not built yet, and the item comes before the response's."""
        if response.prompted_items is not None:
            return item_id in response.prompted_items
        return any(item.id == item_id for item in self.history.before(response.item_id))

    def pending_transcripts(self) -> bool:
        """True while a committed utterance still waits for its transcript."""
        return self.input_turns.pending_transcripts

    # ------------------------------------------------------------------ responses

    def _response_create(self, event: protocol.ResponseCreate) -> None:
        if self.lifecycle.active() is not None:
            raise protocol.ProtocolError(
                "conversation_already_has_active_response",
                f"Response '{self.current_response_id}' is still in progress; cancel it first.",
                event_id=event.event_id,
            )
        self.items.check_room(1, event.event_id)
        response = self._start_response(event.instructions, event.metadata,
                                        event.output_modalities)
        response.tools, response.tool_choice = event.tools, event.tool_choice

    def _start_response(self, instructions: str | None,
                        metadata: dict[str, str] | None = None,
                        output_modalities: tuple[str, ...] | None = None) -> ResponseState:
        previous = self.lifecycle.latest()
        if previous is not None and not previous.cursor.fully_played and (
            self.items.reports_playback
        ):
            self.interruptions.mark_interrupted(previous)
        return self.lifecycle.start(instructions, metadata,
                                    output_modalities or self.output_modalities)

    def build_prompt(self, response_id: str) -> Prompt | None:
        """The responder's prompt for `response_id`: history before its item, as heard.

        Returns None when the response is no longer active (it was cancelled while waiting).
        The turns are `prompt_turns.conversation_turns`'; the function `tools` and
        `tool_choice` (`response.create`'s, else the session's) are offered in the
        chat-completions shape.
        """
        response = self.responses.get(response_id)
        if response is None or not response.active:
            return None
        before = self.history.before(response.item_id)
        response.prompted_items = frozenset(item.id for item in before if item.text)
        return Prompt(
            instructions=self.lifecycle.instructions(response_id, self.instructions),
            turns=conversation_turns(before, self._failed),
            interruption_note=self.config.interruption_note,
            max_output_tokens=None if self.stored["max_output_tokens"] == "inf"
            else self.stored["max_output_tokens"],
            tools=tuple(chat_tools(self.stored["tools"] if response.tools is None
                                   else response.tools)),
            tool_choice=chat_tool_choice(self.stored["tool_choice"]
                                         if response.tool_choice is None
                                         else response.tool_choice),
        )

    # ------------------------------------------------------------------ generation output

    def on_text(self, response_id: str, delta: str) -> bool:
        """Append responder text to the reply; False when the response no longer generates."""
        response = self.lifecycle.generating(response_id)
        if response is None:
            return False
        response.text += delta
        item = self.history.get(response.item_id)
        if item is not None:
            item.full_text = response.text
        return True

    def on_function_call(self, response_id: str, call: ToolCall) -> bool:
        """Keep a function call of the reply (sent as a `function_call` item when the response
        completes); False when the response no longer generates."""
        response = self.lifecycle.generating(response_id)
        if response is not None:
            response.function_calls.append(call)
        return response is not None

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
        response = self.lifecycle.generating(response_id)
        if response is None:
            return False
        response.queue_text(text_end)
        if pcm16:
            rate = self.config.sample_rate_hz
            placed = response.queue_speech(pcm16, marks, rate, self.config.frame_ms)
            if (calibration := self.calibration) is not None:
                pcm_f32 = _pcm16_to_f32le(pcm16) if calibration.requires_audio else b""
                calibration.record(response.id, {
                    "pcm_f32le": pcm_f32, "sample_rate_hz": rate,
                    "marks": placed,
                })
        self._log.effect(WakeSender())
        return True

    def on_generation_done(self, response_id: str) -> None:
        """The responder and TTS finished the whole reply: the audio is complete."""
        response = self.lifecycle.generating(response_id)
        if response is None:
            return
        response.queue_text(len(response.text))
        response.generation_ended = True
        response.cursor.audio_complete = True
        self._log.effect(WakeSender())

    def _failed(self, item: HistoryItem) -> bool:
        """Whether the response that wrote assistant `item` failed."""
        response = self.responses.get(item.response_id or "")
        return response is not None and response.status == "failed"

    def on_generation_failed(self, response_id: str, message: str) -> None:
        """Generation raised: end the response as failed; history keeps what was heard."""
        response = self.lifecycle.generating(response_id)
        if response is None:
            return
        response.generation_ended = True
        response.queue.clear()
        response.error_message = message
        self._log.emit("error", error={"type": "server_error", "code": "generation_failed",
                                       "message": message, "param": None, "event_id": None})
        self.lifecycle.finish(response, "failed", None)
        self.interruptions.mark_interrupted(response)

    # ------------------------------------------------------------------ pacing

    def pull_outbound(self, now_ms: float) -> float | None:
        """Move sendable outputs of the current response to the event list.

        Pacing (`ResponseState.send_budget_ms`): audio may run at most `lead_ms` (+ `jitter_ms`
        before the first ACK) ahead of the client's latest ACK for this response; a client that
        has not reported playback is paced by real time from the first send, and one whose
        ACKs stopped for `ack_timeout_ms` falls back to that. When the queue is drained and
        generation ended, the terminal events are emitted (exactly once). Also settles the
        history of a client found not to report playback (`playback_unreported`), and fires
        server_vad's idle timeout when due (`TurnEnds.check_idle`).

        Args:
            now_ms: a monotonic clock reading in ms (it advances the session clock).

        Returns:
            The clock reading (ms) at which this should be called again (more audio becomes
            sendable by real time, or playback reports are overdue), or None when only an ACK,
            new output or a cancel can change anything.
        """
        self._clock_ms = max(self._clock_ms, now_ms)
        deadlines = (self.pauses.check(now_ms), self._pull_current(now_ms),
                     self.heard_text.settle_unreported(now_ms),
                     self.turn_ends.check_idle(now_ms))
        return min((d for d in deadlines if d is not None), default=None)

    def _pull_current(self, now_ms: float) -> float | None:
        """The pacing part of `pull_outbound` for the current response."""
        response = self.responses.get(self.current_response_id or "")
        if response is None or not response.active or response.paused:
            return None
        config = self.config
        common = {"response_id": response.id, "item_id": response.item_id,
                  "output_index": 0, "content_index": 0}
        while isinstance(output := response.pop_sendable(
                now_ms, config.sample_rate_hz, config.lead_ms, config.jitter_ms,
                config.ack_timeout_ms, self.items.reports_playback),
                QueuedAudio | QueuedTranscript):
            if isinstance(output, QueuedTranscript):
                self._log.emit(modalities.delta_event(response.output_modalities), **common,
                               delta=output.text)
                continue
            fields: dict[str, Any] = {
                **common, "delta": base64.b64encode(
                    self.wire_audio.encode_output(response.id, output.pcm16)).decode("ascii"),
                "audio_end_ms": response.cursor.sent_ms,
            }
            if output.marks is not None:
                fields["marks"] = output.marks
            self._log.emit("response.output_audio.delta", **fields)
        if response.queue:
            return output
        if response.generation_ended:
            self.lifecycle.finish(response, "completed", None)
        return None

    # ------------------------------------------------------------------ heard text

    def calibration_view(self, response_id: str) -> CalibrationView | None:
        """`HeardTextStore.calibration_view` (the session is the calibration's session)."""
        return self.heard_text.calibration_view(response_id)

    def apply_heard_text(
        self, response_id: str, *, text: str, audio_end_ms: int, char_end: int
    ) -> bool:
        """`HeardTextStore.apply_heard_text`: store a re-validated calibration result."""
        return self.heard_text.apply_heard_text(response_id, text=text,
                                                audio_end_ms=audio_end_ms, char_end=char_end)

    def report_cross_check(
        self, response_id: str, cut: int, asr_text: str | None, marks_agree: bool | None
    ) -> None:
        """`HeardTextStore.report_cross_check`: attach an ASR cross-check to its result."""
        self.heard_text.report_cross_check(response_id, cut, asr_text, marks_agree)

    def announce_calibration(self, response_id: str, elapsed_ms: float) -> None:
        """`HeardTextStore.announce_calibration`: announce a stored calibration result."""
        self.heard_text.announce_calibration(response_id, elapsed_ms)


def _pcm16_to_f32le(pcm16: bytes) -> bytes:
    """PCM16 LE bytes -> float32 LE bytes in [-1, 1)."""
    return pcm16_to_float(pcm16).astype("<f4", copy=False).tobytes()
