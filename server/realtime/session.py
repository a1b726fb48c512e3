"""The sans-I/O duplex session: the protocol core that the parts of a session hang on.

Events in (client frames, clock readings, and through the parts: generation output to
`Session.generation`, VAD reports and transcripts to `Session.turn_taking`, calibration results
to `Session.heard_text`), events out (`take_events`) and effects out (`take_effects`: start or
cancel a generation, wake the sender, detect speech, transcribe). No sockets, no sleeps, no
tasks: the asyncio layer in `server.connection` drives it. The session parses and dispatches
client events, starts responses, and paces their output; the parts do the rest: item
operations (`ConversationItems`), input audio (`InputTurns`), turn taking (`TurnTaking`),
paused replies (`ReplyPauses`), interruptions (`Interruptions`), the client's playback
(`ReplyPlayback`), the prompt and generated output (`Generation`), the session object
(`SessionSettings`) and calibration results (`HeardTextStore`).
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

from server.listening.server_vad_settings import TurnDetection
from server.realtime import event_parser, modalities, protocol
from server.realtime.audio_formats import WireAudio
from server.realtime.effects import CancelGeneration, Effect
from server.realtime.events import EventLog
from server.realtime.extensions import ClientView
from server.realtime.generation import Generation
from server.realtime.heard_text import HeardTextStore
from server.realtime.history import ConversationHistory
from server.realtime.input_turns import InputTurns
from server.realtime.interruption_settings import InterruptionSettings
from server.realtime.interruptions import Interruptions
from server.realtime.items import ConversationItems
from server.realtime.pauses import ReplyPauses
from server.realtime.reply_playback import ReplyPlayback
from server.realtime.response_state import QueuedAudio, QueuedTranscript, ResponseState
from server.realtime.responses import ResponseLifecycle
from server.realtime.session_settings import SessionSettings
from server.realtime.turn_ends import TurnEnds
from server.realtime.turn_taking import TurnTaking
from server.responders.prompt import DEFAULT_INTERRUPTION_NOTE

if TYPE_CHECKING:
    from calibration.history_calibration import HistoryCalibration

DEFAULT_INSTRUCTIONS = "You are a friendly voice assistant. Keep answers spoken and clear."


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """Per-session settings, server-owned (what `session.update` may change starts from them
    in `SessionSettings`: `instructions`, and `interruption`).

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

    Attributes:
        settings: the session object the client sees and changes (`SessionSettings`).
        generation: prompts in, generated text, speech and function calls back
            (`Generation`).
        turn_taking: the VAD's and the transcriber's reports (`TurnTaking`).
        heard_text: calibration results (`HeardTextStore`; the calibration's session).
        reply_playback: where the latest reply is playing at the client (`ReplyPlayback`).
        items, input_turns, lifecycle, interruptions, pauses, turn_ends: the other parts.
        calibration: the calibration controller, None without one (set by the I/O layer).
    """

    def __init__(self, config: SessionConfig | None = None, *, session_id: str = "sess_1") -> None:
        self.config = config or SessionConfig()
        config = self.config
        self.id = session_id
        self.history = ConversationHistory()
        self.closed = False
        self.calibration: HistoryCalibration | None = None
        self._log = EventLog()
        self._clock_ms = 0.0
        # The parts call back into the session through a weak proxy: they belong to it, and
        # callbacks holding the session itself would put it, and all it holds, in reference
        # cycles, which only a full collection of the cyclic GC frees (on the event loop,
        # 50-250 ms at 200 sessions: benchmarks/README.md, "Load benchmark"). Each callback
        # is a lambda or a function closing over the proxy: a bound method taken from the
        # proxy holds the session again.
        me = weakref.proxy(self)

        def clock() -> float:
            return me._clock_ms

        self.items = ConversationItems(self.history, self._log,
                                       lambda: me.reply_playback.playback_unreported(),
                                       max_items=config.max_history_items,
                                       max_chars=config.max_history_chars)
        self.input_turns = InputTurns(config.sample_rate_hz, config.input_audio_max_bytes,
                                      self.items, self._log)
        self.wire_audio = WireAudio(config.voice, config.sample_rate_hz)
        self.lifecycle = ResponseLifecycle(session_id, self.wire_audio.audio_output, self.items,
                                           self._log)
        self.responses = self.lifecycle.by_id
        self.heard_text = HeardTextStore(self.lifecycle, self.items,
                                         lambda response: me.reply_playback.is_playing(response),
                                         lambda: me.closed, config.ack_timeout_ms)
        self.interruptions = Interruptions(
            self.lifecycle, self.heard_text, self.items, self._log, lambda: me.calibration,
            lambda response: response.estimated_played_ms(me._clock_ms, config.jitter_ms))
        self.pauses = ReplyPauses(self.lifecycle, self.input_turns, self.interruptions,
                                  self._log, config.sample_rate_hz, config.interruption, clock)
        self.reply_playback = ReplyPlayback(self.lifecycle, self.history, self.pauses,
                                            self.heard_text, clock, config.jitter_ms,
                                            config.ack_timeout_ms)
        self.turn_ends = TurnEnds(self.input_turns, self.lifecycle, self._log,
                                  lambda: me.start_response(None))
        self.client_view = ClientView(lambda: me.items.reports_playback,
                                      lambda: me.calibration is not None)
        self.settings = SessionSettings(session_id, config.instructions, config.voice,
                                        self.wire_audio, self.input_turns, self.pauses,
                                        self.client_view, self._log)
        self.generation = Generation(self.lifecycle, self.history, self.settings,
                                     self.interruptions, self._log, lambda: me.calibration,
                                     sample_rate_hz=config.sample_rate_hz,
                                     frame_ms=config.frame_ms,
                                     interruption_note=config.interruption_note)
        self.turn_taking = TurnTaking(self.input_turns, self.pauses, self.turn_ends,
                                      self.lifecycle, self.items, self.interruptions,
                                      self.reply_playback, self._log, clock,
                                      lambda: me.start_response(None))

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

    def open(self, resume: dict[str, Any] | None = None, resumed: dict[str, Any] | None = None,
             refused: protocol.ProtocolError | None = None) -> None:
        """Emit `session.created` once per connection, with `resume` (`server.resumption`) in
        its session; then `session.resumed` (fields `resumed`) or a refused resume's `error`."""
        self.closed = False
        self._log.emit("session.created", session={**self.settings.wire(), **(
            {"resume": resume} if resume is not None else {})})
        if resumed is not None:
            self._log.emit("session.resumed", **resumed)
        if refused is not None:
            self._log.error(refused)

    def close(self) -> None:
        """Mark the session closed: generation is cancelled, calibration stops, and the
        session lets go of its calibration (a closed calibration does nothing anyway)."""
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
            event = event_parser.parse_client_event(frame)
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
                self.settings.update(event)
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
                playback = self.reply_playback
                turns.append(event, playback.playing_unpaused, playback.position_ms)
                self.pauses.appended(turns.audio.end_ms)
            case protocol.InputAudioCommit():
                self.items.check_room(1, event.event_id)
                self.pauses.input_replaced(turns.commit(event))
            case protocol.InputAudioClear():
                turns.clear()
                self.pauses.input_replaced(None)
            case protocol.PlaybackAck():
                interruptions.playback_ack(event, self._clock_ms, turns.audio.end_ms)
            case protocol.BargeIn() if event.pause and self.pauses.settings.mode == "pause":
                self.turn_taking.barge_in_pause(event)
            case protocol.BargeIn():
                interruptions.barge_in(event)

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

    # ------------------------------------------------------------------ responses

    def _response_create(self, event: protocol.ResponseCreate) -> None:
        if self.lifecycle.active() is not None:
            raise protocol.ProtocolError(
                "conversation_already_has_active_response",
                f"Response '{self.current_response_id}' is still in progress; cancel it first.",
                event_id=event.event_id,
            )
        self.items.check_room(1, event.event_id)
        response = self.start_response(event.instructions, event.metadata,
                                       event.output_modalities)
        response.tools, response.tool_choice = event.tools, event.tool_choice

    def start_response(self, instructions: str | None,
                       metadata: dict[str, str] | None = None,
                       output_modalities: tuple[str, ...] | None = None) -> ResponseState:
        """Start a response (`ResponseLifecycle.start`: its item, `response.created`, a
        `StartGeneration`); `instructions`, `metadata` and `output_modalities` are
        `response.create`'s (None: the session's). A previous reply the client reports it has
        not played to its end is marked interrupted first."""
        previous = self.lifecycle.latest()
        if previous is not None and not previous.cursor.fully_played and (
            self.items.reports_playback
        ):
            self.interruptions.mark_interrupted(previous)
        return self.lifecycle.start(instructions, metadata,
                                    output_modalities or self.settings.output_modalities)

    # ------------------------------------------------------------------ pacing

    def pull_outbound(self, now_ms: float) -> float | None:
        """Move sendable outputs of the current response to the event list.

        Pacing (`ResponseState.send_budget_ms`): audio may run at most `lead_ms` (+ `jitter_ms`
        before the first ACK) ahead of the client's latest ACK for this response; a client that
        has not reported playback is paced by real time from the first send, and one whose
        ACKs stopped for `ack_timeout_ms` falls back to that. When the queue is drained and
        generation ended, the terminal events are emitted (exactly once). Also settles the
        history of a client found not to report playback (`HeardTextStore.settle_unreported`),
        and fires server_vad's idle timeout when due (`TurnEnds.check_idle`).

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
            if tail := self.wire_audio.flush_output(response.id):  # G.711: the held end
                self._log.emit("response.output_audio.delta", **common,
                               delta=base64.b64encode(tail).decode("ascii"),
                               audio_end_ms=response.cursor.sent_ms)
            self.lifecycle.finish(response, "completed", None)
        return None
