"""The conversation every real client holds with the server (`tests/test_python_clients.py`),
written once for all of them; standard library only, so that it runs in each client's own venv.

A client module subclasses `Conversation` with its own API (`say`, `send_audio`, `interrupt`,
`pump`) and calls `run_script`. The steps:

1. the client's own session setup (its `session.update` on connect), until `session.updated`;
2. a typed turn, `say: It is sunny today.`, answered with audio, which then plays out (real
   time from its first delta: none of these clients reports playback);
3. a spoken turn: `SPEECH_PCM`'s Piper audio of a question (PCM16 LE, 24 kHz mono), streamed
   in real time through the client's voice-input path (server VAD, the default, ends it);
4. `INTERRUPT_AFTER_S` after the spoken turn's reply started arriving, the client's own
   interruption, which reports its played position (`conversation.item.truncate`);
5. "Where did you stop?", answered from the history the cut left: typed, or spoken
   (`RECALL_PCM`, Piper) by a client whose typed messages are not user turns (Pipecat's).

`run_replies` is the benchmark's other script (`benchmarks/bench_clients.py`): the same typed
reply asked for again and again, each played out before the next.

Every line of stdout is one JSON object (`Report`): `{"event": ..., "at": ...}` for each server
event the client received (`at`: the client's monotonic clock, s, when it got it),
`{"error": ...}` for each error its API raised, `{"log": ...}` for each ERROR log record,
`{"step": ...}` for each step.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

FRAME_MS = 40
"""Length of each appended audio frame (ms), as a microphone sends them."""
INPUT_RATE_HZ = 24000
INTERRUPT_AFTER_S = 1.5
"""When the client interrupts the spoken turn's reply: seconds after its first audio delta."""
TYPED = "say: It is sunny today."
RECALL = "Where did you stop?"
STEP_TIMEOUT_S = 90.0
"""Longest wait (s) for any one event of the script (Piper and whisper on a busy machine)."""


class Report(logging.Handler):
    """Writes the JSON lines of stdout; also an ERROR-level handler on the root logger."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        logging.getLogger().addHandler(self)

    def write(self, **line: Any) -> None:
        """Write one JSON line (`line` as the object)."""
        sys.stdout.write(json.dumps(line, default=repr) + "\n")
        sys.stdout.flush()

    def emit(self, record: logging.LogRecord) -> None:
        self.write(log=f"{record.name}: {record.getMessage()}")


class Conversation:
    """One client's side of the script: subclasses implement the client's own API."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.events: list[dict[str, Any]] = []
        self.arrived: list[float] = []
        self._changed = asyncio.Condition()

    def received(self, event: dict[str, Any]) -> None:
        """Record one server event (a JSON object) the client received."""
        self.events.append(event)
        self.arrived.append(time.monotonic())
        self.report.write(event=event, at=self.arrived[-1])
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, event_type: str, predicate: Any = None,
                       after: int = 0) -> tuple[int, dict[str, Any]]:
        """The first received event of `event_type` at index >= `after` matching `predicate`
        (and its index); waits up to STEP_TIMEOUT_S."""
        async with asyncio.timeout(STEP_TIMEOUT_S), self._changed:
            while True:
                for index in range(after, len(self.events)):
                    event = self.events[index]
                    if event.get("type") == event_type and (predicate is None
                                                            or predicate(event)):
                        return index, event
                await self._changed.wait()

    async def pump(self) -> None:
        """Read the client's events for as long as the session lasts, calling `received`."""
        raise NotImplementedError

    async def say(self, text: str) -> None:
        """Send a typed user message and have it answered, through the client's API."""
        raise NotImplementedError

    async def send_audio(self, pcm16: bytes) -> None:
        """Send one frame of microphone audio through the client's voice-input path."""
        raise NotImplementedError

    async def interrupt(self) -> None:
        """Interrupt the reply playing now through the client's own API."""
        raise NotImplementedError

    async def recall(self, recall_pcm16: bytes) -> None:
        """Ask RECALL: typed by default; `recall_pcm16` is its Piper audio (PCM16 24 kHz)."""
        await self.say(RECALL)

    async def played_out(self, response_id: str) -> None:
        """Sleep until the audio of `response_id` has played in real time from its first
        delta (a client without playback reports is a listener playing at once)."""
        deltas = [(at, e) for at, e in zip(self.arrived, self.events, strict=True)
                  if e.get("type") == "response.output_audio.delta"
                  and e.get("response_id") == response_id]
        if deltas:
            end_s = deltas[0][0] + deltas[-1][1]["audio_end_ms"] / 1000 + 0.3
            await asyncio.sleep(max(0.0, end_s - time.monotonic()))


