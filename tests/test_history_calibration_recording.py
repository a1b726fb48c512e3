"""`HistoryCalibration` controller tests, what it records and hands a policy: REFERENCE.md 6.1
cases 1-5 (bounded retention, audio released while generating, discards, recording never
starting a callback) and the controller-level parts of cases 10 and 17 (unsupported history
audio, oversized recordings), against a small in-memory session
(tests/calibration_fake_session.py)."""

from __future__ import annotations

import asyncio

import pytest

from calibration.word_marks import WordMark
from tests.calibration_fake_session import RATE, TEXT, FakeSession, Recorder, controller, pcm


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
