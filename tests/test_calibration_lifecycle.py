"""REFERENCE.md 6.2 cases 16-25 and 6.6 cases 54-55 over a real `Session` and
`HistoryCalibration` (tests/calibration_rig.py): deleted items, oversized recordings, cancels,
replaced callbacks and deadlines, `--calibration off`, when an ACK or a clear starts a
calibration.

Qwen-only parts are adapted: `commit_all_on_done` becomes `--calibration off` (no controller;
our history policy is always ack_only). Also our two improvements of REFERENCE.md section 8: an
ACK for an OLD reply while a newer one plays starts its calibration at once (item 9), and each
result is announced with `conversation.item.heard` (item 7).
"""

from __future__ import annotations

import asyncio

import pytest

from calibration.history_calibration import HeardCut, HeardTextSnapshot
from calibration.policies import make_policy
from server.realtime.session import SessionConfig
from tests.calibration_rig import AUDIO_MS, TEXT, Gate, Rig, Standard, turns

# ---------------------------------------------------------------------- cases 16-20


async def test_case16_item_deleted_while_callback_runs_is_not_resurrected() -> None:
    gate = Gate()

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        await gate.hold(uncancellable=True)
        return 5

    rig = Rig(calibrate)
    rid = await rig.reply()
    rig.ack(rid, 1000)
    rig.truncate(rid, 1000)
    task = rig.ctl.tasks[rid]
    await gate.entered.wait()
    rig.send(type="conversation.item.delete", item_id=rig.item_id(rid))
    gate.released.set()
    await gate.finished.wait()
    await asyncio.gather(task, return_exceptions=True)
    await rig.settle()
    assert [item.role for item in rig.session.history] == ["user"]
    assert rig.applied == []
    assert [e["text"] for e in rig.heard_events(rid)] in ([], [""])
    assert rig.ctl.retained_bytes == 0 and not rig.ctl.tasks and not rig.ctl.audio


async def test_case17_oversized_recording_never_calls() -> None:
    callback = Standard()
    rig = Rig(callback, max_bytes=1024)
    rid = await rig.reply()
    rig.ack(rid, 1000)
    rig.truncate(rid, 1000)
    await rig.turn("Next?")
    await rig.settle()
    assert callback.snapshots == []
    assert rig.heard(rid) == "" and rig.ctl.retained_bytes == 0


async def test_case18_calibration_survives_the_epoch_change_of_a_cancel() -> None:
    rig = Rig(Standard())
    rid = await rig.reply(done=False)
    rig.ack(rid, 1000)
    epoch = rig.session.epoch
    events = rig.send(type="response.cancel", response_id=rid)
    assert rig.session.epoch > epoch
    (done,) = [e for e in events if e["type"] == "response.done"]
    assert done["response"]["status"] == "cancelled"
    await rig.settle()
    assert rig.heard(rid) == "Hello"


async def test_case19_small_ack_cannot_shrink_and_full_ack_releases() -> None:
    rig = Rig(Standard())
    rid = await rig.reply()
    rig.ack(rid, 1000)
    await rig.turn("Next?")
    assert rig.heard(rid) == "Hello"
    rig.ack(rid, 200)
    await rig.settle()
    assert rig.heard(rid) == "Hello"
    rig.ack(rid, AUDIO_MS)
    await rig.settle()
    assert rig.heard(rid) == TEXT
    assert rig.ctl.retained_bytes == 0 and rid not in rig.ctl.audio


async def test_case20_late_result_of_a_replaced_callback_is_ignored() -> None:
    old = Gate()

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        if snapshot.played_ms == 1000:
            await old.hold(uncancellable=True)
            return 11
        return 5

    rig = Rig(calibrate)
    rid = await rig.reply()
    rig.truncate(rid, 1000)
    old_task = rig.ctl.tasks[rid]
    await old.entered.wait()
    rig.truncate(rid, 500)
    assert rig.ctl.tasks[rid] is not old_task
    await rig.settle()
    assert rig.heard(rid) == "Hello"
    old.released.set()
    await old.finished.wait()
    await asyncio.gather(old_task, return_exceptions=True)
    await rig.settle()
    assert rig.heard(rid) == "Hello"
    assert rig.applied == [(rid, 5)]


# ---------------------------------------------------------------------- case 21: off


