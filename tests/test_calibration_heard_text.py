"""REFERENCE.md 6.2 cases 6-15 over a real `Session` and `HistoryCalibration`
(tests/calibration_rig.py): what history holds after ACKs, truncates, failed callbacks and a
cancelled generation, and what the next prompt waits for.

Qwen-only parts are adapted: playback speed 2.0 becomes `history_audio_supported=False` in
`record` (and our protocol refuses any speed but 1.0). A policy's cut inside a written token
keeps the token out.
"""

from __future__ import annotations

import asyncio

import pytest

from calibration.history_calibration import HeardTextSnapshot
from tests.calibration_rig import AUDIO_MS, RATE, TEXT, Gate, Rig, Standard, turns

# ---------------------------------------------------------------------- cases 6-9: text-only


async def text_only_hello() -> tuple[Rig, Standard, str]:
    """Case 6 setup: a text-only estimator (no audio retained, max_bytes 1) calibrates "Hello"."""
    callback = Standard()
    rig = Rig(callback, requires_audio=False, max_bytes=1)
    rid = await rig.reply()
    rig.ack(rid, 1000)
    await rig.turn("And then?")
    await rig.settle()
    return rig, callback, rid


async def test_case6_text_only_estimator_gets_no_pcm_and_calibrates() -> None:
    rig, callback, rid = await text_only_hello()
    (snapshot,) = callback.snapshots
    assert (snapshot.pcm_f32le, snapshot.sample_rate_hz) == (b"", 0)
    assert (snapshot.text, snapshot.played_ms) == (TEXT, 1000)
    assert rig.ctl.retained_bytes == 0
    assert rig.heard(rid) == "Hello"


async def test_case7_truncate_below_the_evidence_empties_the_history() -> None:
    rig, callback, rid = await text_only_hello()
    rig.truncate(rid, 500)
    await rig.settle()
    assert rig.heard(rid) == ""
    assert callback.cutoffs == [1000, 500]


async def test_case8_full_ack_after_a_truncate_cannot_restore_text() -> None:
    rig, _, rid = await text_only_hello()
    rig.truncate(rid, 500)
    await rig.settle()
    rig.ack(rid, AUDIO_MS)
    await rig.settle()
    assert rig.heard(rid) == "" and rig.cutoff(rid) == 500


async def test_case9_deleting_the_item_frees_recordings_and_tasks() -> None:
    rig, _, rid = await text_only_hello()
    item_id = rig.item_id(rid)
    events = rig.send(type="conversation.item.delete", item_id=item_id)
    assert [e["type"] for e in events] == ["conversation.item.deleted"]
    await rig.settle()
    assert not rig.ctl.audio and not rig.ctl.tasks and not rig.ctl.versions
    assert item_id not in rig.session.history
    assert rid not in rig.session.responses  # not the latest reply: freed at once


# ---------------------------------------------------------------------- case 10: speed


@pytest.mark.parametrize("requires_audio", [True, False])
async def test_case10_unsupported_history_audio_never_calls(requires_audio: bool) -> None:
    callback = Standard()
    rig = Rig(callback, requires_audio=requires_audio)
    rid = await rig.reply()
    rig.ctl.record(rid, {"history_audio_supported": False})
    rig.ack(rid, 1000)
    rig.truncate(rid, 1000)
    await rig.turn("Next?")
    await rig.settle()
    assert callback.snapshots == []
    assert rig.heard(rid) == "" and rig.ctl.retained_bytes == 0


def test_case10_our_protocol_refuses_non_unit_playback_speed() -> None:
    rig = Rig(None)
    events = rig.send(type="session.update",
                      session={"type": "realtime", "audio": {"output": {"speed": 2.0}}})
    assert [(e["type"], e["error"]["code"]) for e in events] == [("error", "invalid_value")]


# ---------------------------------------------------------------------- case 11: prompt waits


async def test_case11_next_prompt_waits_for_pending_calibration() -> None:
    gate = Gate()
    seen: list[HeardTextSnapshot] = []

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        seen.append(snapshot)
        await gate.hold(uncancellable=False)
        return 5 if snapshot.played_ms >= 1000 else 0

    rig = Rig(calibrate)
    rid = await rig.reply("First question?")
    rig.ack(rid, 1000)
    rig.user("Second question?")
    second = rig.create()
    preparing = asyncio.create_task(rig.prepare(second))
    await gate.entered.wait()
    await asyncio.sleep(0.01)
    assert not preparing.done(), "the prompt is not built before calibration finished"
    gate.released.set()
    prompt = await preparing
    assert turns(prompt) == [
        ("user", "First question?", False),
        ("assistant", "Hello", True),
        ("user", "Second question?", False),
    ]
    assert prompt.turns[1].full_text == TEXT
    (snapshot,) = seen
    assert (snapshot.text, snapshot.played_ms, snapshot.sample_rate_hz) == (TEXT, 1000, RATE)
    assert len(snapshot.pcm_f32le) == 240_000 * 4
    assert snapshot.complete_audio_duration_ms == AUDIO_MS


# ---------------------------------------------------------------------- case 12


