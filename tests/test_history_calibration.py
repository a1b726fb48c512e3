"""Controller tests: REFERENCE.md 6.1 cases 1-5 and the controller-level parts of 10, 13, 16,
17, 20, 22, 23 and 24, against a small in-memory session."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import numpy as np
import pytest

from calibration.history_calibration import (
    CalibrationView,
    HeardCut,
    HeardTextSnapshot,
    HistoryCalibration,
    HistoryCalibrationPolicy,
)
from calibration.word_marks import WordMark

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


def test_constructor_rejects_non_positive_limits() -> None:
    session, calibrate = FakeSession(), Recorder()
    for kwargs in ({"max_bytes": 0}, {"max_bytes": True}, {"timeout_s": 0}, {"timeout_s": -1.0}):
        with pytest.raises(ValueError):
            controller(session, calibrate, **kwargs)
    with pytest.raises(ValueError):
        controller(session, calibrate, timeout_s=float("nan"))
    ctl = controller(session, calibrate, requires_audio=False)
    assert ctl.calibrate is calibrate and ctl.requires_audio is False
    assert (ctl.max_bytes, ctl.timeout_s, ctl.on_applied, ctl.session) == (
        8 * 1024 * 1024,
        1.0,
        None,
        session,
    )


async def test_case1_bounded_retention_releases_audio_oldest_first_and_keeps_marks() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate, max_bytes=16)
    for index in range(40):
        rid = f"resp_{index}"
        session.add(rid)
        ctl.record(rid, {"pcm_f32le": b"\0" * 8, "sample_rate_hz": RATE,
                         "marks": [WordMark(0, 5, 0, 100)]})
        assert ctl.audio[rid].size == 8
        assert ctl.retained_bytes <= 16
    assert list(ctl.audio) == ["resp_36", "resp_37", "resp_38", "resp_39"]
    assert [ctl.audio[rid].audio_dropped for rid in ctl.audio] == [True, True, False, False]
    assert all(list(ctl.audio[rid].marks) == [WordMark(0, 5, 0, 100)] for rid in ctl.audio)
    assert not calibrate.snapshots and not ctl.tasks


async def test_a_reply_over_the_limit_keeps_its_marks_and_is_calibrated_from_them() -> None:
    """Issue 12 item 1: a long reply's recording went over `max_bytes` and lost its marks."""
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate, max_bytes=16)
    reply = session.add("resp_long", generating=True)
    for index in range(10):
        ctl.record("resp_long", {"pcm_f32le": b"\0" * 8, "sample_rate_hz": RATE,
                                 "marks": [WordMark(index * 6, index * 6 + 5, index * 100,
                                                    index * 100 + 90)]})
    recording = ctl.audio["resp_long"]
    assert recording.audio_dropped and recording.size == 0 and len(recording.marks) == 10
    reply.generating, reply.cutoff_ms = False, 250
    ctl.request_ready()
    for _ in range(3):
        await asyncio.sleep(0)
    (snapshot,) = calibrate.snapshots
    assert snapshot.pcm_f32le == b"" and len(snapshot.word_marks) == 10


async def test_recording_count_is_capped_at_four_including_tombstones() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate)
    session.add("resp_bad")
    ctl.record("resp_bad", {"pcm_f32le": b"\0" * 6, "sample_rate_hz": RATE})
    assert ctl.audio["resp_bad"].valid is False and ctl.retained_bytes == 0
    for index in range(4):
        session.add(f"resp_{index}")
        ctl.record(f"resp_{index}", {"pcm_f32le": pcm(10), "sample_rate_hz": RATE})
    assert list(ctl.audio) == ["resp_0", "resp_1", "resp_2", "resp_3"]


async def test_case2_3_audio_released_while_generating_is_not_resumed() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate, max_bytes=16)
    session.add("resp_live", generating=True)
    ctl.record("resp_live", {"pcm_f32le": b"\0" * 8, "sample_rate_hz": RATE})
    for rid in ("resp_a", "resp_b"):
        session.add(rid)
        ctl.record(rid, {"pcm_f32le": b"\0" * 8, "sample_rate_hz": RATE})
    assert ctl.audio["resp_live"].audio_dropped and ctl.audio["resp_live"].size == 0
    ctl.record("resp_live", {"pcm_f32le": b"\0" * 8, "sample_rate_hz": RATE})
    assert ctl.audio["resp_live"].size == 0, "a suffix must not start a new recording"


