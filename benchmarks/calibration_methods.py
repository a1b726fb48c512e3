"""The rows of `bench_calibration`'s accuracy tables: each a method that turns a playback cut
into a heard cut (code points, or None for a refusal).

The product's policies (`marks`, `asr`, `ratio`, `auto` and `auto`'s fallbacks when its ASR
times out) and the baselines other systems use (keep the whole text, drop the turn, whole TTS
segments, LiveKit's syllable rate).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable

import numpy as np

from benchmarks.calibration_corpus import RATE_HZ, Cut, text_units
from calibration import units
from calibration.asr import Transcriber
from calibration.history_calibration import HeardTextSnapshot, HistoryCalibrationPolicy
from calibration.policies import asr_policy, auto_policy

SYLLABLES_PER_S = 3.83
"""LiveKit Agents' `STANDARD_SPEECH_RATE` (syllables per second) used by its transcription
synchronizer when no word timestamps are available (livekit-agents voice/transcription)."""
FALLBACK_ASR_TIMEOUT_S = 0.01
"""ASR budget of the `auto` fallback rows: their transcriber never answers in time."""

Method = Callable[[Cut], Awaitable[int | None]]
"""One row's method: the heard cut of a playback cut (code points; None for a refusal)."""


def snapshot_for(cut: Cut) -> HeardTextSnapshot:
    """What the controller would hand a policy: whole PCM from sample 0, complete duration."""
    spoken = cut.spoken
    return HeardTextSnapshot(
        response_id=f"resp_{spoken.reply.id}", text=spoken.reply.text,
        pcm_f32le=spoken.pcm_f32le, sample_rate_hz=RATE_HZ, played_ms=cut.played_ms,
        complete_audio_duration_ms=spoken.total_ms, word_marks=spoken.marks,
    )


def policy_method(policy: HistoryCalibrationPolicy) -> Method:
    """A product policy called on the cut's snapshot.

    A marks result of `auto` carries a background ASR cross-check (`HeardCut.cross_check`) that
    never changes the result and never delays a prompt; it is cancelled before it starts, so it
    costs no CPU here and does not slow down the calls measured after it.
    """

    async def run(cut: Cut) -> int | None:
        return await calibrate(policy, snapshot_for(cut))

    return run


async def calibrate(policy: HistoryCalibrationPolicy, snapshot: HeardTextSnapshot) -> int | None:
    """`policy`'s heard cut of `snapshot` (code points, None for a refusal), with the background
    ASR cross-check a marks result of `auto` carries cancelled before it starts."""
    result = await policy.calibrate(snapshot)
    cross_check = getattr(result, "cross_check", None)
    if isinstance(cross_check, asyncio.Future):
        cross_check.cancel()
    return result


class RecordingTranscriber:
    """A `Transcriber` that delegates and keeps every (transcript, audio duration s) by (reply
    id, played_ms).

    Only read after the timed call, to explain refusals; it adds no work to the call.
    """

    def __init__(self, inner: Transcriber) -> None:
        self.inner = inner
        self.current: tuple[str, int] = ("", 0)
        self.transcripts: dict[tuple[str, int], tuple[str, float]] = {}

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        """Transcribe with the inner transcriber and remember the text for `current`."""
        text = await self.inner.transcribe(pcm_f32, sample_rate_hz)
        self.transcripts[self.current] = (text, pcm_f32.size / sample_rate_hz)
        return text


def recorded_asr_method(recorder: RecordingTranscriber) -> Method:
    """Policy "asr" over `recorder`, which learns which cut each transcript belongs to."""
    run = policy_method(asr_policy(recorder))

    async def method(cut: Cut) -> int | None:
        recorder.current = (cut.spoken.reply.id, cut.played_ms)
        return await run(cut)

    return method


class TimedOutTranscriber:
    """A `Transcriber` that never answers within `auto`'s budget (its fallbacks then decide)."""

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        """Wait longer than any budget of this benchmark."""
        await asyncio.sleep(60)
        return ""


def fallback_method(marks: str) -> Method:
    """`auto` with an ASR that times out, on the cut's snapshot with its marks as they are
    (`marks="kept"`), removed (`"none"`: the ratio fallback) or all flagged estimated
    (`"estimated"`: the proven-marks fallback)."""
    policy = auto_policy(TimedOutTranscriber(), asr_timeout_s=FALLBACK_ASR_TIMEOUT_S)

    async def run(cut: Cut) -> int | None:
        snap = snapshot_for(cut)
        if marks == "none":
            snap = dataclasses.replace(snap, word_marks=())
        elif marks == "estimated":
            snap = dataclasses.replace(snap, word_marks=tuple(
                dataclasses.replace(mark, estimated=True) for mark in snap.word_marks))
        return await calibrate(policy, snap)

    return run


async def keep_all(cut: Cut) -> int:
    """Naive servers: the whole generated text enters history."""
    return len(cut.spoken.reply.text)


async def drop_turn(cut: Cut) -> int:
    """OpenAI Realtime: `conversation.item.truncate` removes the item's transcript."""
    return 0


async def whole_segments(cut: Cut) -> int:
    """Pipecat without word timestamps: keep the TTS segments whose audio fully played."""
    text = cut.spoken.reply.text
    end = 0
    for char_end, audio_end_ms in cut.spoken.segments:
        if audio_end_ms > cut.played_ms:
            break
        end = char_end
    return units.snap_down(text, end)


async def syllable_rate(cut: Cut) -> int:
    """LiveKit's fallback: heard syllables = played seconds x 3.83, snapped down to whole words.

    Syllables are counted on the spoken form of each unit ("$12.50" -> "twelve dollars and
    fifty cents"), which favours this baseline over counting written digits.
    """
    text = cut.spoken.reply.text
    budget = cut.played_ms * SYLLABLES_PER_S / 1000.0
    spent, count = 0.0, 0
    for unit in text_units(text):
        spent += units.unit_syllables(unit)
        if spent > budget:
            break
        count += 1
    return units.cut_after_units(text, text_units(text), count)
