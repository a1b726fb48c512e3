"""The asyncio work on the person's turns: server VAD, transcripts, the end-of-turn model.

`TurnWork` carries out the session's input effects off the event loop and hands each result
back to the session as soon as it is ready, then settles (`Sender.settle`):

- `DetectSpeech`: queued for server VAD, which the receiver runs before it reads the next
  frame (`SessionInput.detect_speech`); `EndTurn`: semantic VAD's turn end, on the same input
  lane (`SessionInput.end_turn`);
- `Transcribe`: a committed turn's transcript (`TurnTaking.on_transcription`), handed over in the
  order the turns were spoken; `PrepareTranscription`: the transcript started at a turn's
  pause, claimed by its `Transcribe` if the turn ends there (`DiscardTranscription` drops it);
  `DecideTranscription`: the transcript that decides a paused reply;
- `PredictTurnEnd`: the end-of-turn model's probability (`server.listening.smart_turn`).

ASR is the session's input transcriber (faster-whisper tiny.en on a worker thread) on the
turn's audio with the reply's echo suppressed where server VAD's echo detector knows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any

from calibration.asr import Transcriber
from server.input_work import SessionInput
from server.listening.silero_vad import resample_to_16k
from server.listening.smart_turn import end_of_turn_probability
from server.realtime.effects import (
    DecideTranscription,
    DetectSpeech,
    DiscardTranscription,
    EndTurn,
    PredictTurnEnd,
    PrepareTranscription,
    Transcribe,
)
from server.realtime.session import Session
from server.sending import Sender, now_ms

log = logging.getLogger(__name__)

InputEffect = (DetectSpeech | Transcribe | PrepareTranscription | DecideTranscription
               | DiscardTranscription | PredictTurnEnd | EndTurn)
"""The session's effects `TurnWork.apply` carries out."""