async def _answered(conversation: Conversation, after: int, step: str) -> str:
    """Wait for the next `response.done` after index `after`; report it; its response id."""
    _, done = await conversation.wait_for("response.done", after=after)
    response_id = done["response"]["id"]
    conversation.report.write(step=step, response_id=response_id)
    return response_id


async def run_replies(conversation: Conversation, text: str, count: int) -> None:
    """After the client's setup, ask `count` times for a reply to the typed `text`, each
    played out (real time) before the next; each reply's `response.done` is reported as a
    `{"step": "reply"}` line.

    Raises:
        TimeoutError: an awaited event did not come within STEP_TIMEOUT_S.
    """
    pump = asyncio.create_task(conversation.pump())
    try:
        await conversation.wait_for("session.updated")
        for _ in range(count):
            mark = len(conversation.events)
            await conversation.say(text)
            await conversation.played_out(await _answered(conversation, mark, "reply"))
    finally:
        pump.cancel()


def run_arguments(conversation: Conversation, arguments: list[str]) -> Any:
    """The script a client's command line asks for, as a coroutine on `conversation`:
    `SPEECH_PCM RECALL_PCM` (`run_script` on those files) or `--replies N TEXT`
    (`run_replies`)."""
    if arguments[0] == "--replies":
        return run_replies(conversation, arguments[2], int(arguments[1]))
    speech, recall = (Path(name).read_bytes() for name in arguments[:2])
    return run_script(conversation, speech, recall)


async def stream(conversation: Conversation, pcm16: bytes) -> None:
    """Send `pcm16` in FRAME_MS frames, in real time, as a microphone does."""
    frame = INPUT_RATE_HZ * 2 * FRAME_MS // 1000
    for start in range(0, len(pcm16), frame):
        await conversation.send_audio(pcm16[start:start + frame])
        await asyncio.sleep(FRAME_MS / 1000)


async def run_script(conversation: Conversation, speech_pcm16: bytes,
                     recall_pcm16: bytes) -> None:
    """Run the script's five steps (module docstring) on `conversation`.

    Raises:
        TimeoutError: an awaited event did not come within STEP_TIMEOUT_S.
    """
    pump = asyncio.create_task(conversation.pump())
    try:
        await conversation.wait_for("session.updated")
        conversation.report.write(step="setup")
        mark = len(conversation.events)
        await conversation.say(TYPED)
        typed = await _answered(conversation, mark, "typed")
        await conversation.played_out(typed)
        mark = len(conversation.events)
        microphone = asyncio.create_task(stream(conversation, speech_pcm16))
        index, first = await conversation.wait_for("response.output_audio.delta", after=mark)
        spoken = first["response_id"]
        await asyncio.sleep(max(0.0, conversation.arrived[index] + INTERRUPT_AFTER_S
                                - time.monotonic()))
        mark = len(conversation.events)
        await conversation.interrupt()
        conversation.report.write(step="interrupt", response_id=spoken)
        await conversation.wait_for("conversation.item.truncated", after=mark)
        await conversation.wait_for("response.done",
                                    lambda e: e["response"]["id"] == spoken)
        await microphone
        mark = len(conversation.events)
        await conversation.recall(recall_pcm16)
        recall = await _answered(conversation, mark, "recall")
        await conversation.played_out(recall)
    finally:
        pump.cancel()