async def test_case4_discard_while_generating_ignores_later_output() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate)
    session.add("resp_1", generating=True)
    ctl.record("resp_1", {"pcm_f32le": pcm(100), "sample_rate_hz": RATE})
    ctl.discard("resp_1")
    ctl.record("resp_1", {"pcm_f32le": pcm(100), "sample_rate_hz": RATE})
    assert ctl.audio == {} and ctl.retained_bytes == 0 and "resp_1" in ctl.evicted
    del session.replies["resp_1"]
    ctl.record("resp_1", {"pcm_f32le": pcm(100), "sample_rate_hz": RATE})
    assert ctl.audio == {}, "a deleted reply is never recorded again"


async def test_unknown_reply_is_never_recorded() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate)
    ctl.record("resp_x", {"pcm_f32le": pcm(100), "sample_rate_hz": RATE})
    session.add("resp_x", generating=True)
    ctl.record("resp_x", {"pcm_f32le": pcm(100), "sample_rate_hz": RATE})
    assert ctl.audio == {}


async def test_case5_recording_never_starts_a_callback() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate)
    session.add("resp_1", cutoff_ms=1000)
    for _ in range(3):
        ctl.record("resp_1", {"pcm_f32le": pcm(100), "sample_rate_hz": RATE})
    await asyncio.sleep(0)
    assert not calibrate.snapshots and not ctl.tasks and not ctl.versions


async def test_snapshot_carries_full_recording_cutoff_and_marks() -> None:
    session, calibrate = FakeSession(), Recorder()
    applied: list[tuple[str, int, float]] = []
    ctl = controller(session, calibrate, on_applied=lambda *args: applied.append(args))
    reply = session.add("resp_1", generating=True)
    marks = (WordMark(0, 5, 0, 400), WordMark(6, 11, 400, 800))
    ctl.record("resp_1", {"pcm_f32le": pcm(5000), "sample_rate_hz": RATE, "marks": marks[:1]})
    ctl.record("resp_1", {"pcm_f32le": pcm(5000), "sample_rate_hz": RATE, "marks": marks[1:]})
    reply.generating, reply.cutoff_ms = False, 1000
    await ctl.before_prompt()
    (snapshot,) = calibrate.snapshots
    assert snapshot.text == TEXT and snapshot.played_ms == 1000
    assert len(snapshot.pcm_f32le) == 240_000 * 4 and snapshot.sample_rate_hz == RATE
    assert snapshot.complete_audio_duration_ms == 10_000
    assert snapshot.word_marks == marks
    assert session.history["resp_1"] == "Hello"
    ((rid, result, elapsed_ms),) = applied
    assert rid == "resp_1" and result == 5 and result.method == "marks" and elapsed_ms >= 0
    assert not ctl.tasks and ctl.versions["resp_1"] == (TEXT, 1000, 960_000, 10_000)


async def test_plain_int_result_is_reported_as_custom_cut() -> None:
    session = FakeSession()
    applied: list[int] = []

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        return 5

    ctl = controller(
        session, calibrate, requires_audio=False, on_applied=lambda _r, c, _e: applied.append(c)
    )
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {})
    await ctl.before_prompt()
    assert applied == [5] and applied[0].method == "custom" and applied[0].asr_text is None


async def test_text_only_policy_gets_no_audio_but_marks() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate, requires_audio=False, max_bytes=1)
    session.add("resp_1", cutoff_ms=1000)
    mark = WordMark(0, 5, 0, 400)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE, "marks": [mark]})
    assert ctl.retained_bytes == 0 and ctl.audio["resp_1"].valid
    await ctl.before_prompt()
    (snapshot,) = calibrate.snapshots
    assert (snapshot.pcm_f32le, snapshot.sample_rate_hz, snapshot.word_marks) == (b"", 0, (mark,))
    assert session.history["resp_1"] == "Hello"


