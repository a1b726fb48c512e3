"""A small in-memory session for the `HistoryCalibration` controller tests
(tests/test_history_calibration_recording.py, tests/test_history_calibration_results.py): it
implements `CalibrationSession` with the fences of REFERENCE.md 4.1, and a callback that
records its snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.history_calibration import (
    CalibrationView,
    HeardCut,
    HeardTextSnapshot,
    HistoryCalibration,
    HistoryCalibrationPolicy,
)

TEXT = "Hello world. This part was not heard."
RATE = 24_000


def pcm(ms: int, rate: int = RATE) -> bytes:
    """`ms` of float32 LE mono PCM at `rate`."""
    return np.linspace(-0.5, 0.5, rate * ms // 1000, dtype=np.float32).tobytes()


@dataclass
class Reply:
    text: str = TEXT
    generating: bool = False
    cutoff_ms: int = 0
    total_audio_ms: int = 10_000
    complete: bool = True
    history_audio_supported: bool = True
    playback_active: bool = False


class FakeSession:
    """Plain object implementing `CalibrationSession` with the fences of REFERENCE.md 4.1."""

    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}
        self.history: dict[str, str] = {}
        self.apply_calls: list[tuple[str, int, int]] = []

    def add(self, response_id: str, **fields: object) -> Reply:
        reply = self.replies[response_id] = Reply(**fields)
        return reply

    def calibration_view(self, response_id: str) -> CalibrationView | None:
        reply = self.replies.get(response_id)
        if reply is None:
            return None
        return CalibrationView(
            text=reply.text,
            generating=reply.generating,
            cutoff_ms=reply.cutoff_ms,
            total_audio_ms=reply.total_audio_ms,
            complete_audio_duration_ms=reply.total_audio_ms if reply.complete else None,
            fully_heard=reply.complete and reply.cutoff_ms >= reply.total_audio_ms,
            history_audio_supported=reply.history_audio_supported,
            playback_active=reply.playback_active,
        )

    def apply_heard_text(
        self, response_id: str, *, text: str, audio_end_ms: int, char_end: int
    ) -> bool:
        assert isinstance(char_end, HeardCut)
        self.apply_calls.append((response_id, audio_end_ms, char_end))
        reply = self.replies.get(response_id)
        if (
            reply is None
            or reply.generating
            or reply.text != text
            or not 0 <= char_end <= len(text)
            or not 0 < audio_end_ms <= reply.cutoff_ms
        ):
            return False
        self.history[response_id] = text[:char_end].rstrip()
        return bool(self.history[response_id])


class Recorder:
    """A calibration callback that records its snapshots and returns 5 ("Hello")."""

    def __init__(self) -> None:
        self.snapshots: list[HeardTextSnapshot] = []

    async def __call__(self, snapshot: HeardTextSnapshot) -> int | None:
        self.snapshots.append(snapshot)
        return HeardCut(5, method="marks") if snapshot.played_ms >= 1000 else 0


def controller(
    session: FakeSession,
    calibrate: object,
    *,
    requires_audio: bool = True,
    **kwargs: object,
) -> HistoryCalibration:
    policy = HistoryCalibrationPolicy(calibrate=calibrate, requires_audio=requires_audio)
    return HistoryCalibration(session, policy, **kwargs)
