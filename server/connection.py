"""The per-socket asyncio driver: feeds the sans-I/O `Session`, runs generation, paces audio.

One `Connection` per WebSocket. It owns three kinds of tasks: the receive loop (client frames in
arrival order), the send loop (pacing by `Session.pull_outbound` at its deadlines, and woken by new
audio and calibration results), and one generation task per response (calibration wait,
responder, segmenter, TTS on a worker thread). A client frame that can release audio (an ACK, a
cancel) pulls it at once, so its answer and that audio leave together in one socket write
(`server.outbound.send_events`). Every write to the socket happens under one lock, so server
events leave in the order the session produced them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from calibration.asr import Transcriber
from calibration.history_calibration import HistoryCalibration, HistoryCalibrationPolicy
from calibration.local_asr import foreground_work
from calibration.word_marks import WordMark
from server.input_work import SessionInput, wait_through_cancellation
from server.listening.pcm16 import float_to_pcm16
from server.listening.silero_vad import resample_to_16k
from server.listening.smart_turn import end_of_turn_probability
from server.outbound import send_events
from server.realtime import modalities
from server.realtime.drop import cut_at_drop
from server.realtime.effects import (
    CancelGeneration,
    DecideTranscription,
    DetectSpeech,
    DiscardTranscription,
    Effect,
    EndTurn,
    PredictTurnEnd,
    PrepareTranscription,
    StartGeneration,
    Transcribe,
    WakeSender,
)
from server.realtime.limits import Admission, EventRateLimiter, rate_limit_error
from server.realtime.protocol import ClientEvent, ProtocolError
from server.realtime.session import Session, SessionConfig
from server.realtime_socket import RealtimeServerConnection
from server.reply_echo import ReplyEcho
from server.reply_text import ReplyText
from server.responders.prompt import Prompt, Responder, ResponderError
from server.responders.tools import ToolCall
from server.speech.resampling import StreamResampler
from server.speech.synthesizer import SpeechSynthesizer, StopSignal
from server.voice_turns import VoiceTurns

log = logging.getLogger(__name__)

STALLED_CLIENT_CLOSE_CODE = 1008
"""Close code for a client that stopped reading (RFC 6455 7.4.1 "policy violation": the
endpoint broke the terms of the connection; 1011 would blame the server)."""
STALLED_CLIENT_CLOSE_REASON = "client stopped reading"

PREEMPTIBLE_AHEAD_MS = 2000
"""Audio of a reply synthesized but not yet sent (ms) from which its continuation piece gives
the voice up to another reply's first piece and is synthesized again afterwards: the
listener still has that much to hear, while one piece takes at most a few hundred ms (Piper
on 2 cores, short pieces), so the redo comes long before an underrun."""

WIND_DOWN_TIMEOUT_S = 5.0
"""Longest wait (s) for the transcripts of committed turns when a dropped session is parked
(faster-whisper tiny.en takes well under a second for a turn on 2 cores); a later one is
lost with the connection's tasks."""

GENERATION_AHEAD_MS = 5000
"""Synthesized audio a reply may hold unsent before its next segment is synthesized (ms): a
sentence or two of margin over the pacing lead, so playback never waits on the TTS."""


