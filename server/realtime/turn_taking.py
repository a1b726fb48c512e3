"""Turn taking: the person's speech against the assistant's replies.

The VAD's reports (speech started, gap, paused, resumed, stopped; `semantic_vad`'s end-of-turn
probability) and the transcripts of the person's speech come in here. `InputTurns` keeps the
input audio and turns them into user items; this class decides what each means for the
replies: a turn that starts over a playing reply pauses it (`ReplyPauses`: the utterance
decides) or interrupts it (`Interruptions.server_cut`), a decision transcript resumes or cuts
a paused reply, and a finished turn starts a response under `create_response`, interrupting
one whose prompt does not hold it. Rules follow OpenAI's `server_vad` / `semantic_vad`
(`turn_detection`'s `create_response` and `interrupt_response`). Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from server.listening.backchannel import Verdict
from server.listening.quiet_after_speech import HeardSound
from server.realtime import protocol
from server.realtime.events import EventLog
from server.realtime.input_turns import InputTurns
from server.realtime.interruptions import Interruptions
from server.realtime.items import ConversationItems
from server.realtime.pauses import ReplyPauses
from server.realtime.reply_playback import ReplyPlayback
from server.realtime.response_state import ResponseState
from server.realtime.responses import ResponseLifecycle
from server.realtime.turn_ends import TurnEnds


class TurnTaking:
    """The VAD's and the transcriber's reports of one session, applied to its replies.

    Args:
        input_turns: the session's input audio and turns.
        pauses: the session's paused replies.
        turn_ends: the session's semantic end-of-turn verdicts and idle timeout.
        responses: the session's responses.
        items: the session's item operations.
        interruptions: the session's interruption rules.
        reply_playback: whether a reply is playing at the client.
        log: the session's outbox.
        clock: the session clock (ms, monotonic).
        start_response: starts a response for the person's turn (as the session does:
            `Session.start_response`).
    """

    def __init__(self, input_turns: InputTurns, pauses: ReplyPauses, turn_ends: TurnEnds,
                 responses: ResponseLifecycle, items: ConversationItems,
                 interruptions: Interruptions, reply_playback: ReplyPlayback, log: EventLog,
                 clock: Callable[[], float],
                 start_response: Callable[[], ResponseState]) -> None:
        self._turns = input_turns
        self._pauses = pauses
        self._turn_ends = turn_ends
        self._responses = responses
        self._items = items
        self._interruptions = interruptions
        self._playback = reply_playback
        self._log = log
        self._clock = clock
        self._start_response = start_response

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
        self._turn_ends.speech_heard(self._clock())
        if not self._turns.speech_started(audio_start_ms):
            return
        turn = self._turns.speech_turn
        if turn is not None and self._pauses.attach_turn(*turn):
            return
        detection = self._turns.turn_detection
        response = self._responses.latest()
        if detection is not None and detection.interrupt_response and response is not None and (
            self._playback.assistant_playing()
        ):
            if self._pauses.settings.mode == "pause" and response.active and (
                    self._items.reports_playback):
                self._pauses.pause(response, "speech_started", response.cursor.played_ms)
                return
            self._responses.cancel_generation(response, "turn_detected")
            self._log.emit("output_audio_buffer.cleared", response_id=response.id)
            self._interruptions.server_cut(response)

    def barge_in_pause(self, event: protocol.BargeIn) -> None:
        """`barge_in` with `pause`: the client's VAD paused the named (default: the active)
        reply at `audio_end_ms`; a reply not in progress is interrupted as by `barge_in`. The
        person was speaking up to the input audio received so far (`ReplyPauses.client_heard`).

        Raises:
            protocol.ProtocolError: the named response or item is unknown
                (`ResponseLifecycle.resolve`).
        """
        if event.response_id is None and event.item_id is None:
            response = self._responses.active()
        else:
            response = self._responses.resolve(event.response_id, event.item_id, event.event_id)
        if response is None or not response.active:
            self._interruptions.barge_in(event)
            return
        if event.audio_end_ms is not None:
            response.cursor.acknowledge(event.audio_end_ms)
        self._pauses.pause(response, "barge_in", response.cursor.played_ms)
        self._pauses.client_heard(self._turns.audio.end_ms)

    def on_speech_gap(self, audio_end_ms: int) -> None:
        """Server VAD heard the decision tail of silence after `audio_end_ms` (ms of input
        audio): a paused reply is cut when the speech was too long for a backchannel, else a
        turn it waits for is transcribed for the decision now (`InputTurns.decide`)."""
        turn = self._turns.speech_turn
        if turn is None:
            return
        self._turns.speech_gap(audio_end_ms)
        self._pauses.silent(turn[0], audio_end_ms)
        self._pauses.speech_paused(turn[0], audio_end_ms)
        if self._pauses.awaits(turn[0]):
            self._pauses.asked()
            self._turns.decide()

    def on_speech_resumed(self) -> None:
        """Server VAD heard speech again after a reported gap or pause of the turn. A
        backchannel verdict on the turn that waits for the person to be done is void
        (`ReplyPauses.spoke_again`); when the turn's backchannel already resumed the reply,
        the reply still playing is paused again, and the whole turn decides."""
        turn = self._turns.speech_turn
        self._turns.speech_resumed()
        self._turn_ends.resumed()
        if turn is None or not self._pauses.spoke_again(turn[0]):
            return
        response = self._responses.latest()
        if response is not None and response.active and self._playback.assistant_playing():
            self._pauses.pause(response, "speech_started", response.cursor.played_ms)

    def on_vad_position(self, heard: HeardSound) -> None:
        """Server VAD judged the input up to `heard.heard_ms` (input-timeline ms), with where
        the person's sound last ended and set in: a backchannel held until the person is done
        may resume its reply (`ReplyPauses.heard_until`)."""
        self._pauses.heard_until(heard)

    def on_room_level(self, room_dbfs: float | None) -> None:
        """Server VAD's room background: its loud level (dBFS, None while none was learned),
        above which a paused reply's utterance is measured (`ReplyPauses.room_dbfs`)."""
        self._pauses.room_dbfs = room_dbfs

    def on_turn_end_probability(self, item_id: str, audio_end_ms: int,
                                probability: float) -> None:
        """`semantic_vad`: the end-of-turn model's `probability` (0-1) that the turn `item_id`
        was finished at its pause after `audio_end_ms` (`PredictTurnEnd`); with its transcript,
        a finished turn ends (`TurnEnds`)."""
        self._turn_ends.probability(item_id, audio_end_ms, probability)

    def on_decision_transcription(self, item_id: str, audio_end_ms: int,
                                  transcript: str) -> None:
        """The transcript of `item_id`'s speech up to its gap at `audio_end_ms` is ready
        (`DecideTranscription`): it resumes or cuts the reply it paused
        (`ReplyPauses.decide`), and the turn is dropped (a backchannel) or goes on
        (`InputTurns.decided`). A stale one (the person spoke on) is ignored."""
        pcm16 = self._turns.decision_audio(item_id, audio_end_ms)
        if pcm16 is None:
            return
        verdict = self._pauses.decide(item_id, transcript, pcm16)
        self._turns.decided(item_id, verdict is Verdict.BACKCHANNEL, transcript)
        self._turn_ends.transcript(item_id, audio_end_ms, transcript)

    def on_speech_paused(self, audio_end_ms: int) -> None:
        """Server VAD heard the utterance tail of silence after `audio_end_ms` (ms of input
        audio): prepare its transcription (`InputTurns.speech_paused`); a paused reply is cut
        when the speech was too long for a backchannel (`ReplyPauses.speech_paused`)."""
        turn = self._turns.speech_turn
        self._turns.speech_paused(audio_end_ms)
        self._pauses.silent(turn[0] if turn else None, audio_end_ms)
        self._pauses.speech_paused(turn[0] if turn else None, audio_end_ms)

    def on_speech_stopped(self, audio_end_ms: int) -> None:
        """Server VAD heard the utterance end at `audio_end_ms`: commit it for transcription
        (unless it was found to be a backchannel at its pause); a backchannel verdict held on
        it resumes its reply (`ReplyPauses.stopped`)."""
        turn = self._turns.speech_turn
        self._turn_ends.speech_heard(self._clock())
        self._turns.speech_stopped(audio_end_ms)
        if turn is not None and self._turns.committed_audio(turn[0]) is not None:
            self._pauses.committed(turn[0])
        self._pauses.stopped(turn[0] if turn else None)

    def on_prepared_transcription(self, item_id: str, transcript: str) -> None:
        """The speculative transcript of `item_id`'s audio up to its pause is ready: it decides
        a reply paused by that utterance (`ReplyPauses.prepared`), and under `semantic_vad`
        whether the turn is finished."""
        self._pauses.prepared(item_id, transcript)
        self._turn_ends.transcript(item_id, None, transcript)

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
        if self._pauses.transcribed(item_id, transcript):
            return
        if not self._turns.transcripts.transcribed(item_id, transcript):
            return
        detection = self._turns.turn_detection
        if detection is None or not detection.create_response:
            return
        active = self._responses.active()
        if active is not None and (not detection.interrupt_response
                                   or self._answers(active, item_id)):
            return
        try:
            self._items.check_room(1, None)
        except protocol.ProtocolError as full:
            self._log.error(full)
            return
        if active is not None:
            self._responses.cancel_generation(active, "turn_detected")
            self._log.emit("output_audio_buffer.cleared", response_id=active.id)
            self._interruptions.mark_interrupted(active)
        self._start_response()

    def _answers(self, response: ResponseState, item_id: str) -> bool:
        """True when `response`'s prompt holds the user item `item_id` with its transcript,
        or will: it was not built yet, and the item comes before the response's."""
        if response.prompted_items is not None:
            return item_id in response.prompted_items
        return any(item.id == item_id for item in self._items.history.before(response.item_id))