class TurnWork:
    """The work on one session's turns, started by its input effects.

    Args:
        session: the session the results are handed to.
        transcriber: ASR for the person's turns (`Services.input_transcriber`).
        session_input: the session's input lane (server VAD, echo suppression before ASR).
        sender: settles after each result is handed over.
    """

    def __init__(self, session: Session, transcriber: Transcriber,
                 session_input: SessionInput, sender: Sender) -> None:
        self.session = session
        self.transcriber = transcriber
        self._input = session_input
        self._sender = sender
        self._transcriptions: set[asyncio.Future[None]] = set()
        self._latest_transcription: asyncio.Future[None] | None = None
        self._prepared: tuple[str, asyncio.Future[str]] | None = None
        self._background: set[asyncio.Future[None]] = set()

    def apply(self, effect: InputEffect) -> None:
        """Carry out one input effect of the session (on the event loop; the work runs in
        tasks of its own)."""
        match effect:
            case DetectSpeech():
                self._input.queue(effect)
            case Transcribe(item_id=item_id, pcm16=pcm16, audio_start_ms=start_ms,
                            prepared=prepared, transcript=known):
                recognition = self._take_prepared(item_id if prepared else None)
                if known is not None:
                    recognition = asyncio.get_running_loop().create_future()
                    recognition.set_result(known)
                task = asyncio.ensure_future(self._transcribe(
                    item_id, pcm16, start_ms, recognition, self._latest_transcription))
                self._latest_transcription = task
                self._transcriptions.add(task)
                task.add_done_callback(self._transcriptions.discard)
            case PrepareTranscription(item_id=item_id, pcm16=pcm16, audio_start_ms=start_ms):
                self._take_prepared(None)
                recognition = asyncio.ensure_future(self._recognise(pcm16, start_ms))
                self._prepared = (item_id, recognition)
                self._in_background(self._prepared_transcription(item_id, recognition))
            case DecideTranscription(item_id=item_id, pcm16=pcm16, audio_start_ms=start_ms,
                                     audio_end_ms=end_ms):
                self._in_background(self._decision_transcription(
                    item_id, pcm16, start_ms, end_ms))
            case PredictTurnEnd(item_id=item_id, pcm16=pcm16, audio_end_ms=end_ms):
                self._in_background(self._predict_turn_end(item_id, pcm16, end_ms))
            case EndTurn(audio_end_ms=end_ms, min_silence_ms=wait_ms):
                self._in_background(self._input.end_turn(end_ms, wait_ms, self._sender.settle))
            case DiscardTranscription(item_id=item_id):
                if self._prepared is not None and self._prepared[0] == item_id:
                    self._take_prepared(None)

    async def transcripts(self, timeout_s: float | None = None) -> None:
        """Wait until the transcripts of the turns committed so far were handed to the
        session (a prompt needs them), at most `timeout_s` seconds (None: no limit)."""
        if self._transcriptions:
            await asyncio.wait(list(self._transcriptions), timeout=timeout_s)

    @property
    def transcribing(self) -> bool:
        """A committed turn's transcript is still to be handed to the session."""
        return bool(self._transcriptions)

    def tasks(self) -> list[asyncio.Future[Any]]:
        """Every task of this work still running (the connection cancels them at its end)."""
        tasks: list[asyncio.Future[Any]] = [*self._background, *self._transcriptions]
        if self._prepared is not None:
            tasks.append(self._prepared[1])
        return tasks

    def _in_background(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _take_prepared(self, item_id: str | None) -> asyncio.Future[str] | None:
        """Remove the prepared transcription; return it when it is `item_id`'s, else cancel
        it (a stale speculation: its result is never used).

        Cost: a cancelled in-process transcription still runs to its end on its worker thread
        (`LocalWhisperTranscriber` holds its slot until then), so each stale speculation, one
        per pause after which the person spoke on, costs a whole transcription (measured with
        tiny.en: about 0.6 s CPU for 2-3 s of speech), spent while the person is speaking.
        """
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            return None
        if prepared[0] == item_id:
            return prepared[1]
        prepared[1].cancel()
        return None

    async def _recognise(self, pcm16: bytes, start_ms: int, person_only: bool = False) -> str:
        """Run the input transcriber (faster-whisper on a worker thread) on PCM16 LE mono at
        the input rate from `start_ms` on the input timeline, with the reply's echo that
        server VAD's echo detector knows there suppressed (`SessionInput.asr_samples`, on the
        input workers; `person_only`: and the room around the person); "" when it fails
        (logged)."""
        try:
            samples = await self._input.asr_samples(pcm16, start_ms, person_only)
            return await self.transcriber.transcribe(samples, self.session.config.sample_rate_hz)
        except Exception as exc:
            log.warning("input transcription failed: %s", type(exc).__name__)
            return ""

    async def _prepared_transcription(self, item_id: str,
                                      recognition: asyncio.Future[str]) -> None:
        """Hand a prepared transcription to the session as soon as it is ready: it decides a
        reply paused by that utterance (`TurnTaking.on_prepared_transcription`)."""
        with contextlib.suppress(asyncio.CancelledError):
            transcript = await asyncio.shield(recognition)
            self.session.set_clock(now_ms())
            self.session.turn_taking.on_prepared_transcription(item_id, transcript)
            await self._sender.settle()

    async def _predict_turn_end(self, item_id: str, pcm16: bytes, audio_end_ms: int) -> None:
        """Run the end-of-turn model on a worker thread over a turn's audio up to its pause
        (PCM16 LE at the input rate) and hand the probability to the session
        (`TurnTaking.on_turn_end_probability`); nothing when it fails (logged: the turn then
        ends after the eagerness's longest silence)."""
        try:
            probability = await asyncio.to_thread(
                end_of_turn_probability,
                resample_to_16k(pcm16, self.session.config.sample_rate_hz))
        except Exception as exc:
            log.warning("end-of-turn model failed: %s", type(exc).__name__)
            return
        self.session.set_clock(now_ms())
        self.session.turn_taking.on_turn_end_probability(item_id, audio_end_ms, probability)
        await self._sender.settle()

    async def _decision_transcription(self, item_id: str, pcm16: bytes, start_ms: int,
                                      audio_end_ms: int) -> None:
        """Transcribe the person's part of a turn up to its speech gap at `audio_end_ms` (its
        audio `pcm16` from `start_ms`) and hand it to the session as soon as it is ready: it
        decides the reply that turn paused (`TurnTaking.on_decision_transcription`). The
        recognition starts here, in this task: a coroutine made for it beforehand and never
        awaited (this task cancelled before it ran, the session closing) was a
        `RuntimeWarning` under load."""
        transcript = await self._recognise(pcm16, start_ms, person_only=True)
        self.session.set_clock(now_ms())
        self.session.turn_taking.on_decision_transcription(item_id, audio_end_ms, transcript)
        await self._sender.settle()

    async def _transcribe(self, item_id: str, pcm16: bytes, start_ms: int,
                          prepared: asyncio.Future[str] | None,
                          previous: asyncio.Future[None] | None) -> None:
        """Transcribe a committed utterance, or await its `prepared` transcription (started
        at the turn's pause on the same audio), and hand the transcript to the session once
        the `previous` committed utterance's was handed over: transcripts reach the session in
        the order the turns were spoken, so a late transcript never lands after a newer turn
        (and never starts a response of its own behind that turn's)."""
        transcript = await (prepared if prepared is not None
                            else self._recognise(pcm16, start_ms))
        if previous is not None:
            await asyncio.wait((previous,))
        self.session.set_clock(now_ms())
        self.session.turn_taking.on_transcription(item_id, transcript)
        await self._sender.settle()
