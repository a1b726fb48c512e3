"""Every session's input path off the event loop, in fair turns on a worker thread.

The input path of a session (server VAD: soxr resampling to 16 kHz and Silero; the echo
detector's band envelopes and comparisons; the echo suppression before ASR; the reply's echo
reference) costs 2.5-9 ms of CPU per second of microphone audio (measured here with
`InputSpeechDetector.feed` on white noise: 8.8 ms in 40 ms calls, 3.2 ms in 250 ms calls, 2.5
ms in 16 s calls), and a client can send audio far faster than real time. On the event loop
that all sessions share, one session sending noise at full speed delayed another session's
first audio from 4 ms to 2.8 s (issue 26; `benchmarks/bench_fairness.py`). Here it runs on
`INPUT_THREADS` worker threads of its own (not the loop's default executor, where the TTS
producers run, so synthesis never queues behind it), and each session's work goes through an
`InputLane`:

- one job of a session at a time, in the order asked (the detectors keep state across calls);
- every session has at most one job queued at the executor, whose queue is first in, first
  out, so the sessions with work take turns (round robin), however much each one has;
- the caller cuts a session's audio into jobs of at most `SLICE_MS`, so a turn is short (under
  1 ms of CPU for 250 ms of audio): a session waits for at most one slice of each other
  session before its own.

How much audio a session may send is bounded separately (`server.realtime.input_budget`).
What the bound lets in still costs CPU (10 sessions at twice real time: about a tenth of a
core), and on short cores that CPU was taken from the foreground: the kernel shares a core
among runnable threads by weight, so the input worker got as much of it as a thread
synthesizing another session's first audio. The workers therefore run at `INPUT_NICE` (a
tenth of the weight): foreground work (synthesis, transcription, the event loop) gets the
cores first and the input path takes what is left (`benchmarks/README.md`, "Fairness
benchmark", measures both side by side). Silero runs inside onnxruntime with the GIL
released; the rest is numpy and soxr, which hold it in short stretches (the event loop waited
0.2 ms at p50 and 2-6 ms at p99 for it while two threads ran the input path back to back,
measured here). A worker preempted while it holds the GIL makes the loop wait until it runs
again, the longer the lower its priority: hence nice 10, not 19.

A session whose reply is paused is the exception: its input path is then foreground work (the
quiet after the person's sound that resumes the reply is judged there, and the audio that
decides it is prepared there), and it runs on a worker of its own at the process's priority
(`PAUSED_INPUT_THREADS`). At nice 10 that worker starved behind other processes on a loaded
machine: with load 12-18 on the 2 cores, the five short words of `bench_backchannel` had the
quiet heard up to 1 s late (server VAD's lag, p95 994 ms).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, TypeVar

import numpy as np
from websockets.asyncio.server import ServerConnection

from server.listening.input_speech import InputSpeechDetector
from server.listening.pcm16 import pcm16_to_float
from server.listening.quiet_after_speech import HeardSound
from server.listening.room_floor import LEAD_MS, trim_room
from server.listening.turn_events import (
    SpeechGap,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    SpeechStopped,
    TurnEvent,
)
from server.realtime.effects import DetectSpeech
from server.realtime.input_budget import InputAudioBudget
from server.realtime.session import Session
from server.reply_echo import ReplyEcho

T = TypeVar("T")

INPUT_THREADS = 1
"""Worker threads of the input path, for the whole process. One is enough for what the
bound lets in (32 sessions at twice real time: about 0.2 s of CPU per second) and leaves the
other cores to synthesis, transcription and the event loop."""

SLICE_MS = 250
"""Most audio (ms) in one job of a session: its turn on the worker stays under 1 ms of CPU
(Silero, resampling and the detectors cost 0.8 ms per 250 ms call, 3.2 ms per second of
audio; 40 ms calls cost 8.8 ms per second, so much shorter slices would cost more)."""

THROTTLED_CLOSE_S = 10.0
"""A session throttled for this long without a break (s: every append it sent meanwhile was
over the bound) is closed with code 1008: its client keeps sending faster than the bound, and
the audio queued in the socket buffers now holds back even its pongs (the keepalive would end
it with 1011, `--ping-timeout-s`, 20 s, blaming the server)."""

INPUT_NICE = 10
"""How much lower than the rest of the process the input workers' OS priority is (nice
increment, Linux only: a thread's own nice value, `setpriority(2)` on its thread id). The
kernel's fair scheduler gives a runnable thread CPU in proportion to its weight, 1024 at nice
0 and 110 at nice 10 (`sched_prio_to_weight`, kernel/sched/core.c): when the cores are short,
synthesis, transcription and the event loop run before another session's input work. Not
lower (nice 19, weight 15): the input worker holds the GIL in short stretches, and a thread
preempted while it holds it makes the event loop wait until the scheduler runs it again, which
takes longer the lower its weight (`benchmarks/README.md`, "Fairness benchmark")."""

PAUSED_INPUT_THREADS = 1
"""Worker threads, for the whole process, of the input path of sessions whose reply is paused
(`InputLane.run`'s `paused`), at the process's own priority. A paused reply lasts at most
`pause_timeout_ms`, and its session's audio stays within its bound (`InputAudioBudget`)."""

_executor: ThreadPoolExecutor | None = None
_paused_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _input_executor() -> ThreadPoolExecutor:
    """The process-wide worker threads of the input path (created on first use), each at
    `INPUT_NICE` below the process's priority."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=INPUT_THREADS,
                                           thread_name_prefix="input",
                                           initializer=lower_thread_priority,
                                           initargs=(INPUT_NICE,))
        return _executor


def _paused_input_executor() -> ThreadPoolExecutor:
    """The process-wide worker threads of the input path of sessions whose reply is paused
    (created on first use), at the process's priority."""
    global _paused_executor
    with _executor_lock:
        if _paused_executor is None:
            _paused_executor = ThreadPoolExecutor(max_workers=PAUSED_INPUT_THREADS,
                                                  thread_name_prefix="input-paused")
        return _paused_executor


def lower_thread_priority(increment: int) -> None:
    """Raise the calling thread's nice value by `increment` (Linux: per thread; elsewhere,
    where `setpriority` on a thread id would name a process, nothing). A value beyond 19 is
    clamped there by the kernel; an increment <= 0 changes nothing (lowering a nice value
    needs a privilege the server does not ask for)."""
    if increment <= 0 or sys.platform != "linux":
        return
    thread_id = threading.get_native_id()
    os.setpriority(os.PRIO_PROCESS, thread_id,
                   os.getpriority(os.PRIO_PROCESS, thread_id) + increment)


def reset_input_executor() -> None:
    """Stop the input workers after their queued jobs (new jobs start new ones, with the
    `INPUT_NICE` then in force): for benchmarks comparing priorities in one process."""
    global _executor
    with _executor_lock:
        executor, _executor = _executor, None
    if executor is not None:
        executor.shutdown(wait=True)


class InputLane:
    """One session's turn at the input workers: its jobs run one at a time, in the order
    `run` was called, each queued behind at most one job of every other session."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    async def run(self, job: Callable[..., T], *args: object, paused: bool = False) -> T:
        """Run `job(*args)` on an input worker thread after this lane's earlier jobs; return
        its result or raise its exception. A cancelled caller still waits for a job that
        started (the next job of the lane must find the detectors as this one left them),
        then raises `asyncio.CancelledError`. `paused`: the session's reply is paused, and the
        job runs on a worker at the process's priority (`PAUSED_INPUT_THREADS`), not at
        `INPUT_NICE`."""
        executor = _paused_input_executor() if paused else _input_executor()
        async with self._lock:
            future = asyncio.get_running_loop().run_in_executor(executor, job, *args)
            await wait_through_cancellation(future)
            return future.result()


class SessionInput:
    """One session's input path, driven by its connection: server VAD over the appended audio
    of the session's `DetectSpeech` effects and the ASR samples of its turns, on its
    `InputLane`; and the bound on its input audio (`InputAudioBudget`).

    Args:
        session: the session (its turn events are handed to it on the event loop).
        speed: the bound, a multiple of real time (`Services.input_speed`); None: no bound.
        window_s: the bound's window (s).
    """

    def __init__(self, session: Session, speed: float | None, window_s: float) -> None:
        self.session = session
        self.detector: InputSpeechDetector | None = None
        self._lane = InputLane()
        self._queued: deque[DetectSpeech] = deque()
        self._budget = InputAudioBudget(speed, window_s * 1000.0) if speed else None
        self._throttled_since: float | None = None

    def queue(self, effect: DetectSpeech) -> None:
        """Keep a `DetectSpeech` effect for the next `detect_speech` (event loop)."""
        self._queued.append(effect)

    async def detect_speech(self, reply_echo: Callable[[], ReplyEcho | None],
                            settle: Callable[[], Awaitable[None]]) -> None:
        """Feed the audio of the queued effects to server VAD on the input lane, in slices of
        at most `SLICE_MS`, and after each slice hand its turn events to the session and
        `settle` (the connection sends what they produced).

        `reply_echo()` is the echo reference of the latest reply, compared with the
        microphone when it is the reply the effect names. A slice's `playback_ms` is the
        append's less the audio after the slice: the position playing when the slice's last
        sample was captured, as for an append of that slice alone.
        """
        rate_hz = self.session.config.sample_rate_hz
        slice_bytes = rate_hz * SLICE_MS // 1000 * 2
        while self._queued:
            effect = self._queued.popleft()
            detector = self.detector
            if detector is None or detector.settings != effect.settings:
                detector = InputSpeechDetector(effect.settings, rate_hz, effect.position_ms,
                                                self.session.config.max_turn_ms)
                self.detector = detector
            echo = reply_echo()
            if echo is not None and echo.response_id != effect.response_id:
                echo = None
            pcm16 = effect.pcm16
            for start in range(0, len(pcm16), slice_bytes):
                end = min(start + slice_bytes, len(pcm16))
                playback_ms = effect.playback_ms
                if playback_ms is not None:
                    playback_ms -= (len(pcm16) - end) * 1000 // (2 * rate_hz)
                fed = await self._lane.run(
                    _feed_speech, detector, pcm16[start:end], effect.assistant_playing,
                    playback_ms, echo, paused=self.session.pauses.current is not None)
                self.session.set_clock(time.monotonic() * 1000.0)
                self.session.turn_taking.on_room_level(fed.room_dbfs)
                self._hand_over(fed.events)
                self.session.turn_taking.on_vad_position(fed.heard)
                await settle()

    def _hand_over(self, events: list[TurnEvent]) -> None:
        """Give server VAD's turn events to the session, in order."""
        for event in events:
            if isinstance(event, SpeechStarted):
                self.session.turn_taking.on_speech_started(event.audio_start_ms)
            elif isinstance(event, SpeechGap):
                self.session.turn_taking.on_speech_gap(event.audio_end_ms)
            elif isinstance(event, SpeechPaused):
                self.session.turn_taking.on_speech_paused(event.audio_end_ms)
            elif isinstance(event, SpeechResumed):
                self.session.turn_taking.on_speech_resumed()
            elif isinstance(event, SpeechStopped):
                self.session.turn_taking.on_speech_stopped(event.audio_end_ms)

    async def end_turn(self, audio_end_ms: int, min_silence_ms: int,
                       settle: Callable[[], Awaitable[None]]) -> None:
        """`semantic_vad` judged the turn whose speech ended at `audio_end_ms` (ms on the input
        timeline) finished (`EndTurn`): tell server VAD on the input lane, after the audio
        queued before it (`InputSpeechDetector.end_turn`), and hand the speech stop to the
        session and `settle` when the silence is already `min_silence_ms` long; otherwise a
        later slice's `SpeechStopped` ends the turn, unless the person spoke on."""
        detector = self.detector
        if detector is None:
            return
        stopped = await self._lane.run(detector.end_turn, audio_end_ms, min_silence_ms)
        if stopped is not None:
            self.session.set_clock(time.monotonic() * 1000.0)
            self._hand_over([stopped])
            await settle()

    async def asr_samples(self, pcm16: bytes, start_ms: int, person_only: bool = False
                          ) -> np.ndarray:
        """A turn's PCM16 LE mono from `start_ms` on the input timeline as float samples for
        ASR, with the reply's echo in front of the person's voice suppressed where server
        VAD's echo detector knows it (`InputSpeechDetector.without_echo`), on the input lane.
        `person_only`: the room before and after the person silenced too
        (`server.listening.room_floor.trim_room` at server VAD's room level, with at least
        `room_floor.LEAD_MS` of silence before the person): the words that decide a paused
        reply are the person's, not the room's, and not read from the voice's first sample;
        they are prepared on the paused sessions' worker (`InputLane.run`'s `paused`)."""
        return await self._lane.run(_asr_samples, self.detector, pcm16, start_ms,
                                    self.session.config.sample_rate_hz if person_only else None,
                                    paused=person_only)

    async def throttle(self, appended_ms: int, websocket: ServerConnection) -> bool:
        """Count `appended_ms` ms of input audio just applied against the bound; beyond it,
        wait until the bound allows the session's next frame, or until `websocket` closed.
        Meanwhile nothing of the session is read: the client's socket fills and TCP slows its
        sending down; nothing it sent is lost. Returns False when the session has been
        throttled for `THROTTLED_CLOSE_S` without a break (close it with 1008)."""
        if self._budget is None or appended_ms <= 0:
            return True
        now_ms = time.monotonic() * 1000.0
        wait_ms = self._budget.spend(now_ms, appended_ms)
        if wait_ms <= 0:
            self._throttled_since = None
            return True
        if self._throttled_since is None:
            self._throttled_since = now_ms
        elif now_ms - self._throttled_since >= THROTTLED_CLOSE_S * 1000.0:
            return False
        closed = asyncio.ensure_future(websocket.wait_closed())
        try:
            await asyncio.wait((closed,), timeout=wait_ms / 1000.0)
        finally:
            closed.cancel()
        return True


class FedSpeech(NamedTuple):
    """What one slice of audio told server VAD (`_feed_speech`).

    Attributes:
        events: its turn events, in order.
        room_dbfs: the room's loud level after it (`InputSpeechDetector.room_dbfs`).
        heard: how far it was judged for the person's sound, and where that sound was
            (`InputSpeechDetector.heard`).
    """

    events: list[TurnEvent]
    room_dbfs: float | None
    heard: HeardSound


def _feed_speech(detector: InputSpeechDetector, pcm16: bytes, assistant_playing: bool,
                 playback_ms: int | None, echo: ReplyEcho | None) -> FedSpeech:
    """On an input worker: server VAD over appended PCM16 LE mono, compared with the echo
    reference of the reply `echo` (None: no reply to compare with)."""
    reference = None if echo is None else echo.reference()
    events = detector.feed(pcm16, assistant_playing, playback_ms, reference)
    return FedSpeech(events, detector.room_dbfs, detector.heard())


def _asr_samples(detector: InputSpeechDetector | None, pcm16: bytes, start_ms: int,
                 person_rate_hz: int | None) -> np.ndarray:
    """On an input worker: `SessionInput.asr_samples` (`person_rate_hz`: the input rate when
    the room around the person is silenced, None when it is not)."""
    samples = None if detector is None else detector.without_echo(pcm16, start_ms)
    samples = pcm16_to_float(pcm16) if samples is None else samples
    if person_rate_hz is not None and detector is not None:
        return trim_room(samples, person_rate_hz, detector.room_dbfs, LEAD_MS)
    return samples


async def wait_through_cancellation(future: asyncio.Future[T]) -> None:
    """Wait until `future` is done, even when the calling task is cancelled meanwhile; such
    a cancellation is raised (as `asyncio.CancelledError`) once the future is done.

    For work that cannot be abandoned midway, e.g. a worker thread that holds a shared engine.
    """
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait((future,))
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