async def test_invalid_audio_becomes_a_tombstone() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(100), "sample_rate_hz": RATE})
    ctl.record("resp_1", {"pcm_f32le": pcm(100, 16_000), "sample_rate_hz": 16_000})
    ctl.record("resp_1", {"pcm_f32le": pcm(100), "sample_rate_hz": RATE})
    assert ctl.audio["resp_1"].valid is False and ctl.retained_bytes == 0
    await ctl.before_prompt()
    assert not calibrate.snapshots


@pytest.mark.parametrize("requires_audio", [True, False])
@pytest.mark.parametrize("where", ["output", "view"])
async def test_case10_unsupported_history_audio_never_calls(
    requires_audio: bool, where: str
) -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate, requires_audio=requires_audio)
    reply = session.add("resp_1", cutoff_ms=1000)
    output = {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE}
    if where == "output":
        output["history_audio_supported"] = False
    else:
        reply.history_audio_supported = False
    ctl.record("resp_1", output)
    ctl.request_ready()
    await ctl.before_prompt()
    assert not calibrate.snapshots and ctl.retained_bytes == 0 and "resp_1" not in session.history


async def test_case13_timeout_is_not_applied_nor_retried() -> None:
    session = FakeSession()
    calls = 0

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(1)
        return 5

    ctl = controller(session, calibrate, timeout_s=0.03)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    await ctl.before_prompt()
    await asyncio.sleep(0.05)
    await ctl.before_prompt()
    assert calls == 1 and session.apply_calls == [] and "resp_1" not in session.history


@pytest.mark.parametrize("outcome", ["raise", "out_of_range", "negative", "bool", "none"])
async def test_case13_bad_results_are_not_applied_nor_retried(
    outcome: str, caplog: pytest.LogCaptureFixture
) -> None:
    session = FakeSession()
    calls = 0

    async def calibrate(snapshot: HeardTextSnapshot) -> object:
        nonlocal calls
        calls += 1
        if outcome == "raise":
            raise RuntimeError(f"secret {snapshot.text}")
        return {"out_of_range": len(TEXT) + 1, "negative": -1, "bool": True, "none": None}[outcome]

    ctl = controller(session, calibrate)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    with caplog.at_level(logging.INFO, logger="calibration.history_calibration"):
        await ctl.before_prompt()
        await ctl.before_prompt()
    assert calls == 1 and session.apply_calls == [] and "resp_1" not in session.history
    expected = "status=RuntimeError" if outcome == "raise" else "status=refused"
    assert expected in caplog.text
    assert "Hello" not in caplog.text and "secret" not in caplog.text


async def test_session_refusal_is_logged_as_stale_or_invalid(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = FakeSession()

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        return 0

    ctl = controller(session, calibrate)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    with caplog.at_level(logging.INFO, logger="calibration.history_calibration"):
        await ctl.before_prompt()
    assert session.apply_calls == [("resp_1", 1000, 0)]
    assert "status=stale_or_invalid" in caplog.text and "response=resp_1" in caplog.text


async def test_new_evidence_is_retried_same_evidence_is_not() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate)
    reply = session.add("resp_1", cutoff_ms=500)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    await ctl.before_prompt()
    await ctl.before_prompt()
    assert [s.played_ms for s in calibrate.snapshots] == [500]
    assert session.history["resp_1"] == ""
    reply.cutoff_ms = 1000
    await ctl.before_prompt()
    assert [s.played_ms for s in calibrate.snapshots] == [500, 1000]
    assert session.history["resp_1"] == "Hello"


async def test_case16_deleted_while_running_is_not_resurrected() -> None:
    session = FakeSession()
    started, release = asyncio.Event(), asyncio.Event()
    finished = asyncio.Event()

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            await release.wait()
        finished.set()
        return 5

    ctl = controller(session, calibrate)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    ctl.request_ready()
    await started.wait()
    del session.replies["resp_1"]
    ctl.discard("resp_1")
    release.set()
    await finished.wait()
    await asyncio.sleep(0)
    assert session.apply_calls == [] and session.history == {}
    assert ctl.retained_bytes == 0 and not ctl.tasks and not ctl.audio