async def test_case21_calibration_off_keeps_a_partial_reply_empty() -> None:
    assert make_policy("off", None) is None
    rig = Rig(None)
    rid = await rig.reply("First?")
    rig.ack(rid, 1000)
    rig.truncate(rid, 1000)
    _, prompt = await rig.turn("Second?")
    assert turns(prompt) == [
        ("user", "First?", False), ("assistant", "", True), ("user", "Second?", False)]
    assert rig.heard(rid) == ""


# ---------------------------------------------------------------------- cases 22-23: deadline


async def test_case22_prompt_wait_follows_the_replacement_task() -> None:
    hung = asyncio.Event()

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        if snapshot.played_ms == 1000:
            hung.set()
            await asyncio.Event().wait()
        await asyncio.sleep(0.03)
        return 5

    rig = Rig(calibrate, timeout_s=1.0)
    rid = await rig.reply("First?")
    rig.ack(rid, 1000)
    rig.user("Second?")
    second = rig.create()
    loop = asyncio.get_running_loop()
    started = loop.time()
    preparing = asyncio.create_task(rig.prepare(second))
    await hung.wait()
    assert not preparing.done()
    rig.truncate(rid, 500)
    prompt = await preparing
    assert loop.time() - started < 0.5
    assert turns(prompt)[1] == ("assistant", "Hello", True)
    assert not rig.ctl.tasks


async def test_case23_prompt_deadline_drops_the_late_result_and_never_retries() -> None:
    gate = Gate()
    calls = 0

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        nonlocal calls
        calls += 1
        await gate.hold(uncancellable=True)
        return 5

    rig = Rig(calibrate, timeout_s=0.03)
    rid = await rig.reply("First?")
    rig.ack(rid, 1000)
    second, prompt = await rig.turn("Second?")
    assert turns(prompt)[1][:2] == ("assistant", "")
    assert not rig.ctl.tasks
    gate.released.set()
    await gate.finished.wait()
    await asyncio.sleep(0.01)
    await rig.settle()
    assert rig.heard(rid) == "" and rig.applied == []
    rig.speak(second, "Sure.", 400)
    rig.ack(second, 400)
    await rig.ctl.before_prompt()
    assert calls == 1 and not rig.ctl.tasks


# ---------------------------------------------------------------------- cases 24-25


@pytest.mark.parametrize("done", [True, False])
async def test_case24_periodic_acks_never_start_calibration(done: bool) -> None:
    callback = Standard()
    rig = Rig(callback)
    rid = await rig.reply(done=done)
    for played in (2000, 3000, 4000):
        rig.ack(rid, played)
    await asyncio.sleep(0)
    assert not rig.ctl.tasks and not rig.ctl.versions and callback.snapshots == []


async def test_case25_ack_after_a_clear_starts_calibration_at_once() -> None:
    callback = Standard()
    rig = Rig(callback)
    rid = await rig.reply()
    rig.ack(rid, 0)
    events = rig.send(type="output_audio_buffer.clear")
    assert [(e["type"], e.get("response_id")) for e in events
            if e["type"] == "output_audio_buffer.cleared"] == [
        ("output_audio_buffer.cleared", rid)]
    assert not rig.ctl.tasks and not rig.ctl.versions, "cutoff 0 starts nothing"
    rig.ack(rid, 1000)
    assert rid in rig.ctl.tasks, "started by the ACK, before any new turn"
    await rig.settle()
    assert rig.heard(rid) == "Hello"


# ---------------------------------------------------------------------- section 8 items 7, 9


async def test_item9_ack_for_an_old_reply_while_a_newer_plays_calibrates_at_once() -> None:
    callback = Standard()
    rig = Rig(callback)
    old = await rig.reply("First?")
    second, _ = await rig.turn("Second?")
    rig.speak(second, "A newer reply that is still playing.", 4000, done=False)
    rig.ack(old, 1000)
    assert set(rig.ctl.tasks) == {old}
    await rig.settle()
    assert rig.heard(old) == "Hello"
    assert rig.session.responses[second].active
    assert rig.session.responses[second].cursor.played_ms == 0