@dataclass(frozen=True, slots=True)
class Services:
    """Process-wide parts shared by every connection.

    Attributes:
        synthesizer: the TTS engine (thread-safe, warmed up).
        responder: the reply generator.
        session_config: settings copied into each new session.
        policy: the heard-text calibration policy, or None for `--calibration off`.
        input_transcriber: ASR for the person's spoken turns (faster-whisper tiny.en).
        history_audio_max_bytes: retained reply audio per session (bytes).
        calibration_timeout_s: per-callback and per-prompt calibration budget (s).
        send_timeout_s: longest wait for the socket to take one server frame (s); a client
            that reads nothing for that long is closed with `STALLED_CLIENT_CLOSE_CODE`.
        tts_turn: sessions take turns at the TTS here, one synthesis piece per turn, a
            reply's first piece before continuations, the least-buffered continuation first,
            a continuation far ahead of playback preempted (`server.voice_turns.VoiceTurns`);
            a cancelled reply still waiting leaves the queue at once; the reply holding the
            turn keeps it until its worker thread has returned, which a cancel makes happen
            within milliseconds (`Connection._speak`), so the turn is free exactly when the
            engine is.
        idle_timeout_s: close a session (1000) after this long without a client frame (s);
            None: never.
        max_events_per_s: client frames applied per session in any 1 s
            (`server.realtime.limits.EventRateLimiter`); None: no limit.
        input_speed: bound on a session's input audio, as a multiple of real time over
            `input_window_s` (`server.realtime.input_budget.InputAudioBudget`): beyond it the
            session's next event is read only once the bound allows (throttled, not
            refused); None: no bound.
        input_window_s: the window of `input_speed` (s): a session may append
            `input_speed * input_window_s` s of audio at once.
    """

    synthesizer: SpeechSynthesizer
    responder: Responder
    session_config: SessionConfig
    policy: HistoryCalibrationPolicy | None
    input_transcriber: Transcriber
    history_audio_max_bytes: int = 8 * 1024 * 1024
    calibration_timeout_s: float = 1.0
    send_timeout_s: float = 10.0
    tts_turn: VoiceTurns = field(default_factory=VoiceTurns)
    idle_timeout_s: float | None = None
    max_events_per_s: int | None = None
    input_speed: float | None = None
    input_window_s: float = 5.0


def _now_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass(frozen=True, slots=True)
class _Speech:
    """One synthesized chunk made ready on the TTS worker thread, so that the event loop only
    queues it: PCM16 LE at the session's rate, its word marks on the reply text, and the
    envelope levels of its audio for the reply's echo reference when its piece is eager
    (`ReplyEcho`), else None."""

    pcm16: bytes
    marks: list[WordMark]
    echo_levels: np.ndarray | None


class SessionObserver(Protocol):
    """Sees one session's traffic in order, e.g. `server.metrics.SessionMetrics`."""

    def client_event(self, event: ClientEvent | ProtocolError) -> None:
        """A client frame was given to the session: its event when applied, else the error
        it was refused with."""

    def server_event(self, event: dict[str, Any]) -> None:
        """A server event is being sent."""


class _NoObserver:
    """The observer of a connection nobody observes."""

    def client_event(self, event: ClientEvent | ProtocolError) -> None:
        pass

    def server_event(self, event: dict[str, Any]) -> None:
        pass


