"""The microphone's timeline as the echo detector sees it (server/listening/mic_timeline.py):
band levels kept for a bounded time, each 10 ms frame mapped to the reply frame that was
playing when it was captured, the room's noise floor, and the stretches the lag search compares.

The reply is real Piper audio (tests/echo_microphone.py's, as the server sends it at 24 kHz); the
microphone is 16 kHz, appended every 40 ms as the page sends it, with the playing position the
session would estimate.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from server.listening.band_envelope import FRAME_MS, SILENCE_DB
from server.listening.echo_path import NOISE_MARGIN_DB
from server.listening.mic_timeline import (
    LAG_RANGE_MS,
    MIC_RATE_HZ,
    MIN_FRAMES,
    NOISE_MIN_MS,
    STALL_FRAMES,
    MicTimeline,
)
from server.speech.resampling import resample
from tests import speech_fixtures as fx
from tests.echo_microphone import OUTPUT_RATE_HZ, reference, reply_24k

APPEND_MS = 40
STEP = MIC_RATE_HZ * APPEND_MS // 1000


def fed(mic: np.ndarray, position: Callable[[int], int | None], keep_ms: int = 20_000,
        with_reference: bool = True) -> MicTimeline:
    """A timeline fed `mic` (16 kHz) in 40 ms appends, each with the reply position
    `position(end ms of the append)` and the Piper reply's reference."""
    timeline = MicTimeline(keep_ms)
    recorded = reference() if with_reference else None
    for start in range(0, mic.size, STEP):
        end_ms = (start + STEP) * 1000 // MIC_RATE_HZ
        timeline.feed(mic[start:start + STEP], position(end_ms), recorded)
    return timeline


def noise(duration_ms: int, dbfs: float = -60.0, seed: int = 3) -> np.ndarray:
    return fx.with_noise_floor(fx.silence(duration_ms), np.random.default_rng(seed), dbfs)


def test_only_the_latest_keep_ms_are_kept() -> None:
    timeline = fed(noise(3000), lambda end_ms: end_ms, keep_ms=1000)
    assert len(timeline.levels) == 1000 // FRAME_MS
    assert (timeline.first, timeline.end) == (200, 300)
    assert timeline.index(2500) == 50
    assert timeline.index(1000) == -100  # forgotten


def test_each_frame_maps_to_the_reply_frame_playing_at_real_time() -> None:
    """A reply that started playing 200 ms into the stream: microphone frame k heard reply
    frame k - 20, and frames before the reply heard nothing (negative: silence)."""
    timeline = fed(noise(2000), lambda end_ms: end_ms - 200)
    frames = len(timeline.levels)
    assert np.array_equal(timeline.playing_frames(0, frames), np.arange(frames) - 20)


def test_a_position_that_stands_still_is_a_silent_loudspeaker() -> None:
    """The client played all it had and waited 300 ms for more (the session's estimate held at
    500 ms): after `STALL_FRAMES` of it the loudspeaker counts as silent (-1), and playback
    resumes where it stood, 300 ms behind the stream; positions never go back."""

    def position(end_ms: int) -> int:
        return end_ms if end_ms <= 500 else 500 if end_ms <= 800 else end_ms - 300

    timeline = fed(noise(1600), position)
    playing = timeline.playing_frames(0, len(timeline.levels))
    assert np.array_equal(playing[:45], np.arange(45))
    assert np.all(playing[50 + STALL_FRAMES + 4:78] == -1)
    assert np.array_equal(playing[85:], np.arange(85, len(playing)) - 30)
    sounding = playing[playing >= 0]
    assert np.all(np.diff(sounding) >= 0)


def test_the_noise_floor_is_the_room_s_not_the_speech_over_it() -> None:
    """Before `NOISE_MIN_MS` nothing is known (`SILENCE_DB`); then the floor of a -60 dBFS
    noise stays within `NOISE_MARGIN_DB` per band of itself (the margin the echo detector
    adds to it) when Piper speech at -12 dBFS covers the whole 4 s it is taken over (minimum
    statistics: speech leaves pauses and closures)."""
    early = fed(noise(NOISE_MIN_MS - 50), lambda end_ms: None)
    assert np.all(early.noise_floor() == SILENCE_DB)
    quiet = fed(noise(4000), lambda end_ms: None).noise_floor()
    speech = fx.at_peak_dbfs(resample(reply_24k(), OUTPUT_RATE_HZ, MIC_RATE_HZ), -12.0)
    mic = noise(4000)
    mic += speech[:mic.size]
    spoken = fed(mic, lambda end_ms: None).noise_floor()
    assert np.all(quiet > SILENCE_DB + 20)
    assert np.all(np.abs(spoken - quiet) <= NOISE_MARGIN_DB), (spoken, quiet)


def test_a_stretch_holds_the_reply_as_played_at_every_lag() -> None:
    timeline = fed(noise(3000), lambda end_ms: end_ms - 200)
    stretch = timeline.stretch(100, 150, 10)
    assert stretch is not None
    lags = (LAG_RANGE_MS[1] - LAG_RANGE_MS[0]) // FRAME_MS + 1
    assert (stretch.lo, stretch.count, stretch.first_ms) == (100, 50, 1000)
    assert stretch.max_lag == LAG_RANGE_MS[1] // FRAME_MS
    assert stretch.mic.shape == (60, 5) and stretch.block.shape == (60 + lags - 1, 5)
    assert np.array_equal(stretch.mic, timeline.levels[100:160])
    # window i of the block is at lag max_lag - i: at lag 0 frame 100 heard reply frame 80
    zero_lag = stretch.block[stretch.max_lag:stretch.max_lag + 60]
    assert np.array_equal(zero_lag, reference().levels(80, 60))
    assert np.all(stretch.floor == timeline.noise_floor() + NOISE_MARGIN_DB)


def test_no_stretch_without_a_reply_or_with_too_few_tagged_frames() -> None:
    assert fed(noise(1000), lambda end_ms: end_ms, with_reference=False).stretch(0, 50, 0) is None
    timeline = fed(noise(1000), lambda end_ms: end_ms)
    assert timeline.stretch(0, MIN_FRAMES - 1, 0) is None
    assert timeline.stretch(0, MIN_FRAMES, 0) is not None


def test_a_played_only_stretch_reads_the_reply_after_the_last_position_as_silence() -> None:
    """1 s of a reply played, the rest sent but not played (paused): the lag search reaches
    200 ms ahead of the playing position (`LAG_RANGE_MS`), into audio never played; with
    `played_only` those reference frames (past the latest position fed plus the 50 ms slack)
    read as silence, without it as the reply's levels."""
    timeline = fed(noise(1000), lambda end_ms: end_ms)
    played = timeline.stretch(60, 100, 0, played_only=True)
    sent = timeline.stretch(60, 100, 0)
    assert played is not None and sent is not None
    playing = timeline.playing_frames(60 - played.max_lag, 100 - LAG_RANGE_MS[0] // FRAME_MS)
    unplayed = playing > 100 + 5
    assert unplayed.sum() >= 10
    assert np.all(played.block[unplayed] == SILENCE_DB)
    assert np.array_equal(sent.block[unplayed], reference().rows(playing[unplayed]))
    assert np.any(sent.block[unplayed] > SILENCE_DB)
    assert np.array_equal(played.block[~unplayed], sent.block[~unplayed])
