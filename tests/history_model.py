"""The model and the plumbing of the history property tests (tests/test_history_properties.py).

`Reply` is the test's own model of one reply and its playback cursor (sent audio from the
deltas, the monotonic commit, the tightening cap, clamping to the audio sent); `check_heard` is
invariant (i). `HistoryHarness` runs a real `Session` wired to a real `HistoryCalibration` (as
`server.connection` wires them) on its own event loop, feeds it client events and keeps the
model in step: the state machine's rules drive it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine

from calibration.history_calibration import (
    HeardTextSnapshot,
    HistoryCalibration,
    HistoryCalibrationPolicy,
)
from calibration.policies import marks_policy
from server.realtime.session import Session, SessionConfig
from server.responders.prompt import Prompt

WORD_MS = 400
RATE = 24_000
MAX_WORDS = 6
VALUE = st.one_of(st.just(0), st.integers(0, MAX_WORDS * WORD_MS + 800), st.just("sent"))
"""A position in ms, or "sent": exactly the audio sent so far for that reply."""


def pcm16(ms: int) -> bytes:
    """`ms` of PCM16 LE mono silence at 24 kHz."""
    return b"\x00\x00" * (RATE * ms // 1000)


@dataclass
class Reply:
    """The test's model of one reply and its playback cursor (REFERENCE.md 2.1-2.2)."""

    rid: str
    item_id: str
    words: list[str]
    prompted: bool = False
    text_words: int = 0
    audio_words: int = 0
    done: bool = False
    ended: bool = False
    sent_ms: int = 0
    committed_ms: int = 0
    cap_ms: int | None = None
    confirmed: bool = False
    deleted: bool = False
    spans: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        start = 0
        for word in self.words:
            self.spans.append((start, start + len(word)))
            start += len(word) + 1

    @property
    def full_text(self) -> str:
        return " ".join(self.words)

    @property
    def total_ms(self) -> int:
        return max(self.audio_words * WORD_MS, self.sent_ms)

    @property
    def cutoff_ms(self) -> int:
        cutoff = min(self.committed_ms, self.total_ms)
        if self.cap_ms is not None:
            cutoff = min(cutoff, self.cap_ms)
        return max(0, cutoff)

    @property
    def fully_played(self) -> bool:
        return self.done and self.cutoff_ms >= self.total_ms

    def heard_words(self) -> int:
        """Words whose mark ends at or before the cutoff (the exact heard text)."""
        return min(self.audio_words, self.cutoff_ms // WORD_MS)

    def text_of(self, count: int) -> str:
        return " ".join(self.words[:count])

    def position(self, value: int | str) -> int:
        return self.sent_ms if value == "sent" else int(value)

    def _clamp(self, position: int) -> int:
        return self.sent_ms if position > self.sent_ms else max(0, position)

    def ack(self, position: int) -> None:
        committed = max(self.committed_ms, self._clamp(position))
        self.committed_ms = committed if self.cap_ms is None else min(committed, self.cap_ms)

    def cap(self, position: int) -> None:
        if self.confirmed:
            return
        clamped = self._clamp(position)
        self.cap_ms = clamped if self.cap_ms is None else min(self.cap_ms, clamped)
        self.committed_ms = self.cap_ms


def check_heard(reply: Reply, text: str, what: str) -> None:
    """Invariant (i): `text` is a word prefix of the reply, every word heard by the cutoff."""
    full = reply.full_text
    assert full.startswith(text), f"{what}: {text!r} is not a prefix of {full!r}"
    count = 0 if text == "" else text.count(" ") + 1
    assert text == reply.text_of(count), f"{what}: {text!r} does not end on a word"
    assert count <= reply.heard_words(), (
        f"{what}: {text!r} claims {count} words, but only {reply.heard_words()} end by the "
        f"cutoff {reply.cutoff_ms} ms (committed {reply.committed_ms}, cap {reply.cap_ms}, "
        f"total {reply.total_ms})"
    )


class HistoryHarness(RuleBasedStateMachine):
    """A real Session + HistoryCalibration with the marks policy (held behind gates when
    `SLOW`) on its own event loop, and the model of each reply; no rules of its own."""

    SLOW = False

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.session = Session(SessionConfig(lead_ms=1200, jitter_ms=0, frame_ms=100,
                                             ack_timeout_ms=10**9))
        self.gates: list[asyncio.Event] = []
        inner = marks_policy()
        policy = (
            HistoryCalibrationPolicy(calibrate=self._slow(inner), requires_audio=False)
            if self.SLOW else inner
        )
        self.controller = HistoryCalibration(self.session.heard_text, policy, timeout_s=30.0,
                                             on_applied=self._on_applied)
        self.session.calibration = self.controller
        self.replies: dict[str, Reply] = {}
        self.order: list[str] = []
        self.pending: asyncio.Task[None] | None = None
        self.violations: list[str] = []
        self.prompts: dict[str, Prompt] = {}
        self.announced: dict[str, list[str]] = {}

    def _slow(self, inner: HistoryCalibrationPolicy) -> Any:
        async def calibrate(snapshot: HeardTextSnapshot) -> int | None:
            result = await inner.calibrate(snapshot)
            gate = asyncio.Event()
            self.gates.append(gate)
            while not gate.is_set():
                try:
                    await gate.wait()
                except asyncio.CancelledError:
                    continue
            return result

        return calibrate

    def _on_applied(self, response_id: str, result: int, elapsed_ms: float) -> None:
        reply = self.replies[response_id]
        limit = reply.heard_words()
        allowed = reply.spans[limit - 1][1] if limit else 0
        if int(result) > allowed:
            self.violations.append(
                f"{response_id}: result {int(result)} applied at cutoff {reply.cutoff_ms} ms "
                f"where the marks allow {allowed}"
            )
        self.session.heard_text.announce_calibration(response_id, elapsed_ms)

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def _call(self, action: Any) -> Any:
        """Run `action` inside the loop (it may start tasks), after taking the events so far:
        every change of the model comes after the events emitted before it were checked."""
        async def call() -> Any:
            self._take()
            return action()

        return self._run(call())

    def _spin(self, rounds: int = 3) -> None:
        async def spin() -> None:
            for _ in range(rounds):
                await asyncio.sleep(0)

        self._run(spin())

    def _take(self) -> None:
        """Take the session's events and `_observe` them."""
        self._observe(self.session.take_events())

    def _observe(self, events: list[dict[str, Any]]) -> None:
        """Record the audio sent; check each `conversation.item.heard` against the model now,
        which is the state the session announced it in (invariant (i))."""
        for event in events:
            if event["type"] == "response.output_audio.delta":
                self.replies[event["response_id"]].sent_ms = event["audio_end_ms"]
            elif event["type"] == "conversation.item.heard":
                reply = self.replies[event["response_id"]]
                self.announced.setdefault(reply.rid, []).append(event["text"])
                if not reply.deleted and not reply.confirmed:
                    check_heard(reply, event["text"], "conversation.item.heard")

    def _send(self, event: dict[str, Any], then: Callable[[], None] | None = None) -> bool:
        """Feed one client event (inside the loop: it may start calibrations); False on error.

        `then` updates the model when the session accepted the event, in the same loop step: a
        task resuming on the loop (a prompt wait ending) never sees the session ahead of the
        model. The events the session emitted for it are observed after `then`.
        """
        return self._call(lambda: self._deliver(event, then))

    def _deliver(self, event: dict[str, Any], then: Callable[[], None] | None = None) -> bool:
        """`_send`'s step, for a caller already on the running loop."""
        self.session.receive(json.dumps(event))
        events = self.session.take_events()
        accepted = not any(e["type"] == "error" for e in events)
        if accepted and then is not None:
            then()
        self._observe(events)
        return accepted

    def _pump(self) -> None:
        """The send loop: move sendable audio out (pacing by the latest ACK)."""
        def pump() -> None:
            self.session.pull_outbound(now_ms=0.0)
            self._take()
            for reply in self.replies.values():
                if reply.fully_played and not reply.deleted:
                    reply.confirmed = True

        self._call(pump)
        self._spin(1)
        self._take()

    def _pick(self, index: int) -> Reply:
        return self.replies[self.order[index % len(self.order)]]

    def _generating(self) -> Reply | None:
        for reply in self.replies.values():
            if reply.prompted and not reply.ended and not reply.deleted:
                return reply
        return None

    def _awaiting_prompt(self) -> Reply | None:
        """The reply whose generation would wait for calibration and build its prompt now.

        As in `server.generation`: only the latest reply, before it generates anything, and
        only while it runs (a reply cancelled before its prompt never gets one: its generation
        task is cancelled).
        """
        if not self.order:
            return None
        reply = self.replies[self.order[-1]]
        return None if reply.prompted or reply.ended else reply

    def _check_exact(self) -> None:
        """After a completed prompt wait: retained, ended, partial replies hold the exact text."""
        for reply in self.replies.values():
            if reply.deleted or reply.confirmed or reply.rid not in self.controller.audio:
                continue
            if not reply.ended or reply.rid in self.controller.tasks:
                continue
            item = self.session.history.get(reply.item_id)
            assert item is not None
            expected = reply.text_of(reply.heard_words())
            assert item.text == expected, (
                f"{reply.rid}: history {item.text!r} after the prompt wait, but the marks give "
                f"{expected!r} at cutoff {reply.cutoff_ms} ms"
            )

    def teardown(self) -> None:
        for gate in self.gates:
            gate.set()
        tasks = asyncio.all_tasks(self.loop)
        if tasks:
            self._run(asyncio.wait(tasks, timeout=5))
        self.loop.close()