async def test_case17_oversized_recording_never_calls() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate, max_bytes=1024)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": b"\0" * 800, "sample_rate_hz": RATE})
    ctl.record("resp_1", {"pcm_f32le": b"\0" * 800, "sample_rate_hz": RATE})
    ctl.record("resp_1", {"pcm_f32le": b"\0" * 8, "sample_rate_hz": RATE})
    ctl.request_ready()
    await ctl.before_prompt()
    assert not calibrate.snapshots and ctl.retained_bytes == 0 and session.history == {}


async def test_case20_stale_replaced_result_is_ignored() -> None:
    session = FakeSession()
    release_old = asyncio.Event()
    old_done = asyncio.Event()

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        if snapshot.played_ms == 1000:
            while not release_old.is_set():
                try:
                    await release_old.wait()
                except asyncio.CancelledError:
                    continue
            old_done.set()
            return 11
        await asyncio.sleep(0.01)
        return 5

    ctl = controller(session, calibrate)
    reply = session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    ctl.request_ready()
    old_task = ctl.tasks["resp_1"]
    await asyncio.sleep(0.01)
    reply.cutoff_ms = 500
    ctl.request_ready()
    assert ctl.tasks["resp_1"] is not old_task
    await ctl.before_prompt()
    assert session.history["resp_1"] == "Hello"
    release_old.set()
    await old_done.wait()
    await asyncio.gather(old_task, return_exceptions=True)
    assert session.history["resp_1"] == "Hello"
    assert session.apply_calls == [("resp_1", 500, 5)]


async def test_case22_before_prompt_follows_the_replacement() -> None:
    session = FakeSession()
    hung = asyncio.Event()

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        if snapshot.played_ms == 1000:
            hung.set()
            await asyncio.Event().wait()
        await asyncio.sleep(0.03)
        return 5

    ctl = controller(session, calibrate, timeout_s=1.0)
    reply = session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    loop = asyncio.get_running_loop()
    started = loop.time()
    prompt = asyncio.create_task(ctl.before_prompt())
    await hung.wait()
    assert not prompt.done()
    reply.cutoff_ms = 500
    ctl.request_ready()
    await prompt
    assert session.history["resp_1"] == "Hello"
    assert loop.time() - started < 0.5
    assert not ctl.tasks


async def test_case23_deadline_drops_late_result_and_never_retries() -> None:
    session = FakeSession()
    release, finished = asyncio.Event(), asyncio.Event()
    calls = 0

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        nonlocal calls
        calls += 1
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue
        finished.set()
        return 5

    ctl = controller(session, calibrate, timeout_s=0.03)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    loop = asyncio.get_running_loop()
    started = loop.time()
    await ctl.before_prompt()
    assert loop.time() - started < 0.2
    assert not ctl.tasks and "resp_1" not in session.history
    release.set()
    await finished.wait()
    await asyncio.sleep(0.01)
    assert session.apply_calls == [] and "resp_1" not in session.history
    await ctl.before_prompt()
    assert calls == 1 and not ctl.tasks


async def test_case24_no_tasks_while_generating_or_playing() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate)
    reply = session.add("resp_1", generating=True, complete=False)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    for cutoff in (2000, 3000, 4000):
        reply.cutoff_ms = cutoff
        ctl.release_confirmed()
        ctl.request_ready()
    reply.generating, reply.complete, reply.playback_active = False, True, True
    for cutoff in (5000, 6000):
        reply.cutoff_ms = cutoff
        ctl.release_confirmed()
        ctl.request_ready()
    assert not ctl.tasks and not ctl.versions and not calibrate.snapshots
    await ctl.before_prompt()
    assert [s.played_ms for s in calibrate.snapshots] == [6000]