async def test_case12_stricter_truncate_clears_prefix_and_full_ack_cannot_restore() -> None:
    callback = Standard()
    rig = Rig(callback)
    rid = await rig.reply()
    rig.ack(rid, 1000)
    await rig.turn("Go on.")
    assert rig.heard(rid) == "Hello"
    rig.truncate(rid, 500)
    await rig.settle()
    assert rig.heard(rid) == ""
    events = rig.ack(rid, AUDIO_MS)
    await rig.settle()
    assert rig.heard(rid) == ""
    (acknowledged,) = [e for e in events if e["type"] == "playback.acknowledged"]
    assert acknowledged["cursor"]["committed_ms"] == 500
    assert rig.cutoff(rid) == 500
    assert rig.session.heard_text.calibration_view(rid).cutoff_ms == 500


# ---------------------------------------------------------------------- case 13: failures


@pytest.mark.parametrize("outcome", ["timeout", "raise", "beyond_text"])
async def test_case13_failed_callback_keeps_history_and_is_not_retried(outcome: str) -> None:
    calls = 0

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        nonlocal calls
        calls += 1
        if outcome == "timeout":
            await asyncio.sleep(1)
        if outcome == "raise":
            raise RuntimeError("recogniser down")
        return len(snapshot.text) + 1

    rig = Rig(calibrate, timeout_s=0.03)
    rid = await rig.reply()
    rig.ack(rid, 1000)
    second, prompt = await rig.turn("Next?")
    await rig.settle()
    assert turns(prompt)[1][:2] == ("assistant", "")
    assert rig.heard(rid) == ""
    rig.speak(second, "Sure.", 400)
    rig.ack(second, 400)
    await rig.turn("Again?")
    assert calls == 1
    assert rig.heard(rid) == ""


# ---------------------------------------------------------------------- case 14


@pytest.mark.parametrize("requires_audio", [True, False])
@pytest.mark.parametrize("order", ["turn_then_truncate", "truncate_then_turn"])
async def test_case14_truncate_then_full_ack_keeps_prefix_then_stricter_truncate(
    requires_audio: bool, order: str
) -> None:
    callback = Standard()
    rig = Rig(callback, requires_audio=requires_audio)
    rid = await rig.reply()
    rig.truncate(rid, 1000)
    await rig.settle()
    assert rig.heard(rid) == "Hello"
    rig.ack(rid, AUDIO_MS)
    await rig.settle()
    assert rig.heard(rid) == "Hello"
    assert rid in rig.ctl.audio, "a hard-capped reply keeps its evidence"
    if order == "turn_then_truncate":
        second, prompt = await rig.turn("Next?")
        assert turns(prompt)[1] == ("assistant", "Hello", True)
        rig.speak(second, "Sure.", 400)
        rig.ack(second, 400)
    rig.truncate(rid, 500)
    await rig.settle()
    assert rig.heard(rid) == ""
    _, prompt = await rig.turn("Last one?")
    assert turns(prompt)[1] == ("assistant", "", True)
    assert callback.cutoffs == [1000, 500]
    assert rig.cutoff(rid) == 500


# ---------------------------------------------------------------------- case 15


@pytest.mark.parametrize("requires_audio", [True, False])
@pytest.mark.parametrize("order", ["turn_then_truncate", "truncate_then_turn"])
async def test_case15_cancelled_generation_never_gets_the_full_text(
    requires_audio: bool, order: str
) -> None:
    cutoffs: list[int] = []

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        cutoffs.append(snapshot.played_ms)
        assert snapshot.complete_audio_duration_ms is None
        return 12 if snapshot.played_ms >= AUDIO_MS else 5

    rig = Rig(calibrate, requires_audio=requires_audio)
    rid = await rig.reply(done=False)
    rig.ack(rid, AUDIO_MS)
    assert not rig.ctl.tasks, "generation has not ended"
    rig.send(type="response.cancel", response_id=rid)
    await rig.settle()
    assert rig.heard(rid) == "Hello world."
    rig.ack(rid, AUDIO_MS)
    await rig.settle()
    assert rig.heard(rid) == "Hello world."
    assert rid in rig.ctl.audio, "ACKing all generated audio does not complete a cancelled reply"
    if order == "turn_then_truncate":
        second, prompt = await rig.turn("Next?")
        assert turns(prompt)[1] == ("assistant", "Hello world.", True)
        rig.speak(second, "Sure.", 400)
        rig.ack(second, 400)
    rig.truncate(rid, 5000)
    await rig.settle()
    assert rig.heard(rid) == "Hello"
    _, prompt = await rig.turn("Last one?")
    assert turns(prompt)[1] == ("assistant", "Hello", True)
    assert cutoffs == [AUDIO_MS, 5000]
    assert rig.cutoff(rid) == 5000


@pytest.mark.parametrize(("result", "heard"), [(2, ""), (8, "Hello"), (12, "Hello world."),
                                               (11, "Hello world")])
async def test_a_custom_cut_inside_a_written_token_keeps_the_token_out(
        result: int, heard: str) -> None:
    """Token-whole cuts: the controller moves any policy's cut inside a written token back to
    the token's start ("He|llo" -> "", "Hello wo|rld." -> "Hello"); a cut before the
    punctuation closing a token stands."""

    async def calibrate(snapshot: HeardTextSnapshot) -> int:
        return result

    rig = Rig(calibrate)
    rid = await rig.reply()
    rig.ack(rid, 4000)
    rig.truncate(rid, 4000)
    await rig.settle()
    assert rig.heard(rid) == heard