async def test_item9_old_ack_does_not_calibrate_the_reply_still_being_played() -> None:
    callback = Standard()
    rig = Rig(callback)
    old = await rig.reply("First?")
    second, _ = await rig.turn("Second?")
    rig.speak(second, "A newer reply, fully generated, half played.", 4000)
    rig.ack(second, 2000)
    rig.ack(old, 1000)
    assert set(rig.ctl.tasks) == {old}, "periodic playback of the newer reply starts nothing"
    await rig.settle()
    assert callback.cutoffs == [1000]
    assert rig.heard(second) == ""


async def test_item7_calibration_result_is_announced_with_item_heard() -> None:
    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        return HeardCut(5, method="marks") if snapshot.played_ms >= 1000 else 0

    rig = Rig(calibrate)
    rid = await rig.reply()
    rig.ack(rid, 1000)
    rig.truncate(rid, 1000)
    rig.events.clear()
    await rig.settle()
    (event,) = rig.heard_events(rid)
    assert event["item_id"] == rig.item_id(rid)
    assert (event["text"], event["full_text"], event["played_ms"]) == ("Hello", TEXT, 1000)
    assert (event["method"], event["asr_text"], event["interrupted"]) == ("marks", None, True)
    assert isinstance(event["elapsed_ms"], float) and event["elapsed_ms"] >= 0
    retrieved = rig.send(type="conversation.item.retrieve", item_id=rig.item_id(rid))
    assert retrieved[0]["item"]["content"][0]["transcript"] == "Hello"


async def test_item7_plain_int_result_is_announced_as_custom() -> None:
    rig = Rig(Standard())
    rid = await rig.reply()
    rig.truncate(rid, 1000)
    await rig.settle()
    assert [(e["text"], e["method"]) for e in rig.heard_events(rid)][-1] == ("Hello", "custom")


# ---------------------------------------------------------------------- 6.6 cases 54-55


@pytest.mark.parametrize("played", [None, 500, 1000])
async def test_case54_clear_of_a_completed_reply(played: int | None) -> None:
    rig = Rig(Standard())
    first = await rig.reply("Hi?", "first answer", 1000)
    if played is not None:
        rig.ack(first, played)
    for _ in range(2):
        events = rig.send(type="output_audio_buffer.clear")
        assert [(e["type"], e.get("response_id")) for e in events
                if e["type"] == "output_audio_buffer.cleared"] == [
            ("output_audio_buffer.cleared", first)]
    await rig.settle()
    second, prompt = await rig.turn("And?")
    expected = "first answer" if played == 1000 else ""
    assert turns(prompt)[1][:2] == ("assistant", expected)
    rig.speak(second, "A second answer still playing.", 2000, done=False)
    rig.ack(second, 300)
    epoch = rig.session.epoch
    cursor_before = rig.session.responses[second].cursor.as_wire()
    events = rig.send(type="output_audio_buffer.clear", response_id=first)
    assert [(e["type"], e.get("response_id")) for e in events] == [
        ("output_audio_buffer.cleared", first)]
    assert rig.session.responses[second].active and rig.session.epoch == epoch
    assert rig.session.responses[second].cursor.as_wire() == cursor_before
    done = [e for e in rig.events
            if e["type"] == "response.done" and e["response"]["id"] == first]
    assert [d["response"]["status"] for d in done] == ["completed"]
    assert rig.errors() == []


@pytest.mark.parametrize("finished", [True, False])
async def test_case55_vad_barge_in_with_queued_audio(finished: bool) -> None:
    rig = Rig(Standard(), config=SessionConfig(lead_ms=400, jitter_ms=100))
    first = await rig.reply("First?", done=finished)
    rig.ack(first, 400)
    epoch = rig.session.epoch
    events = rig.send(type="barge_in", response_id=first, audio_end_ms=400, source="vad")
    assert rig.session.epoch > epoch
    (done,) = [e for e in events if e["type"] == "response.done"]
    assert done["response"]["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
    rig.session.pull_outbound(now_ms=5000.0)
    assert not [e for e in rig.take() if e.get("response_id") == first]
    await rig.settle()
    _, prompt = await rig.turn("Second?")
    assert turns(prompt) == [
        ("user", "First?", False), ("assistant", "", True), ("user", "Second?", False)]
    terminals = [e for e in rig.events
                 if e["type"] == "response.done" and e["response"]["id"] == first]
    assert len(terminals) == 1 and rig.errors() == []
