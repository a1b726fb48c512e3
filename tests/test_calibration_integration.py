"""REFERENCE.md 6.2 cases 6-25 (and 6.6 cases 54-55) over a real `Session` and a real
`HistoryCalibration`, wired as `server.connection` wires them: `session.calibration =
controller`, `on_applied` announces the result, and every prompt is `await
controller.before_prompt()` followed by `session.generation.build_prompt(response_id)`.

Standard setup (REFERENCE.md 6.2): the reply "Hello world. This part was not heard." with
10 000 ms of generated audio at 24 kHz, ACK 1000 ms, and a callback returning 5 ("Hello") when
played_ms >= 1000 (else 0). Qwen-only parts are adapted: playback speed 2.0 becomes
`history_audio_supported=False` in `record`, and `commit_all_on_done` becomes
`--calibration off` (no controller; our history policy is always ack_only). Also our two
improvements of REFERENCE.md section 8: an ACK for an OLD reply while a newer one plays starts
its calibration at once (item 9), and each result is announced with `conversation.item.heard`
(item 7).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from calibration.history_calibration import (
    HeardCut,
    HeardTextSnapshot,
    HistoryCalibration,
    HistoryCalibrationPolicy,
)
from calibration.policies import make_policy
from calibration.word_marks import WordMark
from server.realtime.effects import StartGeneration
from server.realtime.session import Session, SessionConfig
from server.responders.prompt import Prompt

TEXT = "Hello world. This part was not heard."
AUDIO_MS = 10_000
RATE = 24_000
Callback = Callable[[HeardTextSnapshot], Awaitable[int | None]]


def pcm16(ms: int) -> bytes:
    """`ms` of PCM16 LE mono silence at 24 kHz."""
    return b"\x00\x00" * (RATE * ms // 1000)


class Standard:
    """The reference's test callback: 5 ("Hello") when played_ms >= 1000, else 0."""

    def __init__(self) -> None:
        self.snapshots: list[HeardTextSnapshot] = []

    async def __call__(self, snapshot: HeardTextSnapshot) -> int:
        self.snapshots.append(snapshot)
        return 5 if snapshot.played_ms >= 1000 else 0

    @property
    def cutoffs(self) -> list[int]:
        return [snapshot.played_ms for snapshot in self.snapshots]


class Gate:
    """A callback blocker that can ignore cancellation (an uncancellable ASR request)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.released = asyncio.Event()
        self.finished = asyncio.Event()

    async def hold(self, *, uncancellable: bool) -> None:
        self.entered.set()
        while not self.released.is_set():
            try:
                await self.released.wait()
            except asyncio.CancelledError:
                if not uncancellable:
                    raise
        self.finished.set()


class Rig:
    """A session plus (optionally) its calibration controller, driven without a network."""

    def __init__(
        self,
        calibrate: Callback | None,
        *,
        requires_audio: bool = True,
        max_bytes: int = 8 * 1024 * 1024,
        timeout_s: float = 1.0,
        config: SessionConfig | None = None,
    ) -> None:
        self.session = Session(config or SessionConfig(lead_ms=60_000))
        self.controller: HistoryCalibration | None = None
        self.applied: list[tuple[str, int]] = []
        if calibrate is not None:
            policy = HistoryCalibrationPolicy(calibrate=calibrate, requires_audio=requires_audio)
            self.controller = HistoryCalibration(
                self.session.heard_text, policy, max_bytes=max_bytes, timeout_s=timeout_s,
                on_applied=self._on_applied,
            )
            self.session.calibration = self.controller
        self.events: list[dict[str, Any]] = []

    @property
    def ctl(self) -> HistoryCalibration:
        assert self.controller is not None
        return self.controller

    def _on_applied(self, response_id: str, result: int, elapsed_ms: float) -> None:
        self.applied.append((response_id, result))
        self.session.heard_text.announce_calibration(response_id, elapsed_ms)

    def take(self) -> list[dict[str, Any]]:
        events = self.session.take_events()
        self.events.extend(events)
        return events

    def send(self, **event: Any) -> list[dict[str, Any]]:
        self.session.receive(json.dumps(event))
        return self.take()

    def user(self, text: str) -> None:
        self.send(type="conversation.item.create",
                  item={"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": text}]})

    def create(self) -> str:
        self.send(type="response.create")
        effects = self.session.take_effects()
        return next(e.response_id for e in effects if isinstance(e, StartGeneration))

    async def prepare(self, response_id: str) -> Prompt:
        """What `server.generation.Generations` does before the responder runs."""
        if self.controller is not None:
            await self.controller.before_prompt()
        prompt = self.session.generation.build_prompt(response_id)
        assert prompt is not None
        return prompt

    async def turn(self, user_text: str) -> tuple[str, Prompt]:
        self.user(user_text)
        response_id = self.create()
        return response_id, await self.prepare(response_id)

    def speak(self, response_id: str, text: str = TEXT, audio_ms: int = AUDIO_MS, *,
              done: bool = True, marks: list[WordMark] | None = None) -> None:
        assert self.session.generation.on_text(response_id, text)
        assert self.session.generation.on_speech(response_id, len(text), pcm16(audio_ms),
                                                 marks or [])
        if done:
            self.session.generation.on_done(response_id)
        self.session.pull_outbound(now_ms=0.0)
        self.take()

    async def reply(self, user_text: str = "Tell me something.", text: str = TEXT,
                    audio_ms: int = AUDIO_MS, *, done: bool = True) -> str:
        response_id, _ = await self.turn(user_text)
        self.speak(response_id, text, audio_ms, done=done)
        return response_id

    def item_id(self, response_id: str) -> str:
        return self.session.responses[response_id].item_id

    def ack(self, response_id: str, played_ms: int, **extra: Any) -> list[dict[str, Any]]:
        return self.send(type="playback.ack", response_id=response_id, played_ms=played_ms,
                         **extra)

    def truncate(self, response_id: str, audio_end_ms: int) -> list[dict[str, Any]]:
        return self.send(type="conversation.item.truncate", item_id=self.item_id(response_id),
                         content_index=0, audio_end_ms=audio_end_ms)

    def heard(self, response_id: str) -> str:
        item = self.session.history.get(self.item_id(response_id))
        assert item is not None
        return item.text

    def cutoff(self, response_id: str) -> int:
        return self.session.responses[response_id].cursor.cutoff_ms

    async def settle(self) -> None:
        """Let every running calibration task finish."""
        for _ in range(20):
            if self.controller is None or not self.controller.tasks:
                break
            await asyncio.gather(*self.controller.tasks.values(), return_exceptions=True)
        await asyncio.sleep(0)
        self.take()

    def heard_events(self, response_id: str) -> list[dict[str, Any]]:
        return [e for e in self.events
                if e["type"] == "conversation.item.heard" and e["response_id"] == response_id]

    def errors(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == "error"]


def turns(prompt: Prompt) -> list[tuple[str, str, bool]]:
    return [(t.role, t.text, t.interrupted) for t in prompt.turns]


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
