"""`HistoryCalibration` controller tests, which results land and when: the controller-level
parts of REFERENCE.md 6.2 cases 13, 16, 20, 22, 23 and 24 (bad results and timeouts never
applied nor retried, deleted and replaced replies, prompt deadlines, no calibration while a
reply generates or plays), retries on new evidence, `close`, against a small in-memory session
(tests/calibration_fake_session.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from calibration.history_calibration import HeardCut, HeardTextSnapshot
from tests.calibration_fake_session import RATE, TEXT, FakeSession, Recorder, controller, pcm


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
