"""The `openai-agents` Python SDK (RealtimeAgent, RealtimeRunner) with its default settings,
holding the conversation of `tests/clients/script.py` with a server on loopback.

Runs in its own venv (`make clients`: `.venv/clients/agents`, `tests/clients/
requirements-agents.txt`): openai-agents pins websockets<17, the server runs 17.x. Started by
`tests/test_python_clients.py` as `python agents_client.py WS_URL SPEECH_PCM RECALL_PCM`
(`benchmarks/bench_clients.py`: `WS_URL --replies N TEXT`, `script.run_arguments`); it
writes one JSON object a line to stdout (`script.Report`): every raw server event the SDK
received, every `error` the session raised (server errors and events the SDK failed to
validate), every ERROR log record, and the steps it took.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agents.realtime import RealtimeAgent, RealtimeRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script import Conversation, Report, run_arguments


class AgentsConversation(Conversation):
    """The script's steps through a `RealtimeSession`'s own API."""

    def __init__(self, session, report: Report) -> None:
        super().__init__(report)
        self.session = session

    async def pump(self) -> None:
        async for event in self.session:
            if event.type == "raw_model_event" and event.data.type == "raw_server_event":
                self.received(event.data.data)
            elif event.type == "error":
                self.report.write(error=repr(event.error))

    async def say(self, text: str) -> None:
        await self.session.send_message(text)

    async def send_audio(self, pcm16: bytes) -> None:
        await self.session.send_audio(pcm16)

    async def interrupt(self) -> None:
        await self.session.interrupt()


async def main(url: str, arguments: list[str]) -> None:
    report = Report()
    agent = RealtimeAgent(name="Assistant", instructions="You are a helpful voice assistant.")
    runner = RealtimeRunner(agent)
    session = await runner.run(model_config={"url": url, "api_key": "unused"})
    async with session:
        await run_arguments(AgentsConversation(session, report), arguments)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
