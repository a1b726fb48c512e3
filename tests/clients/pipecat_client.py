"""Pipecat's `OpenAIRealtimeLLMService` with its default settings, in the pipeline Pipecat's
realtime examples build (user context aggregator -> service -> assistant context aggregator),
holding the conversation of `tests/clients/script.py` with a server on loopback.

Runs in its own venv (`make clients`: `.venv/clients/pipecat`, `tests/clients/
requirements-pipecat.txt`). Started by `tests/test_python_clients.py` as `python
pipecat_client.py WS_URL SPEECH_PCM RECALL_PCM` (`benchmarks/bench_clients.py`: `WS_URL
--replies N TEXT`). Pipecat's way of each step: the typed turn is the context's first user
message and an `LLMRunFrame` (a bot that speaks first); audio goes in
as `InputAudioRawFrame`s; the interruption is an `InterruptionWorkerFrame` queued on the task
(the service truncates the playing item at its wall-clock position); later turns are spoken
(`LLMMessagesAppendFrame`s become `system` items in this service, instructions, not turns).

Only observation is added: the service's websocket is wrapped to report every server message
it reads, a loguru sink reports every WARNING or worse, and an `ErrorFrame` anywhere is
reported.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    InputAudioRawFrame,
    InterruptionWorkerFrame,
    LLMRunFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script import TYPED, Conversation, Report, run_arguments, stream


class RecordingWebSocket:
    """The service's websocket, reporting every message it yields to `on_message`."""

    def __init__(self, websocket: Any, on_message: Any) -> None:
        self._websocket = websocket
        self._on_message = on_message

    def __getattr__(self, name: str) -> Any:
        return getattr(self._websocket, name)

    async def __aiter__(self):
        async for message in self._websocket:
            self._on_message(json.loads(message))
            yield message


class ObservedService(OpenAIRealtimeLLMService):
    """`OpenAIRealtimeLLMService` unchanged, its websocket wrapped in `RecordingWebSocket`."""

    on_message: Any = None

    async def _connect(self) -> None:
        await super()._connect()
        if self._websocket is not None:
            self._websocket = RecordingWebSocket(self._websocket, self.on_message)


class ErrorFrames(FrameProcessor):
    """Reports every `ErrorFrame` passing it (either direction) and passes all frames on."""

    def __init__(self, report: Report) -> None:
        super().__init__()
        self.report = report

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, ErrorFrame):
            self.report.write(error=str(frame))
        await self.push_frame(frame, direction)


class PipecatConversation(Conversation):
    """The script's steps through a Pipecat pipeline task."""

    def __init__(self, task: PipelineTask, report: Report, first: str) -> None:
        super().__init__(report)
        self.task = task
        self.first = first
        self.events_done = asyncio.Event()

    async def pump(self) -> None:
        await self.events_done.wait()

    async def say(self, text: str) -> None:
        """Run the context's first user message (`first`, which must be `text`): later typed
        turns would be `system` items in this service (module docstring)."""
        assert text == self.first, "later typed turns are spoken in Pipecat"
        await self.task.queue_frames([LLMRunFrame()])

    async def send_audio(self, pcm16: bytes) -> None:
        await self.task.queue_frame(InputAudioRawFrame(audio=pcm16, sample_rate=24000,
                                                       num_channels=1))

    async def interrupt(self) -> None:
        await self.task.queue_frame(InterruptionWorkerFrame())

    async def recall(self, recall_pcm16: bytes) -> None:
        await stream(self, recall_pcm16)


async def converse(url: str, report: Report, first: str, arguments: list[str]) -> None:
    """One pipeline (one connection) whose context opens with the user message `first`,
    running the script `arguments` name (`script.run_arguments`)."""
    context = LLMContext(messages=[{"role": "user", "content": first}])
    user, assistant = LLMContextAggregatorPair(context)
    service = ObservedService(api_key="unused", base_url=url)
    pipeline = Pipeline([ErrorFrames(report), user, service, assistant])
    task = PipelineTask(pipeline)
    conversation = PipecatConversation(task, report, first)
    service.on_message = conversation.received
    running = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))
    try:
        await run_arguments(conversation, arguments)
    finally:
        await task.cancel()
        await running


async def main(url: str, arguments: list[str]) -> None:
    """`WS_URL SPEECH_PCM RECALL_PCM`: the test's conversation; `WS_URL --replies N TEXT`: N
    pipelines one after the other, each answering TEXT once (the benchmark)."""
    report = Report()
    logger.remove()
    logger.add(lambda message: report.write(log=str(message).strip()), level="WARNING")
    if arguments[0] != "--replies":
        await converse(url, report, TYPED, arguments)
        return
    for _ in range(int(arguments[1])):
        await converse(url, report, arguments[2], ["--replies", "1", arguments[2]])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