async def test_request_ready_looks_at_every_recording() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate)
    session.add("resp_old", cutoff_ms=1000)
    session.add("resp_new", cutoff_ms=2000, playback_active=True)
    for rid in ("resp_old", "resp_new"):
        ctl.record(rid, {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    ctl.request_ready()
    assert set(ctl.tasks) == {"resp_old"}
    await asyncio.gather(*ctl.tasks.values())
    assert session.history == {"resp_old": "Hello"}


async def test_fully_heard_and_released_replies_are_freed_without_calls() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate)
    heard = session.add("resp_heard", cutoff_ms=10_000)
    released = session.add("resp_released", cutoff_ms=1000)
    session.add("resp_live", cutoff_ms=1000, generating=True)
    for rid in ("resp_heard", "resp_released", "resp_live"):
        ctl.record(rid, {"pcm_f32le": pcm(100), "sample_rate_hz": RATE})
    released.text = ""
    ctl.release_confirmed()
    assert list(ctl.audio) == ["resp_live"]
    assert heard.cutoff_ms == 10_000 and not ctl.tasks and not calibrate.snapshots


async def test_zero_cutoff_waits_for_playback_evidence() -> None:
    session, calibrate = FakeSession(), Recorder()
    ctl = controller(session, calibrate)
    reply = session.add("resp_1", cutoff_ms=0)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    ctl.request_ready()
    assert not ctl.tasks and not ctl.versions
    reply.cutoff_ms = 1000
    ctl.request_ready()
    await asyncio.gather(*ctl.tasks.values())
    assert session.history["resp_1"] == "Hello"


async def test_close_cancels_and_disables_everything() -> None:
    session = FakeSession()
    started = asyncio.Event()

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        started.set()
        await asyncio.sleep(1)
        return 5

    ctl = controller(session, calibrate)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    ctl.request_ready()
    task = ctl.tasks["resp_1"]
    await started.wait()
    ctl.close()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and ctl.closed
    assert not ctl.audio and not ctl.tasks and not ctl.versions and not ctl.evicted
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    ctl.request_ready()
    await ctl.before_prompt()
    assert not ctl.audio and not ctl.tasks and session.apply_calls == []


async def test_close_as_the_calibration_returns_cancels_it() -> None:
    """`close()` in the loop iteration the callback's result arrives: the task ends cancelled
    (under `asyncio.wait_for` on Python 3.11 it took the result and ran on, CPython gh-86296)."""
    session = FakeSession()
    result: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        return await result

    ctl = controller(session, calibrate)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    ctl.request_ready()
    task = ctl.tasks["resp_1"]
    await asyncio.sleep(0)
    result.set_result(5)
    ctl.close()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    assert session.apply_calls == []


async def test_cancelled_prompt_does_not_cancel_calibration() -> None:
    session = FakeSession()

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        await asyncio.sleep(0.05)
        return 5

    ctl = controller(session, calibrate)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    prompt = asyncio.create_task(ctl.before_prompt())
    await asyncio.sleep(0.01)
    task = ctl.tasks["resp_1"]
    prompt.cancel()
    await asyncio.gather(prompt, return_exceptions=True)
    await task
    assert session.history["resp_1"] == "Hello"


async def test_on_applied_failure_does_not_undo_the_apply(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session, calibrate = FakeSession(), Recorder()

    def on_applied(response_id: str, result: int, elapsed_ms: float) -> None:
        raise KeyError(response_id)

    ctl = controller(session, calibrate, on_applied=on_applied)
    session.add("resp_1", cutoff_ms=1000)
    ctl.record("resp_1", {"pcm_f32le": pcm(1000), "sample_rate_hz": RATE})
    with caplog.at_level(logging.INFO, logger="calibration.history_calibration"):
        await ctl.before_prompt()
    assert session.history["resp_1"] == "Hello"
    assert "error=KeyError" in caplog.text and "status=applied" in caplog.text


def test_heard_cut_is_an_int_with_provenance() -> None:
    cut = HeardCut(7, method="asr", asr_text="hello world", marks_agree=False)
    assert cut == 7 and isinstance(cut, int) and cut.method == "asr"
    assert HeardCut.of(cut) is cut and HeardCut.of(3).method == "custom"
    assert "hello" not in repr(cut)
