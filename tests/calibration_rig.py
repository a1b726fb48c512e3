"""A real `Session` and a real `HistoryCalibration` driven without a network, wired as
`server.connection` wires them: `session.calibration = controller`, `on_applied` announces the
result, and every prompt is `await controller.before_prompt()` followed by
`session.generation.build_prompt(response_id)`. Used by the REFERENCE.md 6.2 / 6.6 case tests
(tests/test_calibration_heard_text.py, tests/test_calibration_lifecycle.py).

Standard setup (REFERENCE.md 6.2): the reply "Hello world. This part was not heard." with
10 000 ms of generated audio at 24 kHz, ACK 1000 ms, and a callback returning 5 ("Hello") when
played_ms >= 1000 (else 0).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from calibration.history_calibration import (
    HeardTextSnapshot,
    HistoryCalibration,
    HistoryCalibrationPolicy,
)
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
