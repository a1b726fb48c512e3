"""The person's input-audio turns: append, commit, clear, server VAD turn events, transcripts.

`InputTurns` owns the session's `InputAudioBuffer` and its `server_vad` settings. It turns
appends into `DetectSpeech` effects, VAD reports (`speech_started` / `speech_gap` /
`speech_paused` / `speech_resumed` / `speech_stopped`) and manual commits into user items
awaiting their transcript (`Transcribe`, with a speculative `PrepareTranscription` at the
utterance's pause), which `UserTranscripts` completes with their words. A turn that decides a
paused reply is transcribed for that decision at its speech gap (`DecideTranscription`,
`decide`); its commit waits for the decision (`decided`): a backchannel is never committed,
and a cut turn keeps the decision's transcript when nothing audible follows the decision's
audio. Whether a turn interrupts the assistant or starts a response is `TurnTaking`'s
decision; the methods here report what happened. Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from server.listening.input_audio import InputAudioBuffer
from server.listening.pcm16 import pcm16_to_float
from server.listening.prosody import analyse
from server.listening.server_vad_settings import (
    DECISION_TAIL_MS,
    SPEECH_DETECTION_LATENCY_MS,
    UTTERANCE_TAIL_MS,
    TurnDetection,
)
from server.realtime import protocol
from server.realtime.effects import (
    DecideTranscription,
    DetectSpeech,
    DiscardTranscription,
    PredictTurnEnd,
    PrepareTranscription,
    Transcribe,
)
from server.realtime.events import EventLog
from server.realtime.history import HistoryItem
from server.realtime.items import ConversationItems
from server.realtime.user_transcripts import UserTranscripts


class InputTurns:
    """Input audio and turn taking of one session.

    Args:
        sample_rate_hz: input PCM16 rate (24000).
        max_bytes: bound on buffered input audio (bytes).
        items: the session's item operations (user items are added and deleted there).
        log: the session's outbox.

    Attributes:
        audio: the input audio buffer (ms positions on the session's input timeline).
        transcripts: the committed turns awaiting their transcript (`UserTranscripts`).
        turn_detection: the `server_vad` settings in force, None without server VAD; server
            VAD with OpenAI's defaults until the client says otherwise (OpenAI's default).
    """

    def __init__(self, sample_rate_hz: int, max_bytes: int, items: ConversationItems,
                 log: EventLog) -> None:
        self.audio = InputAudioBuffer(sample_rate_hz, max_bytes)
        self.turn_detection: TurnDetection | None = TurnDetection()  # OpenAI's default: on
        self._items = items
        self._log = log
        self._speech_item: tuple[str, int] | None = None
        self._prepared: tuple[str, bytes] | None = None
        self._backchannel: tuple[str, int] | None = None
        self._committed: tuple[str, bytes] | None = None
        self._silent_end_ms: int | None = None
        self._decision: tuple[str, int, bytes] | None = None
        self._skipped_pause: tuple[str, int] | None = None
        self._held: tuple[str, int, int] | None = None
        self._decided: tuple[str, int, bytes, str] | None = None
        self.transcripts = UserTranscripts(items, log)

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

    def speaking(self, item_id: str) -> bool:
        """True while `item_id` is the turn in progress and no gap or pause of its speech was
        reported since it last spoke."""
        return self._speech_item is not None and self._speech_item[0] == item_id and (
            self._silent_end_ms is None)

    def awaits_decision(self, item_id: str) -> bool:
        """True while `item_id`'s decision transcription (`decide`) is pending."""
        return self._decision is not None and self._decision[0] == item_id

    def decision_audio(self, item_id: str, audio_end_ms: int) -> bytes | None:
        """The audio of the pending decision transcription of `item_id`'s speech up to
        `audio_end_ms` (PCM16 LE at the input rate), None when there is none: the person
        spoke on after that gap (a later gap decides) or the turn was forgotten."""
        decision = self._decision
        if decision is None or decision[:2] != (item_id, audio_end_ms):
            return None
        return decision[2]

    def drop_as_backchannel(self, item_id: str) -> None:
        """The turn in progress `item_id`, up to its latest pause, was a backchannel: when its
        speech stops at that pause, nothing is committed (no user item, no transcript); when
        the person spoke on, the whole utterance commits as usual."""
        if self._prepared is not None and self._prepared[0] == item_id and (
                self._silent_end_ms is not None):
            self._backchannel = (item_id, self._silent_end_ms)

    def decide(self) -> None:
        """Transcribe the turn in progress up to its reported gap, with `DECISION_TAIL_MS` of
        the silence after it, for the decision on the reply it paused (`DecideTranscription`);
        `decided` takes the verdict. Nothing without a turn in a reported gap."""
        end_ms = self._silent_end_ms
        if self._speech_item is None or end_ms is None:
            return
        item_id, start_ms = self._speech_item
        pcm16 = self.audio.peek(start_ms, min(end_ms + DECISION_TAIL_MS, self.audio.end_ms))
        self._decision = (item_id, end_ms, pcm16)
        self._log.effect(DecideTranscription(item_id, pcm16, max(start_ms, self.audio.start_ms),
                                             end_ms))

    def decided(self, item_id: str, backchannel: bool, transcript: str) -> None:
        """The pending decision on `item_id` was taken (or the reply it decided ended) on
        `transcript`.

        A backchannel is never committed: a turn whose speech already stopped at the decided
        gap is dropped now, one still in that silence when it stops. Otherwise the turn goes
        on as any other: a stopped turn is committed now (with the whole `UTTERANCE_TAIL_MS`),
        and one whose pause was reached meanwhile prepares its transcription now
        (`speech_paused` waited for the decision rather than compete with it for the cores),
        unless the commit will keep `transcript` (`_known_transcript`).
        """
        decision, self._decision = self._decision, None
        if decision is None or decision[0] != item_id:
            self._decision = decision
            return
        end_ms = decision[1]
        self._decided = None if backchannel else (item_id, end_ms, decision[2], transcript)
        held, self._held = self._held, None
        if held is not None and held[0] == item_id:
            _, start_ms, held_end_ms = held
            if not backchannel:
                self._commit(start_ms, held_end_ms + UTTERANCE_TAIL_MS, item_id, held_end_ms)
                return
            self._items.reserved.discard(item_id)
            if self._speech_item is None:
                self.audio.drop_before(held_end_ms + UTTERANCE_TAIL_MS)
            return
        self._held = held
        if backchannel:
            self._backchannel = (item_id, end_ms)
        elif self._skipped_pause == (item_id, end_ms) and self._speech_item is not None and (
                self._known_transcript(item_id, end_ms, self.audio.peek(
                    self._speech_item[1], end_ms + UTTERANCE_TAIL_MS)) is None):
            self.speech_paused(end_ms)

    def _known_transcript(self, item_id: str, audio_end_ms: int, pcm16: bytes) -> str | None:
        """The decision's transcript for `item_id`'s audio `pcm16` (PCM16 LE, its speech up to
        `audio_end_ms` and the utterance tail), None when it must be transcribed anew.

        Kept when `pcm16` is the decision's audio and then nothing audible
        (`server.listening.prosody.analyse`: no frame within `SPEECH_RANGE_DB` of the
        utterance's loudest after the decision's audio): the rest of the tail is there for
        a final unvoiced consonant that Silero scores as non-speech, and there is none. Measured
        on `benchmarks/bench_backchannel.py`'s 25 interruptions (tiny.en on the audio server VAD
        prepares): the same words with 150 and 300 ms of silence after the speech in all 25
        (one "Uh" / "Uh..."), while a second transcription delayed the cut turn's transcript
        (so the answer) by 0.66 s at p50, 0.96 s at p95 on a loaded 2-core machine.
        """
        decided = self._decided
        if decided is None or decided[:2] != (item_id, audio_end_ms):
            return None
        decision_pcm16, transcript = decided[2], decided[3]
        if not pcm16.startswith(decision_pcm16):
            return None
        sound = analyse(pcm16_to_float(pcm16), self.audio.sample_rate_hz)
        decision_ms = len(decision_pcm16) * 1000 // (2 * self.audio.sample_rate_hz)
        return transcript if sound.sound_end_ms <= decision_ms else None

    def configure(self, detection: TurnDetection | None) -> None:
        """Apply new `server_vad` settings (None turns server VAD off); a turn in progress is
        forgotten."""
        self.turn_detection = detection
        self._forget_turn()

    def append(self, event: protocol.InputAudioAppend, playing: Callable[[], bool],
               playback: Callable[[int], tuple[str, int] | None]) -> None:
        """`input_audio_buffer.append`: buffer the audio; under server VAD, ask for speech
        detection on it.

        Under server VAD the buffer never refuses audio that fits it: the server commits or
        drops what it holds (turns last at most `SessionConfig.max_turn_ms`), so when an
        append would overflow it anyway (a turn held longer), the oldest audio is dropped
        first and the session keeps listening. Without server VAD the client commits: an
        overflow is its error.

        Args:
            event: the append (PCM16 LE mono at the input rate).
            playing: whether an assistant reply is playing now (`ReplyPlayback.assistant_playing`).
            playback: (response id, ms) of the reply audio playing when the audio ending at
                the given input position (ms) was captured (`ReplyPlayback.position_ms`).

        Raises:
            protocol.ProtocolError: `input_audio_buffer_full` (nothing is appended): without
                server VAD, or an append larger than the whole buffer.
        """
        excess = len(self.audio) + len(event.pcm16) - self.audio.max_bytes
        if self.turn_detection is not None and excess > 0:
            bytes_per_ms = 2 * self.audio.sample_rate_hz // 1000
            self.audio.drop_before(self.audio.start_ms + -(-excess // bytes_per_ms))
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
        if self._speech_item is None and self._held is None:
            self.audio.drop_before(
                position_ms - detection.prefix_padding_ms - SPEECH_DETECTION_LATENCY_MS)
        position = playback(self.audio.end_ms)
        self._log.effect(DetectSpeech(
            event.pcm16, playing(), detection, position_ms,
            response_id=position[0] if position else None,
            playback_ms=position[1] if position else None,
        ))

    def commit(self, event: protocol.InputAudioCommit) -> str | None:
        """`input_audio_buffer.commit`: the whole buffer becomes a user turn; returns its
        item id (None when the history had no room for it).

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
        return self._commit(self.audio.start_ms, self.audio.end_ms, None, None)

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

    def speech_gap(self, audio_end_ms: int) -> None:
        """Server VAD heard `DECISION_TAIL_MS` of silence after speech ending at
        `audio_end_ms` (ms of input audio); nothing is announced (`decide` may follow)."""
        if self._speech_item is not None:
            self._silent_end_ms = audio_end_ms

    def speech_resumed(self) -> None:
        """Server VAD heard speech again after a reported gap or pause: a decision pending on
        the speech before it, and a transcription prepared at its pause, no longer cover the
        utterance and are dropped (a later gap decides; a later pause prepares again). A
        tester's Piper "Right, but why?" (a 260 ms pause after "Right,"): the transcript
        prepared on "Right," came back after "but why?" and resumed the reply on "right.";
        the question was never answered."""
        self._silent_end_ms = None
        self._decision = None
        self._skipped_pause = None
        if self._prepared is not None:
            self._log.effect(DiscardTranscription(self._prepared[0]))
            self._prepared = None

    def speech_paused(self, audio_end_ms: int) -> None:
        """Server VAD heard `UTTERANCE_TAIL_MS` of silence after speech ending at
        `audio_end_ms` (ms of input audio): the turn may be over.

        Emits `PrepareTranscription` of exactly the audio `speech_stopped(audio_end_ms)`
        would commit, so transcription overlaps the rest of the silence; the commit claims it
        (`Transcribe.prepared`) only when its audio is byte-identical. No event is announced.
        When speech resumes, the preparation is discarded (`speech_resumed`): a later pause
        prepares again or the stop commits different audio. While a decision
        transcription of the same speech is pending, nothing is prepared until its verdict
        (`decided`): most such turns are backchannels, never committed. Nor after a verdict
        on this speech: a backchannel's turn is dropped at its stop, and an interruption's
        commit keeps the verdict's words when it can (`_known_transcript`); a decision in the
        person's short ASR window (`calibration.whisper_window.PERSON_WINDOW_S`) is often back
        before the pause, and a preparation then transcribed the same words again.
        """
        if self.turn_detection is None or self._speech_item is None:
            return
        self._silent_end_ms = audio_end_ms
        item_id, start_ms = self._speech_item
        if self.turn_detection.semantic:
            self._log.effect(PredictTurnEnd(item_id, self.audio.peek(
                start_ms, min(audio_end_ms + UTTERANCE_TAIL_MS, self.audio.end_ms)),
                audio_end_ms))
        if self.decision_audio(item_id, audio_end_ms) is not None:
            self._skipped_pause = (item_id, audio_end_ms)
            return
        pcm16 = self.audio.peek(start_ms, min(audio_end_ms + UTTERANCE_TAIL_MS,
                                              self.audio.end_ms))
        if self._backchannel == (item_id, audio_end_ms) or self._known_transcript(
                item_id, audio_end_ms, pcm16) is not None:
            return
        self._prepared = (item_id, pcm16)
        self._log.effect(PrepareTranscription(item_id, pcm16,
                                              max(start_ms, self.audio.start_ms)))

    def speech_stopped(self, audio_end_ms: int) -> None:
        """Server VAD heard the utterance end at `audio_end_ms`: commit it for transcription,
        drop it (a backchannel up to that end), or hold it while a decision on exactly that
        speech is pending (`decided` commits or drops it; meanwhile a new turn may start)."""
        if self.turn_detection is None or self._speech_item is None:
            return
        item_id, start_ms = self._speech_item
        self._log.emit("input_audio_buffer.speech_stopped", audio_end_ms=audio_end_ms,
                       item_id=item_id)
        end_ms = min(audio_end_ms + UTTERANCE_TAIL_MS, self.audio.end_ms)
        backchannel, self._backchannel = self._backchannel, None
        self._silent_end_ms = self._skipped_pause = None
        if backchannel == (item_id, audio_end_ms):
            self.audio.take(start_ms, end_ms)
            self._forget_turn()
            return
        if self.decision_audio(item_id, audio_end_ms) is not None:
            self._held = (item_id, start_ms, audio_end_ms)
            self._speech_item = None
            return
        self._commit(start_ms, end_ms, item_id, audio_end_ms)
        self._speech_item = None

    def timeout_triggered(self, idle_ms: float) -> bool:
        """`idle_timeout_ms` passed without speech: the last `idle_ms` of input audio (the
        silence since the last reply played out) is announced
        (`input_audio_buffer.timeout_triggered`) and committed as a user item without words
        (OpenAI: "The empty audio will be committed to the conversation as an input_audio
        item"). False, with an `error` (`history_limit_exceeded`), when the history is full."""
        try:
            self._items.check_room(2, None)
        except protocol.ProtocolError as full:
            self._log.error(full)
            return False
        end_ms = self.audio.end_ms
        start_ms = max(self.audio.start_ms, end_ms - int(idle_ms))
        item_id = self._items.new_id()
        self._log.emit("input_audio_buffer.timeout_triggered", audio_start_ms=start_ms,
                       audio_end_ms=end_ms, item_id=item_id)
        self.audio.take(start_ms, end_ms)
        self._log.emit("input_audio_buffer.committed", item_id=item_id,
                       previous_item_id=self._items.last_id())
        self._items.add(HistoryItem(id=item_id, role="user", text="",
                                    content_type="input_audio"))
        return True

    def _commit(self, start_ms: int, end_ms: int, item_id: str | None,
                speech_end_ms: int | None) -> str | None:
        """Turn input audio [start_ms, end_ms) into user item `item_id` (None: a new one)
        awaiting its transcript; a server VAD turn's speech ended at `speech_end_ms`. Returns
        the item's id, None when it was refused.

        A server VAD turn that finds the history full (`ConversationItems.check_room`; a
        client's own commit was checked before) is refused like a client's event: its audio is
        dropped and an `error` (`history_limit_exceeded`) says why."""
        audio_start_ms = max(start_ms, self.audio.start_ms)
        pcm16 = self.audio.take(start_ms, end_ms)
        try:
            self._items.check_room(0, None)
        except protocol.ProtocolError as full:
            if item_id is not None:
                self._items.reserved.discard(item_id)
            if self._prepared is not None:
                self._log.effect(DiscardTranscription(self._prepared[0]))
            self._prepared = self._decided = None
            self._log.error(full)
            return None
        known = None
        if item_id is not None and speech_end_ms is not None:
            known = self._known_transcript(item_id, speech_end_ms, pcm16)
        self._decided = None
        item_id = item_id or self._items.new_id()
        self._items.reserved.discard(item_id)
        prepared = self._prepared == (item_id, pcm16)
        self._prepared = None
        self._committed = (item_id, pcm16)
        item = HistoryItem(id=item_id, role="user", text="", content_type="input_audio")
        self._log.emit("input_audio_buffer.committed", item_id=item.id,
                       previous_item_id=self._items.last_id())
        self._items.add(item, status="in_progress")
        self.transcripts.expect(item.id, len(pcm16) / 2 / self.audio.sample_rate_hz)
        self._log.effect(Transcribe(item.id, pcm16, audio_start_ms,
                                    prepared=prepared and known is None, transcript=known))
        return item.id

    def _forget_turn(self) -> None:
        """Drop the turn in progress, a turn held for its decision, and their prepared and
        decision transcriptions (they will not commit)."""
        for turn in (self._speech_item, self._held):
            if turn is not None:
                self._items.reserved.discard(turn[0])
        self._speech_item = None
        self._held = None
        self._decision = self._decided = None
        self._silent_end_ms = self._skipped_pause = None
        self._backchannel = None
        if self._prepared is not None:
            self._log.effect(DiscardTranscription(self._prepared[0]))
            self._prepared = None