class Connection:
    """Drive one session over one WebSocket.

    Args:
        websocket: the accepted `websockets` server connection.
        services: shared TTS, responder and calibration settings.
        session_id: id for the new session.
        observer: told of every applied client event and every server event (metrics).
        session: a parked session to serve again (a resume), else a new one is made.

    Attributes:
        opening: keyword arguments of `Session.open` (the resume token, `session.resumed`).
        keep: asked when the connection ended whether the session will be parked
            (`server.resumption`); if so, `run` first applies the drop to it
            (`_wind_down`).
    """

    def __init__(self, websocket: ServerConnection, services: Services, session_id: str,
                 observer: SessionObserver | None = None,
                 session: Session | None = None) -> None:
        self.websocket = websocket
        self.observer = observer or _NoObserver()
        self.services = services
        self.session = session or Session(services.session_config, session_id=session_id)
        self.opening: dict[str, Any] = {}
        self.keep: Callable[[], bool] | None = None
        self.calibration: HistoryCalibration | None = None
        if services.policy is not None:
            self.calibration = HistoryCalibration(
                self.session.heard_text, services.policy,
                max_bytes=services.history_audio_max_bytes,
                timeout_s=services.calibration_timeout_s,
                on_applied=self._on_calibrated,
                on_failed=self._on_calibration_failed,
            )
            self.session.calibration = self.calibration
        self._write_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._sent = asyncio.Event()
        self._pull_due = False
        self._deadline_ms: float | None = None
        self._sender_sleeps_until_ms: float | None = None
        self._receiving: asyncio.Timeout | None = None
        self._receiving_since = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._generations: dict[str, asyncio.Task[None]] = {}
        self._readers: dict[str, asyncio.Task[bool]] = {}
        self._stopped_readers: set[asyncio.Task[bool]] = set()
        self._background: set[asyncio.Future[None]] = set()
        self._transcriptions: set[asyncio.Future[None]] = set()
        self._latest_transcription: asyncio.Future[None] | None = None
        self._prepared: tuple[str, asyncio.Future[str]] | None = None
        self._reply_echo: ReplyEcho | None = None
        self._input = SessionInput(self.session, services.input_speed,
                                   services.input_window_s)
        self._rate = (EventRateLimiter(services.max_events_per_s)
                      if services.max_events_per_s else None)
        self._close_received = False
        if isinstance(websocket, RealtimeServerConnection):
            websocket.on_close_frame = self._on_close_frame

    async def run(self) -> None:
        """Serve the session until the socket closes; then cancel everything it started."""
        self.session.open(**self.opening)
        sender = asyncio.create_task(self._send_loop())
        if self.services.idle_timeout_s is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(
                self.services.idle_timeout_s, self._check_idle)
        try:
            await self._settle()
            while (frame := await self._next_frame()) is not None:
                if not await self._apply_frame(frame):
                    break
        except ConnectionClosed:
            pass
        finally:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            if self.keep is not None and self.keep():
                await self._wind_down()
            tasks = [sender, *self._generations.values(), *self._background,
                     *self._transcriptions]
            if self._prepared is not None:
                tasks.append(self._prepared[1])
            self.session.close()
            self._apply_effects()
            for response_id in list(self._readers):
                self._stop_reader(response_id)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, *self._stopped_readers, return_exceptions=True)
            if isinstance(self.websocket, RealtimeServerConnection):
                # the connection would hold this object (a cycle) as long as it lives
                self.websocket.on_close_frame = None

    async def _wind_down(self) -> None:
        """Before the session is parked: cut the reply at the drop (`drop.cut_at_drop`), let
        the committed turns' transcripts and the cut's calibration finish (each within its
        own bound: `WIND_DOWN_TIMEOUT_S`, `calibration_timeout_s`), and hand the events meant
        for the gone client to the observer only."""
        self.session.set_clock(_now_ms())
        if (drop := cut_at_drop(self.session)) is not None:
            self.observer.client_event(drop)
        self._carry_out_effects()
        if self._transcriptions:
            await asyncio.wait(list(self._transcriptions), timeout=WIND_DOWN_TIMEOUT_S)
            self.session.set_clock(_now_ms())
            if (drop := cut_at_drop(self.session)) is not None:  # a transcript started one
                self.observer.client_event(drop)
            self._carry_out_effects()
        if self.calibration is not None:
            await self.calibration.before_prompt()
        self._carry_out_effects()
        for event in self.session.take_events():
            self.observer.server_event(event)

    async def _next_frame(self) -> str | bytes | None:
        """The next client frame; None once the client's close frame arrived
        (`RealtimeServerConnection`), or once the connection was closed for being idle (no
        frame for `Services.idle_timeout_s`: close 1000 with the reason). Raises
        `ConnectionClosed` when the connection ended.

        The wait's timeout has no timer of its own: `_check_idle` (one timer per idle period,
        not one per frame) expires it once it has lasted `idle_timeout_s`, and the close frame
        expires it at once (`_on_close_frame`).
        """
        if self._close_received:
            return None
        self._receiving_since = asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(None) as receiving:
                self._receiving = receiving
                try:
                    return await self.websocket.recv()
                finally:
                    self._receiving = None
        except TimeoutError:
            if self._close_received:
                return None
            idle_s = self.services.idle_timeout_s
            await self._close(1000, f"idle timeout: no client event for {idle_s:g} s")
            return None

    def _on_close_frame(self) -> None:
        """The client's close frame arrived: the session ends now (the receive wait of
        `_next_frame` expires, and `run` cancels the reply and closes its LLM stream), not when
        the TCP connection ends."""
        self._close_received = True
        receiving = self._receiving
        if receiving is not None and not receiving.expired():
            receiving.reschedule(asyncio.get_running_loop().time())

    def _check_idle(self) -> None:
        """Timer callback: expire the receive wait of `_next_frame` once it has lasted
        `idle_timeout_s`; otherwise look again when the current (or next) wait could have."""
        idle_s = self.services.idle_timeout_s
        assert idle_s is not None
        loop = asyncio.get_running_loop()
        now = loop.time()
        receiving = self._receiving
        since = self._receiving_since if receiving is not None else now
        if receiving is not None and now >= since + idle_s:
            receiving.reschedule(now)  # a frame taken meanwhile still wins: look again later
            since = now
        self._idle_timer = loop.call_at(since + idle_s, self._check_idle)

    async def _close(self, code: int, reason: str) -> None:
        """Close the connection from this side, discarding the frames the client still sends
        until it answers: reading may be paused (a full receive queue), and only reading lets
        websockets see the client's close frame."""
        closing = asyncio.ensure_future(self.websocket.close(code, reason))
        with contextlib.suppress(ConnectionClosed):
            async for _ in self.websocket:
                pass
        await closing

    async def _apply_frame(self, frame: str | bytes) -> bool:
        """Give one client frame to the session, or refuse it above the event rate (an `error`
        event); False once the connection was closed for sustained excess (1008).

        The server VAD of appended audio runs on the input workers before the next frame is
        read, so the session sees its turn events where it saw them when VAD ran inline; and
        input audio beyond the session's bound holds the next frame back
        (`SessionInput.detect_speech`, `SessionInput.throttle`)."""
        now_ms = _now_ms()
        rate = self._rate
        admission = rate.admit(now_ms) if rate is not None else Admission.ACCEPT
        input_end_ms = self.session.input_turns.audio.end_ms
        if rate is None or admission is Admission.ACCEPT:
            self.session.set_clock(now_ms)
            self.observer.client_event(self.session.receive(frame))
        else:
            self.session.refuse(rate_limit_error(frame, rate))
        await self._settle()
        await self._input.detect_speech(lambda: self._reply_echo, self._settle)
        if admission is Admission.CLOSE:
            await self._close(1008, "event rate limit exceeded")
            return False
        if not await self._input.throttle(self.session.input_turns.audio.end_ms - input_end_ms,
                                          self.websocket):
            await self._close(1008, "input audio faster than the bound (--max-input-speed)")
            return False
        return True

    # ------------------------------------------------------------------ plumbing

    def _apply_effects(self) -> None:
        """Carry out the session's effects; output to pull wakes the send loop."""
        self._carry_out_effects()
        if self._pull_due:
            self._wake.set()

    def _carry_out_effects(self) -> None:
        while effects := self.session.take_effects():
            for effect in effects:
                self._apply(effect)

    def _apply(self, effect: Effect) -> None:
        match effect:
            case StartGeneration(response_id=response_id):
                self._generations[response_id] = asyncio.create_task(
                    self._generate(response_id)
                )
            case CancelGeneration(response_id=response_id):
                self._stop_reader(response_id)
                task = self._generations.pop(response_id, None)
                if task is not None and task is not asyncio.current_task():
                    task.cancel()
            case WakeSender():
                self._pull_due = True
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
                task = asyncio.ensure_future(self._prepared_transcription(item_id, recognition))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            case DecideTranscription(item_id=item_id, pcm16=pcm16, audio_start_ms=start_ms,
                                     audio_end_ms=end_ms):
                task = asyncio.ensure_future(self._decision_transcription(
                    item_id, end_ms, self._recognise(pcm16, start_ms)))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            case PredictTurnEnd(item_id=item_id, pcm16=pcm16, audio_end_ms=end_ms):
                task = asyncio.ensure_future(self._predict_turn_end(item_id, pcm16, end_ms))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            case EndTurn(audio_end_ms=end_ms, min_silence_ms=wait_ms):
                task = asyncio.ensure_future(self._input.end_turn(end_ms, wait_ms, self._settle))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            case DiscardTranscription(item_id=item_id):
                if self._prepared is not None and self._prepared[0] == item_id:
                    self._take_prepared(None)

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

    async def _recognise(self, pcm16: bytes, start_ms: int) -> str:
        """Run the input transcriber (faster-whisper on a worker thread) on PCM16 LE mono at
        the input rate from `start_ms` on the input timeline, with the reply's echo that
        server VAD's echo detector knows there suppressed (`SessionInput.asr_samples`, on the
        input workers); "" when it fails (logged)."""
        try:
            samples = await self._input.asr_samples(pcm16, start_ms)
            return await self.services.input_transcriber.transcribe(
                samples, self.session.config.sample_rate_hz)
        except Exception as exc:
            log.warning("input transcription failed: %s", type(exc).__name__)
            return ""

    def _reply_echo_for(self, response_id: str) -> ReplyEcho:
        """The reply's echo reference, which holds the envelope of its audio queued for sending
        (in reply order: the queue sends it at these positions); only the latest reply's is
        kept, the one `ReplyPlayback.position_ms` maps the microphone to. Computed as the
        audio is synthesized when the reply starts under server VAD, else only once server
        VAD asks for it (`ReplyEcho`)."""
        if self._reply_echo is None or self._reply_echo.response_id != response_id:
            self._reply_echo = ReplyEcho(response_id, self.session.config.sample_rate_hz,
                                         eager=self.session.turn_detection is not None)
        return self._reply_echo

    async def _prepared_transcription(self, item_id: str,
                                      recognition: asyncio.Future[str]) -> None:
        """Hand a prepared transcription to the session as soon as it is ready: it decides a
        reply paused by that utterance (`TurnTaking.on_prepared_transcription`)."""
        with contextlib.suppress(asyncio.CancelledError):
            transcript = await asyncio.shield(recognition)
            self.session.set_clock(_now_ms())
            self.session.turn_taking.on_prepared_transcription(item_id, transcript)
            await self._settle()

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
        self.session.set_clock(_now_ms())
        self.session.turn_taking.on_turn_end_probability(item_id, audio_end_ms, probability)
        await self._settle()

    async def _decision_transcription(self, item_id: str, audio_end_ms: int,
                                      recognition: Awaitable[str]) -> None:
        """Hand the transcript of a turn up to its speech gap at `audio_end_ms` to the session
        as soon as it is ready: it decides the reply that turn paused
        (`TurnTaking.on_decision_transcription`)."""
        transcript = await recognition
        self.session.set_clock(_now_ms())
        self.session.turn_taking.on_decision_transcription(item_id, audio_end_ms, transcript)
        await self._settle()

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
        self.session.set_clock(_now_ms())
        self.session.turn_taking.on_transcription(item_id, transcript)
        await self._settle()

    async def _settle(self) -> None:
        """Apply the session's effects, pull the audio they released (`_pull`), then send
        the pending events in order, several per socket write (`send_events`).

        Sending waits while the outgoing buffers are full (websockets' write limit, 32 KiB, over
        the kernel's socket buffer): at most `send_timeout_s`, then the client counts as
        stalled and is closed (`_close_stalled`); the events still pending are dropped.
        """
        self._carry_out_effects()
        if self._pull_due:
            self._pull()
        async with self._write_lock:
            events = self.session.take_events()
            for event in events:
                self.observer.server_event(event)
            events = self.session.client_events(events)
            if events and not await send_events(self.websocket, events,
                                                self.services.send_timeout_s):
                await self._close_stalled()

    def _pull(self) -> None:
        """Move the audio pacing lets out now to the session's events
        (`Session.pull_outbound`) and keep its next deadline for the send loop, which is
        woken when it sleeps until later than that. A generation waiting for room
        (`_generation_room`) is woken once the current reply has room, not at every pull."""
        self._pull_due = False
        deadline = self.session.pull_outbound(_now_ms())
        self._deadline_ms = deadline
        current = self.session.responses.get(self.session.current_response_id or "")
        if current is None or (current.cursor.generated_ms - current.cursor.sent_ms
                               <= GENERATION_AHEAD_MS):
            self._sent.set()
        sleeps_until = self._sender_sleeps_until_ms
        if deadline is not None and sleeps_until is not None and deadline < sleeps_until:
            self._wake.set()

    async def _close_stalled(self) -> None:
        """Close the socket of a client that stopped reading: the close frame goes behind the
        unread data (a client that reads again gets `STALLED_CLIENT_CLOSE_CODE`); when even
        that cannot be written within `send_timeout_s`, the TCP connection is aborted. Either
        way the receive loop ends and `run` cancels the session's tasks."""
        timeout_s = self.services.send_timeout_s
        log.warning("%s: the client took no data for %.1f s; closing with code %d",
                    self.session.id, timeout_s, STALLED_CLIENT_CLOSE_CODE)
        try:
            async with asyncio.timeout(timeout_s):
                await self.websocket.close(STALLED_CLIENT_CLOSE_CODE,
                                           STALLED_CLIENT_CLOSE_REASON)
        except TimeoutError:
            self.websocket.transport.abort()

    def _on_calibrated(self, response_id: str, result: int, elapsed_ms: float) -> None:
        self.session.heard_text.announce_calibration(response_id, elapsed_ms)
        cross_check = getattr(result, "cross_check", None)
        if cross_check is not None:
            task = asyncio.ensure_future(self._report_cross_check(response_id, result,
                                                                  cross_check))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        self._wake.set()

    def _on_calibration_failed(self, response_id: str, elapsed_ms: float) -> None:
        """A calibration ended without a result: announce the text kept without it."""
        self.session.heard_text.announce_calibration(response_id, elapsed_ms)
        self._wake.set()

    async def _report_cross_check(
        self, response_id: str, result: int,
        cross_check: Awaitable[tuple[str | None, bool | None]],
    ) -> None:
        """Wait for a marks result's ASR cross-check, then let the session announce it."""
        asr_text, marks_agree = await cross_check
        self.session.heard_text.report_cross_check(response_id, result, asr_text, marks_agree)
        self._wake.set()

    async def _send_loop(self) -> None:
        """Pull and send whenever woken (audio queued by generation, a calibration result, an
        earlier deadline) or at the deadline of the latest pull (real-time pacing, overdue
        ACKs)."""
        while True:
            self._wake.clear()
            self._sender_sleeps_until_ms = None
            self._pull_due = True
            await self._settle()
            deadline = self._deadline_ms
            self._sender_sleeps_until_ms = math.inf if deadline is None else deadline
            timeout = None if deadline is None else max(0.0, (deadline - _now_ms()) / 1000.0)
            await wait_set(self._wake, timeout)

    # ------------------------------------------------------------------ generation

    async def _generate(self, response_id: str) -> None:
        """Write one reply: wait for the transcripts and calibration the prompt needs, then
        read the responder in its own task (`_read_reply`) while this one speaks the segments
        it finds, so a model's tokens reach the session and the segmenter as they arrive.

        A failed responder ends the response as `failed` with an `error` event (a
        `ResponderError`'s message, else the exception's type); the reply's heard text stays
        in history. Cancelling this task (barge-in, cancel, disconnect: `CancelGeneration`
        cancels the reader first) closes the responder's stream.
        """
        session = self.session
        try:
            if self._transcriptions:
                await asyncio.wait(list(self._transcriptions))
            if self.calibration is not None:
                await self.calibration.before_prompt()
            prompt = session.generation.build_prompt(response_id)
            if prompt is None:
                return
            reply = ReplyText()
            reader = asyncio.create_task(self._read_reply(response_id, prompt, reply))
            self._readers[response_id] = reader
            try:
                while (span := await reply.next_span()) is not None:
                    if reader.done() and not reader.cancelled():
                        reader.result()
                    await self._generation_room(response_id)
                    if not await self._speak(response_id, span):
                        return
                if reader.cancelled() or not await reader:
                    return
            finally:
                if self._readers.get(response_id) is reader:
                    self._stop_reader(response_id)
                if reader.done() and not reader.cancelled():
                    reader.exception()
            session.generation.on_done(response_id)
        except asyncio.CancelledError:
            raise
        except ResponderError as exc:
            log.warning("%s: the responder failed: %s", response_id, exc)
            session.generation.on_failed(response_id, str(exc))
        except Exception as exc:
            log.exception("generation failed for %s", response_id)
            session.generation.on_failed(response_id, f"{type(exc).__name__} during generation")
        finally:
            if self._generations.get(response_id) is asyncio.current_task():
                del self._generations[response_id]
        await self._settle()

    async def _read_reply(self, response_id: str, prompt: Prompt, reply: ReplyText) -> bool:
        """Feed the responder's deltas, with their Unicode repaired, to the session as they
        arrive and queue the segments for speaking (`ReplyText`); the queue is closed on every
        exit, also when the responder fails or this task is cancelled. The responder's
        iterator is closed on every exit (`contextlib.aclosing`), which closes a model's HTTP
        stream.

        A function call the responder makes goes to the session (`on_function_call`).
        Returns True when the reply was read to its end, False when the response stopped
        generating first. Raises what the responder raises.
        """
        try:
            async with contextlib.aclosing(self.services.responder.respond(prompt)) as deltas:
                async for delta in deltas:
                    if isinstance(delta, ToolCall):
                        self.session.generation.on_function_call(response_id, delta)
                        continue
                    text = reply.add(delta)
                    if text and not self.session.generation.on_text(response_id, text):
                        return False
            text = reply.end()
            return not text or self.session.generation.on_text(response_id, text)
        finally:
            reply.close()

    def _stop_reader(self, response_id: str) -> None:
        """Cancel the reply's reader task (`_read_reply`), exactly once: whoever takes it out
        of `_readers` cancels it; `run` waits for the stopped readers at the end.

        Never twice: a second cancel that lands while the first one's cleanup awaits aborts
        that cleanup, and httpcore's close of an unfinished response yields once (its
        connection lock's checkpoint) before it closes the socket, so the HTTP connection
        stayed open, counted as busy in the pool, and the LLM server wrote on to the end of the
        reply (a disconnect cancelled the reader, then the generation task's cleanup cancelled
        it again)."""
        reader = self._readers.pop(response_id, None)
        if reader is None:
            return
        reader.cancel()
        self._stopped_readers.add(reader)
        reader.add_done_callback(self._stopped_readers.discard)

    async def _generation_room(self, response_id: str) -> None:
        """Wait while this reply has more than `GENERATION_AHEAD_MS` of audio not yet sent.

        TTS then runs a bounded distance ahead of playback: an interrupted reply wastes at most
        that much synthesis, and concurrent sessions share the TTS by need, not by arrival.
        """
        response = self.session.responses.get(response_id)
        while response is not None and (
                response.cursor.generated_ms - response.cursor.sent_ms > GENERATION_AHEAD_MS):
            self._sent.clear()
            await self._sent.wait()

    async def _speak(self, response_id: str, span: tuple[int, int]) -> bool:
        """Synthesize one segment of the reply and queue each chunk as soon as it exists.

        The synthesizer's blocking generator runs on a worker thread, which also resamples the
        chunks (one stream per segment, `StreamResampler`: a sentence may come in parts cut inside
        its audio), converts them to PCM16 and computes their echo envelope (`ReplyEcho`: the
        event loop only queues them); chunks cross to the loop through a queue, so a segment's
        first chunk is sent
        while the next is synthesized. The TTS turn is held until that thread has returned, also
        when this task is cancelled (a barge-in, a closed socket): the stop signal ends the engine's
        work within milliseconds (`StopSignal`), and the next session never finds the voice busy
        with a sentence nobody will hear. Nothing here waits on the socket: a client that stops
        reading cannot hold the voice. The turn is one segment long and asked for with the reply's
        standing (`VoiceTurns.turn`: first piece, or audio buffered ahead); a continuation with
        `PREEMPTIBLE_AHEAD_MS` buffered gives the voice up to another reply's first piece before its
        first chunk and is synthesized again after it, so a first piece waits for at most a segment
        of a reply that has little audio buffered; while a first piece waits or is synthesized,
        in-process background ASR (calibration) does not start
        (`calibration.local_asr.foreground_work`).
        Returns False when the response stopped generating (the rest is dropped). A reply of
        text only (`modalities.TEXT`) queues the segment's text and nothing is synthesized.
        """
        response = self.session.responses.get(response_id)
        if response is None:  # its item was deleted, and the response freed with it
            return False
        if response.output_modalities == modalities.TEXT:
            return self.session.generation.on_speech(response_id, span[1], b"", [])
        while (spoke := await self._synthesize(response_id, span)) is None:
            log.debug("%s: a continuation piece gave the voice to a first piece", response_id)
        return spoke

    async def _synthesize(self, response_id: str, span: tuple[int, int]) -> bool | None:
        """One attempt of `_speak`: None when the piece was preempted before its first chunk
        (nothing of it was queued; synthesize it again)."""
        start, end = span
        response = self.session.responses.get(response_id)
        if response is None:  # its item was deleted, and the response freed with it
            return False
        text = response.text[start:end]
        synthesizer = self.services.synthesizer
        rate = self.session.config.sample_rate_hz
        echo = self._reply_echo_for(response_id)
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
            async with self.services.tts_turn.turn(first=first, ahead_ms=ahead_ms,
                                                   preempt=preempt):
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
                        self._apply_effects()
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


async def wait_set(event: asyncio.Event, timeout_s: float | None) -> None:
    """Return once `event` is set, or after `timeout_s` seconds (None: no limit).

    Built on `asyncio.timeout`, not `asyncio.wait_for`: on Python 3.11, `wait_for` returns
    normally when the event is set in the loop iteration that cancels the waiting task, and
    the cancellation is lost (CPython gh-86296); the send loop of a closed session then waited
    forever and its `Connection.run` never returned. Here a cancellation always propagates.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()
