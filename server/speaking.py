"""Speaking one segment of a reply: synthesis on a worker thread, in turns at the shared TTS.

`Speaker.speak` voices one segment (a span of the reply's text): the synthesizer's blocking
generator runs on a worker thread, which also resamples the chunks to the session's rate,
converts them to PCM16 and computes their echo envelope (`ReplyEcho`), so the event loop only
queues them on the session (`Generation.on_speech`). Sessions take turns at the voice
(`server.voice_turns.VoiceTurns`), and a continuation far ahead of playback gives the voice up
to another reply's first piece (`PREEMPTIBLE_AHEAD_MS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass

import numpy as np

from calibration.local_asr import foreground_work
from calibration.word_marks import WordMark
from server.input_work import wait_through_cancellation
from server.listening.pcm16 import float_to_pcm16
from server.realtime import modalities
from server.realtime.session import Session
from server.reply_echo import ReplyEcho
from server.sending import Sender
from server.services import Services
from server.speech.resampling import StreamResampler
from server.speech.synthesizer import StopSignal

log = logging.getLogger(__name__)

PREEMPTIBLE_AHEAD_MS = 2000
"""Audio of a reply synthesized but not yet sent (ms) from which its continuation piece gives
the voice up to another reply's first piece and is synthesized again afterwards: the
listener still has that much to hear, while one piece takes at most a few hundred ms (Piper
on 2 cores, short pieces), so the redo comes long before an underrun."""


@dataclass(frozen=True, slots=True)
class _Speech:
    """One synthesized chunk made ready on the TTS worker thread, so that the event loop only
    queues it: PCM16 LE at the session's rate, its word marks on the reply text, and the
    envelope levels of its audio for the reply's echo reference when its piece is eager
    (`ReplyEcho`), else None."""

    pcm16: bytes
    marks: list[WordMark]
    echo_levels: np.ndarray | None


class Speaker:
    """The voice of one session's replies.

    Args:
        session: the session the audio is queued on.
        services: the synthesizer and the TTS turns shared by every session.
        sender: carries out the effects of each queued chunk and wakes the send loop
            (`Sender.apply_effects`: never waits on the socket).
    """

    def __init__(self, session: Session, services: Services, sender: Sender) -> None:
        self.session = session
        self.synthesizer = services.synthesizer
        self.tts_turn = services.tts_turn
        self._sender = sender
        self._reply_echo: ReplyEcho | None = None

    def latest_echo(self) -> ReplyEcho | None:
        """The echo reference of the latest reply spoken, or None before the first."""
        return self._reply_echo

    async def speak(self, response_id: str, span: tuple[int, int]) -> bool:
        """Synthesize one segment of the reply, `span` = [start, end) in code points of its
        text, and queue each chunk as soon as it exists.

        Chunks cross from the worker thread to the loop through a queue, so a segment's first
        chunk is sent while the next is synthesized (one resampler stream per segment,
        `StreamResampler`: a sentence may come in parts cut inside its audio). The TTS turn is
        held until that thread has returned, also when this task is cancelled (a barge-in, a
        closed socket): the stop signal ends the engine's work within milliseconds
        (`StopSignal`), and the next session never finds the voice busy with a sentence nobody
        will hear. Nothing here waits on the socket: a client that stops reading cannot hold
        the voice. The turn is one segment long and asked for with the reply's standing
        (`VoiceTurns.turn`: first piece, or audio buffered ahead); a continuation with
        `PREEMPTIBLE_AHEAD_MS` buffered gives the voice up to another reply's first piece
        before its first chunk and is synthesized again after it, so a first piece waits for at
        most a segment of a reply that has little audio buffered; while a first piece waits or
        is synthesized, in-process background ASR (calibration) does not start
        (`calibration.local_asr.foreground_work`).

        Returns False when the response stopped generating (the rest is dropped). A reply of
        text only (`modalities.TEXT`) queues the segment's text and nothing is synthesized.
        Raises what the synthesizer raises.
        """
        response = self.session.responses.get(response_id)
        if response is None:  # its item was deleted, and the response freed with it
            return False
        if response.output_modalities == modalities.TEXT:
            return self.session.generation.on_speech(response_id, span[1], b"", [])
        while (spoke := await self._synthesize(response_id, span)) is None:
            log.debug("%s: a continuation piece gave the voice to a first piece", response_id)
        return spoke

    def _echo_for(self, response_id: str) -> ReplyEcho:
        """The reply's echo reference, which holds the envelope of its audio queued for sending
        (in reply order: the queue sends it at these positions); only the latest reply's is
        kept, the one `ReplyPlayback.position_ms` maps the microphone to. Computed as the
        audio is synthesized when the reply starts under server VAD, else only once server
        VAD asks for it (`ReplyEcho`)."""
        if self._reply_echo is None or self._reply_echo.response_id != response_id:
            self._reply_echo = ReplyEcho(response_id, self.session.config.sample_rate_hz,
                                         eager=self.session.turn_detection is not None)
        return self._reply_echo

    async def _synthesize(self, response_id: str, span: tuple[int, int]) -> bool | None:
        """One attempt of `speak`: None when the piece was preempted before its first chunk
        (nothing of it was queued; synthesize it again)."""
        start, end = span
        response = self.session.responses.get(response_id)
        if response is None:  # its item was deleted, and the response freed with it
            return False
        text = response.text[start:end]
        synthesizer = self.synthesizer
        rate = self.session.config.sample_rate_hz
        echo = self._echo_for(response_id)
        eager = echo.eager
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[_Speech | BaseException | None] = asyncio.Queue()
        stop = StopSignal()
        preemption = _Preemption(stop)

        def queue(pcm: np.ndarray, marks: list[WordMark]) -> bool:
            if len(pcm):
                pcm16 = float_to_pcm16(pcm)
                if not preemption.admit():
                    return False
                speech = _Speech(pcm16, marks, echo.envelope(pcm16) if eager else None)
                loop.call_soon_threadsafe(chunks.put_nowait, speech)
            return not stop.is_set()

        def produce() -> None:
            try:
                resampler = StreamResampler(synthesizer.sample_rate_hz, rate)
                with contextlib.closing(synthesizer.synthesize(text, stop)) as produced:
                    for chunk in produced:
                        held, own = resampler.feed(chunk.pcm)
                        if not queue(held, []) or not queue(
                                own, [mark.shifted(start, 0) for mark in chunk.marks]):
                            break
                    else:
                        queue(resampler.flush(), [])
                loop.call_soon_threadsafe(chunks.put_nowait, None)
            except Exception as exc:
                loop.call_soon_threadsafe(chunks.put_nowait, exc)

        cursor = response.cursor
        first = cursor.generated_ms == 0
        ahead_ms = cursor.generated_ms - cursor.sent_ms
        preempt = (preemption.preempt if not first and ahead_ms >= PREEMPTIBLE_AHEAD_MS
                   else None)
        spoke = False
        with foreground_work() if first else contextlib.nullcontext():
            async with self.tts_turn.turn(first=first, ahead_ms=ahead_ms, preempt=preempt):
                worker = loop.run_in_executor(None, produce)
                try:
                    while (item := await chunks.get()) is not None:
                        if isinstance(item, BaseException):
                            if preemption.preempted:
                                break
                            raise item
                        if not self.session.generation.on_speech(response_id, end, item.pcm16,
                                                      item.marks):
                            return False
                        echo.add(item.pcm16, item.echo_levels)
                        spoke = True
                        self._sender.apply_effects()
                finally:
                    stop.set()
                    await wait_through_cancellation(worker)
        if preemption.preempted:
            return None
        return spoke or self.session.generation.on_speech(response_id, end, b"", [])


class _Preemption:
    """Whether a piece gave the voice up before its first chunk was queued (thread-safe: the
    event loop preempts, the TTS worker thread admits chunks)."""

    def __init__(self, stop: StopSignal) -> None:
        self._lock = threading.Lock()
        self._stop = stop
        self._admitted = False
        self.preempted = False

    def preempt(self) -> None:
        """Stop the piece unless a chunk of it was already queued (then it runs to its end)."""
        with self._lock:
            if self._admitted:
                return
            self.preempted = True
        self._stop.set()

    def admit(self) -> bool:
        """On the worker thread, before queueing a chunk: False once preempted."""
        with self._lock:
            if self.preempted:
                return False
            self._admitted = True
            return True
