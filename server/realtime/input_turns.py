"""The person's input-audio turns: append, commit, clear, server VAD turn events, transcripts.

`InputTurns` owns the session's `InputAudioBuffer` and its `server_vad` settings. It turns
appends into `DetectSpeech` effects, VAD reports (`speech_started` / `speech_paused` /
`speech_stopped`) and manual commits into user items awaiting their transcript (`Transcribe`,
with a speculative `PrepareTranscription` at the utterance's pause), and transcripts into user
turns. Whether a turn interrupts the assistant or starts a response is the session's decision;
the methods here report what happened. Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from server.listening.input_audio import InputAudioBuffer
from server.listening.server_vad_settings import (
    SPEECH_DETECTION_LATENCY_MS,
    UTTERANCE_TAIL_MS,
    TurnDetection,
)
from server.realtime import protocol
from server.realtime.effects import (
    DetectSpeech,
    DiscardTranscription,
    PrepareTranscription,
    Transcribe,
)
from server.realtime.events import EventLog
from server.realtime.history import HistoryItem
from server.realtime.items import ConversationItems


class InputTurns:
    """Input audio and turn taking of one session.

    Args:
        sample_rate_hz: input PCM16 rate (24000).
        max_bytes: bound on buffered input audio (bytes).
        items: the session's item operations (user items are added and deleted there).
        log: the session's outbox.

    Attributes:
        audio: the input audio buffer (ms positions on the session's input timeline).
        turn_detection: the `server_vad` settings in force, None without server VAD.
    """

    def __init__(self, sample_rate_hz: int, max_bytes: int, items: ConversationItems,
                 log: EventLog) -> None:
        self.audio = InputAudioBuffer(sample_rate_hz, max_bytes)
        self.turn_detection: TurnDetection | None = None
        self._items = items
        self._log = log
        self._speech_item: tuple[str, int] | None = None
        self._prepared: tuple[str, bytes] | None = None
        self._backchannel: tuple[str, bytes] | None = None
        self._committed: tuple[str, bytes] | None = None
        self._pending_transcripts: set[str] = set()

    @property
    def pending_transcripts(self) -> bool:
        """True while a committed utterance still waits for its transcript."""
        return bool(self._pending_transcripts)

    @property
    def speech_turn(self) -> tuple[str, int] | None:
        """(item id, input-timeline start ms) of the server VAD turn in progress, or None."""
        return self._speech_item

    def prepared_audio(self, item_id: str) -> bytes | None:
        """The audio of `item_id`'s latest `PrepareTranscription` (PCM16 LE at the input
        rate), None when its turn has not paused (or was committed)."""
        if self._prepared is None or self._prepared[0] != item_id:
            return None
        return self._prepared[1]

    def committed_audio(self, item_id: str) -> bytes | None:
        """The audio the newest commit gave `item_id` (PCM16 LE at the input rate), None when
        the newest commit was another item's."""
        if self._committed is None or self._committed[0] != item_id:
            return None
        return self._committed[1]

    def withdraw(self, item_id: str) -> None:
        """A committed utterance awaiting its transcript was a backchannel: delete its user
        item (`conversation.item.deleted`); its transcript is then ignored."""
        self._pending_transcripts.discard(item_id)
        if item_id in self._items.history:
            self._items.delete(item_id)

    def drop_as_backchannel(self, item_id: str) -> None:
        """The turn in progress `item_id`, up to its latest pause, was a backchannel: when its
        speech stops with exactly that audio, nothing is committed (no user item, no
        transcript); when the person spoke on, the whole utterance commits as usual."""
        if self._prepared is not None and self._prepared[0] == item_id:
            self._backchannel = self._prepared

    def configure(self, detection: TurnDetection | None) -> None:
        """Apply new `server_vad` settings (None turns server VAD off); a turn in progress is
        forgotten."""
        self.turn_detection = detection
        self._forget_turn()

    def append(self, event: protocol.InputAudioAppend, playing: Callable[[], bool],
               playback: Callable[[int], tuple[str, int] | None]) -> None:
        """`input_audio_buffer.append`: buffer the audio; under server VAD, ask for speech
        detection on it.

        Args:
            event: the append (PCM16 LE mono at the input rate).
            playing: whether an assistant reply is playing now (`Session.assistant_playing`).
            playback: (response id, ms) of the reply audio playing when the audio ending at
                the given input position (ms) was captured (`Session.playback_position_ms`).

        Raises:
            protocol.ProtocolError: `input_audio_buffer_full` (nothing is appended).
        """
        try:
            position_ms = self.audio.append(event.pcm16)
        except OverflowError:
            raise protocol.ProtocolError(
                "input_audio_buffer_full", "The input audio buffer is full; commit or clear it.",
                param="audio", event_id=event.event_id,
            ) from None
        detection = self.turn_detection
        if detection is None:
            return
        if self._speech_item is None:
            self.audio.drop_before(
                position_ms - detection.prefix_padding_ms - SPEECH_DETECTION_LATENCY_MS)
        position = playback(self.audio.end_ms)
        self._log.effect(DetectSpeech(
            event.pcm16, playing(), detection, position_ms,
            response_id=position[0] if position else None,
            playback_ms=position[1] if position else None,
        ))

    def commit(self, event: protocol.InputAudioCommit) -> None:
        """`input_audio_buffer.commit`: the whole buffer becomes a user turn.

        Raises:
            protocol.ProtocolError: `input_audio_buffer_commit_empty`.
        """
        if not self.audio:
            raise protocol.ProtocolError(
                "input_audio_buffer_commit_empty", "The input audio buffer is empty.",
                event_id=event.event_id,
            )
        if self._speech_item is not None:
            self._items.reserved.discard(self._speech_item[0])
            self._speech_item = None
        self._commit(self.audio.start_ms, self.audio.end_ms)

    def clear(self) -> None:
        """`input_audio_buffer.clear`: drop the buffered audio and any turn in progress."""
        self.audio.clear()
        self._forget_turn()
        self._log.emit("input_audio_buffer.cleared")

    def speech_started(self, audio_start_ms: int) -> bool:
        """Server VAD heard speech begin at `audio_start_ms` (ms of input audio): announce
        `input_audio_buffer.speech_started`. Returns False (nothing happens) without server VAD
        or while a turn is already in progress."""
        if self.turn_detection is None or self._speech_item is not None:
            return False
        item_id = self._items.new_id()
        self._items.reserved.add(item_id)
        self._speech_item = (item_id, audio_start_ms)
        self._log.emit("input_audio_buffer.speech_started", audio_start_ms=audio_start_ms,
                       item_id=item_id)
        return True

    def speech_paused(self, audio_end_ms: int) -> None:
        """Server VAD heard `UTTERANCE_TAIL_MS` of silence after speech ending at
        `audio_end_ms` (ms of input audio): the turn may be over.

        Emits `PrepareTranscription` of exactly the audio `speech_stopped(audio_end_ms)`
        would commit, so transcription overlaps the rest of the silence; the commit claims it
        (`Transcribe.prepared`) only when its audio is byte-identical. No event is announced.
        When speech resumes, a later pause prepares again (replacing this one) or the stop
        commits different audio: one transcription wasted per resumed pause.
        """
        if self.turn_detection is None or self._speech_item is None:
            return
        item_id, start_ms = self._speech_item
        pcm16 = self.audio.peek(start_ms, min(audio_end_ms + UTTERANCE_TAIL_MS,
                                              self.audio.end_ms))
        self._prepared = (item_id, pcm16)
        self._log.effect(PrepareTranscription(item_id, pcm16,
                                              max(start_ms, self.audio.start_ms)))

    def speech_stopped(self, audio_end_ms: int) -> None:
        """Server VAD heard the utterance end at `audio_end_ms`: commit it for transcription."""
        if self.turn_detection is None or self._speech_item is None:
            return
        item_id, start_ms = self._speech_item
        self._log.emit("input_audio_buffer.speech_stopped", audio_end_ms=audio_end_ms,
                       item_id=item_id)
        end_ms = min(audio_end_ms + UTTERANCE_TAIL_MS, self.audio.end_ms)
        backchannel, self._backchannel = self._backchannel, None
        if backchannel == (item_id, self.audio.peek(start_ms, end_ms)):
            self.audio.take(start_ms, end_ms)
            self._forget_turn()
            return
        self._commit(start_ms, end_ms)
        self._speech_item = None

    def transcribed(self, item_id: str, transcript: str) -> bool:
        """The transcript of a committed utterance is ready; True when it became a user turn.

        An utterance with no words (noise, a cough) is deleted instead (False); so is nothing
        when the item is gone.
        """
        self._pending_transcripts.discard(item_id)
        item = self._items.history.get(item_id)
        if item is None:
            return False
        if not any(ch.isalnum() for ch in transcript):
            self._items.delete(item_id)
            return False
        item.text = transcript.strip()
        self._log.emit("conversation.item.input_audio_transcription.completed",
                       item_id=item_id, content_index=0, transcript=item.text)
        self._log.emit("conversation.item.done",
                       previous_item_id=self._items.history.previous_id(item_id),
                       item=item.as_wire())
        return True

    def _commit(self, start_ms: int, end_ms: int) -> None:
        """Turn input audio [start_ms, end_ms) into a user item awaiting its transcript."""
        audio_start_ms = max(start_ms, self.audio.start_ms)
        pcm16 = self.audio.take(start_ms, end_ms)
        item_id = self._speech_item[0] if self._speech_item else self._items.new_id()
        self._items.reserved.discard(item_id)
        prepared = self._prepared == (item_id, pcm16)
        self._prepared = None
        self._committed = (item_id, pcm16)
        item = HistoryItem(id=item_id, role="user", text="", content_type="input_audio")
        self._log.emit("input_audio_buffer.committed", item_id=item.id,
                       previous_item_id=self._items.last_id())
        self._items.add(item, status="in_progress")
        self._pending_transcripts.add(item.id)
        self._log.effect(Transcribe(item.id, pcm16, audio_start_ms, prepared=prepared))

    def _forget_turn(self) -> None:
        """Drop the turn in progress and its prepared transcription (it will not commit)."""
        if self._speech_item is not None:
            self._items.reserved.discard(self._speech_item[0])
        self._speech_item = None
        self._backchannel = None
        if self._prepared is not None:
            self._log.effect(DiscardTranscription(self._prepared[0]))
            self._prepared = None
