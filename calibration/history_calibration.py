"""Bounded output-audio retention and asynchronous heard-text calibration.

The seed component (API page `history_calibration_api.txt`; semantics of vLLM-Omni's
`vllm_omni.engine.duplex.session.history_calibration`, digested in REFERENCE.md section 3).
One `HistoryCalibration` belongs to one session and runs on that session's event loop. A policy
callback receives an immutable `HeardTextSnapshot` and returns an exclusive code-point offset
into the original reply text; only the session may apply that offset to its history
(`CalibrationSession.apply_heard_text`), after the controller checked its own fences.

Token-whole cuts: whatever the policy (marks, asr, ratio, auto or a custom callback), the
controller moves a cut that falls inside a written token back to the token's start
(`calibration.units.token_cut`): history holds "Go to" rather than "Go to example." for a cut
inside "example.com", since a token whose spoken pieces did not all finish was not heard whole.

Logs never contain reply text or audio: only response ids, statuses, durations, `played_ms`
and the number of retained characters.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from calibration.arguments import positive_seconds
from calibration.heard_cut import HeardCut
from calibration.units import token_cut
from calibration.word_marks import PackedWordMarks, WordMark

logger = logging.getLogger(__name__)

MAX_RECORDINGS = 4
"""Whole replies retained per session at most (hard-coded in the reference, tombstones count)."""

AppliedCallback = Callable[[str, int, float], None]
"""`on_applied(response_id, result, elapsed_ms)`; `result` is always a `HeardCut`."""

FailedCallback = Callable[[str, float], None]
"""`on_failed(response_id, elapsed_ms)`: a calibration of the reply ended without a result."""

Version = tuple[str, int, int, int | None]
"""Evidence of one attempt: (text, cutoff ms, retained PCM bytes, complete audio duration ms)."""


@dataclass(frozen=True, slots=True)
class HeardTextSnapshot:
    """Original reply and confirmed playback cutoff in milliseconds.

    Attributes:
        response_id: the reply's response id.
        text: the whole original reply text (code points; offsets index into it).
        pcm_f32le: mono float32 little-endian PCM from the reply's FIRST sample (the whole
            retained recording, not cut at the cursor); `b""` when the policy does not
            require audio.
        sample_rate_hz: rate of `pcm_f32le` in Hz; 0 when no audio is passed.
        played_ms: the session's history cutoff at snapshot time (ms from the first sample,
            > 0): the only position that may be treated as heard.
        complete_audio_duration_ms: total audio duration in ms, only when the final audio stage
            synthesised the whole reply; None for a cancelled or interrupted generation, so
            nothing may reason from a partial duration.
        word_marks: the reply's word marks (char offsets into `text`, ms on the reply's audio
            timeline), in recording order; () when the TTS gave none.
    """

    response_id: str
    text: str
    pcm_f32le: bytes
    sample_rate_hz: int
    played_ms: int
    complete_audio_duration_ms: int | None = None
    word_marks: tuple[WordMark, ...] = ()


@dataclass(frozen=True, slots=True)
class HistoryCalibrationPolicy:
    """Model callback and its audio-retention requirement.

    `calibrate(snapshot)` returns an exclusive original-text code-point offset (0 means an empty
    prefix), or None to keep the existing history policy. It must not mutate session history;
    the controller and the session validate its result. `requires_audio` says whether output
    PCM must be retained for it (False: snapshots carry `b""` and rate 0).
    """

    calibrate: Callable[[HeardTextSnapshot], Awaitable[int | None]]
    requires_audio: bool = True


@dataclass(frozen=True, slots=True)
class CalibrationView:
    """What the session knows about one reply, read by the controller.

    Attributes:
        text: full original reply text; "" when the reply was released (fully committed) or
            deleted.
        generating: generation (responder + TTS) has not ended.
        cutoff_ms: history audio cutoff, min(committed, total audio, hard cap), >= 0.
        total_audio_ms: max(generated_ms, sent_ms).
        complete_audio_duration_ms: only when the whole reply was synthesised, else None.
        fully_heard: complete and cutoff_ms >= total_audio_ms.
        history_audio_supported: False when recorded time is not playback time (non-unit
            playback speed); the reply is then never calibrated.
        playback_active: the listener is still being played this reply (it is the session's
            current playback and audio was sent beyond the committed position). `request_ready`
            (periodic ACKs) leaves such a reply alone; `before_prompt` does not. An extension of
            the shared contract with a default, so views built without it stay valid.
    """

    text: str
    generating: bool
    cutoff_ms: int
    total_audio_ms: int
    complete_audio_duration_ms: int | None
    fully_heard: bool
    history_audio_supported: bool = True
    playback_active: bool = False


class CalibrationSession(Protocol):
    """The session surface the controller needs (implemented by the server's session)."""

    def calibration_view(self, response_id: str) -> CalibrationView | None:
        """Return the reply's current view, or None when the reply is unknown or deleted."""
        ...

    def apply_heard_text(
        self, response_id: str, *, text: str, audio_end_ms: int, char_end: int
    ) -> bool:
        """Re-validate every session fence (REFERENCE.md 4.1) and store the heard prefix.

        `char_end` is always a `HeardCut` (an int carrying method / ASR text / agreement).
        Returns True iff the result was stored.
        """
        ...


@dataclass(slots=True)
class _Audio:
    """One reply's recording: PCM chunks, their byte size and rate, marks, validity.

    `audio_dropped`: the PCM went over the retention limit and was released; the marks are kept
    (a few dozen bytes per word), so a marks-based policy still works for any reply length.
    """

    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    sample_rate_hz: int = 0
    marks: PackedWordMarks = field(default_factory=PackedWordMarks)
    valid: bool = True
    audio_dropped: bool = False


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class HistoryCalibration:
    """Own per-session output recordings, calibration tasks and writeback fences.

    Args:
        session: the session (see `CalibrationSession`).
        policy: the calibration policy; its callable becomes `calibrate`, its
            `requires_audio` becomes `requires_audio`.
        max_bytes: retained output PCM across all replies of the session, in bytes (> 0;
            default 8 MiB, about 87 s of 24 kHz float32 mono); beyond it the PCM of the oldest
            replies is released and their word marks are kept.
        timeout_s: per-callback deadline and total `before_prompt` wait, in seconds (> 0,
            finite; default 1 s).
        on_applied: called as `on_applied(response_id, result, elapsed_ms)` after the session
            accepted a result; `result` is a `HeardCut`, `elapsed_ms` the callback's run time.
        on_failed: called as `on_failed(response_id, elapsed_ms)` when a calibration ended
            without a result: the callback raised, returned an invalid result, or ran past
            its deadline (its own, or `before_prompt`'s); `elapsed_ms` is the time it ran. Not
            called for a run replaced by a newer one (that one reports instead).

    Raises:
        ValueError: non-positive `max_bytes` or non-positive / non-finite `timeout_s`.

    All methods must be called on the session's event loop (`request_ready` and
    `before_prompt` create tasks on the running loop).
    """

    def __init__(
        self,
        session: CalibrationSession,
        policy: HistoryCalibrationPolicy,
        *,
        max_bytes: int = 8 * 1024 * 1024,
        timeout_s: float = 1.0,
        on_applied: AppliedCallback | None = None,
        on_failed: FailedCallback | None = None,
    ) -> None:
        if not _is_int(max_bytes) or max_bytes <= 0:
            raise ValueError("max_bytes must be a positive int")
        positive_seconds("timeout_s", timeout_s)
        self.session = session
        self.calibrate = policy.calibrate
        self.requires_audio = policy.requires_audio
        self.max_bytes = max_bytes
        self.timeout_s = float(timeout_s)
        self.on_applied = on_applied
        self.on_failed = on_failed
        self.audio: OrderedDict[str, _Audio] = OrderedDict()
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.versions: dict[str, Version] = {}
        self.evicted: set[str] = set()
        self.closed = False

    @property
    def retained_bytes(self) -> int:
        """Return retained PCM bytes, excluding temporary callback copies."""
        return sum(recording.size for recording in self.audio.values())

    def _may_generate(self, response_id: str) -> bool:
        """True when the reply is generating, or unknown/deleted (so it might still be)."""
        view = self.session.calibration_view(response_id)
        return view is None or view.generating

    def record(self, response_id: str, output: dict) -> None:
        """Record projected output without restarting a discarded live reply.

        `output` may hold `pcm_f32le` (bytes, mono float32 LE), `sample_rate_hz` (int, Hz),
        `marks` (sequence of `WordMark` on the reply timeline) and `history_audio_supported`
        (bool). Called for every output of a reply, in order, from its first sample on. A reply
        the session does not know (view None) is never recorded: a later recording of it would
        start mid-reply. Never starts a calibration.
        """
        if self.closed:
            return
        self.evicted = {rid for rid in self.evicted if self._may_generate(rid)}
        if response_id in self.evicted:
            return
        recording = self.audio.get(response_id)
        if recording is None:
            if self.session.calibration_view(response_id) is None:
                self.evicted.add(response_id)
                return
            recording = self.audio[response_id] = _Audio()
        reason = self._append(recording, output)
        if reason is not None:
            self._invalidate(response_id, recording, reason)
        self._evict()

    def _append(self, recording: _Audio, output: dict) -> str | None:
        """Add one output's marks and PCM; return an invalidation reason or None."""
        if output.get("history_audio_supported") is False:
            return "unsupported_audio"
        if not recording.valid:
            return None
        recording.marks.extend(output.get("marks") or ())
        pcm = output.get("pcm_f32le") or b""
        if not self.requires_audio or not pcm or recording.audio_dropped:
            return None
        rate = output.get("sample_rate_hz")
        if (
            not isinstance(pcm, bytes | bytearray | memoryview)
            or not _is_int(rate)
            or rate <= 0
            or len(pcm) % 4
            or (recording.sample_rate_hz and rate != recording.sample_rate_hz)
        ):
            return "invalid_audio"
        recording.chunks.append(bytes(pcm))
        recording.size += len(pcm)
        recording.sample_rate_hz = rate
        return None

    def _invalidate(self, response_id: str, recording: _Audio, reason: str) -> None:
        """Turn a recording into a tombstone that later chunks cannot revive."""
        if recording.valid:
            logger.info("history audio dropped response=%s reason=%s", response_id, reason)
        recording.valid = False
        recording.chunks.clear()
        recording.marks.clear()
        recording.size = 0

    def _evict(self) -> None:
        """Release PCM, oldest reply first, while over the byte limit (the replies keep their
        marks, `_Audio.audio_dropped`), then discard whole replies, oldest first, while over the
        recording limit."""
        for response_id, recording in self.audio.items():
            if self.retained_bytes <= self.max_bytes:
                break
            if recording.size:
                logger.info("history audio dropped response=%s reason=audio_limit "
                            "(marks kept)", response_id)
                recording.chunks.clear()
                recording.size = 0
                recording.audio_dropped = True
        while len(self.audio) > MAX_RECORDINGS:
            self.discard(next(iter(self.audio)))

    def discard(self, response_id: str) -> None:
        """Release a reply's recording and revoke any pending calibration.

        A reply that may still be generating is remembered as evicted, so its later output is
        ignored (a suffix must never masquerade as starting at 0 ms).
        """
        if self._may_generate(response_id):
            self.evicted.add(response_id)
        self.audio.pop(response_id, None)
        self.versions.pop(response_id, None)
        task = self.tasks.pop(response_id, None)
        if task is not None:
            task.cancel()

    def request_ready(self) -> None:
        """Start only ended replies with a partial, client-confirmed playback cursor.

        Looks at every recording (not only the current playback), but leaves alone a reply
        whose playback is still active, so periodic ACKs never start calibration.
        """
        self._start_ready(include_playing=False)

    def _start_ready(self, *, include_playing: bool) -> None:
        if self.closed:
            return
        for response_id in list(self.audio):
            recording = self.audio.get(response_id)
            if recording is None:
                continue
            view = self.session.calibration_view(response_id)
            if view is not None and view.generating:
                continue
            if view is None or not view.text or view.fully_heard:
                self.discard(response_id)
                continue
            if not view.history_audio_supported:
                self._invalidate(response_id, recording, "unsupported_audio")
                continue
            if (
                not recording.valid
                or (self.requires_audio and recording.size == 0
                    and not (recording.audio_dropped and recording.marks))
                or view.cutoff_ms <= 0
                or (view.playback_active and not include_playing)
            ):
                continue
            version: Version = (
                view.text,
                view.cutoff_ms,
                recording.size,
                view.complete_audio_duration_ms,
            )
            if self.versions.get(response_id) == version:
                continue
            self._start(response_id, recording, view, version)

    def _start(
        self, response_id: str, recording: _Audio, view: CalibrationView, version: Version
    ) -> None:
        """Replace any running task for the reply with one computed on `version`."""
        previous = self.tasks.pop(response_id, None)
        if previous is not None:
            previous.cancel()
        self.versions[response_id] = version
        snapshot = HeardTextSnapshot(
            response_id=response_id,
            text=view.text,
            pcm_f32le=b"".join(recording.chunks) if self.requires_audio else b"",
            sample_rate_hz=recording.sample_rate_hz if self.requires_audio else 0,
            played_ms=view.cutoff_ms,
            complete_audio_duration_ms=view.complete_audio_duration_ms,
            word_marks=tuple(recording.marks),
        )
        task = asyncio.get_running_loop().create_task(self._run(snapshot, version))
        self.tasks[response_id] = task
        task.add_done_callback(lambda done: self._forget_task(response_id, done))

    def _forget_task(self, response_id: str, task: asyncio.Task[None]) -> None:
        if self.tasks.get(response_id) is task:
            del self.tasks[response_id]

    async def _run(self, snapshot: HeardTextSnapshot, version: Version) -> None:
        """Run the callback under the deadline; apply its result only if every fence holds."""
        response_id = snapshot.response_id
        started = time.perf_counter()
        status = "refused"
        retained_chars: int | None = None
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await self.calibrate(snapshot)
            elapsed_ms = (time.perf_counter() - started) * 1000.0
            if (
                not self.closed
                and self.tasks.get(response_id) is asyncio.current_task()
                and self.versions.get(response_id) == version
                and _is_int(result)
                and 0 <= result <= len(snapshot.text)
            ):
                cut = HeardCut.of(result).at(token_cut(snapshot.text, result))
                applied = self.session.apply_heard_text(
                    response_id,
                    text=snapshot.text,
                    audio_end_ms=snapshot.played_ms,
                    char_end=cut,
                )
                status = "applied" if applied else "stale_or_invalid"
                if applied:
                    retained_chars = int(cut)
                    self._notify(response_id, cut, elapsed_ms)
            elif not self.closed and self.tasks.get(response_id) is asyncio.current_task():
                self._failed(response_id, started)  # an invalid result: status "refused"
        except asyncio.CancelledError:
            status = "cancelled"
            raise
        except Exception as exc:
            status = type(exc).__name__
            if self.tasks.get(response_id) is asyncio.current_task():
                self._failed(response_id, started)
        finally:
            logger.info(
                "history calibration response=%s status=%s elapsed_ms=%.1f played_ms=%d "
                "retained_chars=%s",
                response_id,
                status,
                (time.perf_counter() - started) * 1000.0,
                snapshot.played_ms,
                retained_chars,
            )

    def _notify(self, response_id: str, cut: HeardCut, elapsed_ms: float) -> None:
        """Call `on_applied`; its failure is logged by class name and does not undo the apply."""
        if self.on_applied is None:
            return
        try:
            self.on_applied(response_id, cut, elapsed_ms)
        except Exception as exc:
            logger.warning(
                "history calibration on_applied failed response=%s error=%s",
                response_id,
                type(exc).__name__,
            )

    def _failed(self, response_id: str, started: float) -> None:
        """Call `on_failed` (not once closed); its failure is logged by class name."""
        if self.on_failed is None or self.closed:
            return
        try:
            self.on_failed(response_id, (time.perf_counter() - started) * 1000.0)
        except Exception as exc:
            logger.warning("history calibration on_failed failed response=%s error=%s",
                           response_id, type(exc).__name__)

    def release_confirmed(self) -> None:
        """Free fully acknowledged replies without running ASR on frequent ACKs.

        Discards every ended reply whose text is gone (released or deleted) or that was fully
        heard; starts nothing.
        """
        if self.closed:
            return
        for response_id in list(self.audio):
            view = self.session.calibration_view(response_id)
            if view is None or (not view.generating and (not view.text or view.fully_heard)):
                self.discard(response_id)

    async def before_prompt(self) -> None:
        """Wait within one deadline for eligible work, including replacements.

        Starts eligible calibrations (also for a reply still being played), then waits for the
        tasks, following replacement tasks, until `timeout_s` after the call. On the deadline,
        ownership is cleared first (late results are rejected) and the tasks are cancelled;
        versions are kept, so the same evidence is not retried. Cancelling the caller does not
        cancel the calibrations.
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        started_perf = time.perf_counter()
        deadline = started + self.timeout_s
        self._start_ready(include_playing=True)
        pending = len(self.tasks)
        status = "ready"
        try:
            while self.tasks:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    status = "deadline"
                    late = list(self.tasks.items())
                    self.tasks.clear()
                    for response_id, task in late:
                        task.cancel()
                        self._failed(response_id, started_perf)
                    break
                await asyncio.wait(list(self.tasks.values()), timeout=remaining)
        except asyncio.CancelledError:
            status = "cancelled"
            raise
        finally:
            logger.info(
                "history calibration wait status=%s wait_ms=%.1f pending=%d retained_bytes=%d "
                "cached_replies=%d",
                status,
                (loop.time() - started) * 1000.0,
                pending,
                self.retained_bytes,
                len(self.audio),
            )

    def close(self) -> None:
        """Release recordings and prevent further calibration or writeback; `on_applied` is
        dropped (it is never called once closed, and it may hold the calibration's owner,
        which holds the calibration: a reference cycle)."""
        self.closed = True
        self.on_applied = None
        self.on_failed = None
        tasks = list(self.tasks.values())
        self.tasks.clear()
        for task in tasks:
            task.cancel()
        self.audio.clear()
        self.versions.clear()
        self.evicted.clear()


__all__ = [
    "MAX_RECORDINGS",
    "AppliedCallback",
    "CalibrationSession",
    "CalibrationView",
    "FailedCallback",
    "HeardCut",
    "HeardTextSnapshot",
    "HistoryCalibration",
    "HistoryCalibrationPolicy",
]
