"""The bare `openai` Python SDK (`AsyncOpenAI().realtime.connect`) holding the conversation of
`tests/clients/script.py`, as its user writes it: a `session.update` with OpenAI's own voice
and instructions, typed turns by `conversation.item.create` + `response.create`, microphone
audio by `input_audio_buffer.append` under the default server VAD, and an interruption by
`conversation.item.truncate` at the real-time position of the playing reply, then
`response.cancel` (OpenAI's documented interruption). Run in the main venv (which holds the
SDK) by `tests/test_python_clients.py` as `python -m tests.clients.openai_sdk_client WS_URL
SPEECH_PCM RECALL_PCM` (`benchmarks/bench_clients.py`: `WS_URL --replies N TEXT`)."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time

from openai import AsyncOpenAI

from tests.clients.script import Conversation, Report, run_arguments


class SdkConversation(Conversation):
    """The script's steps through an `AsyncRealtimeConnection`."""

    def __init__(self, connection, report: Report) -> None:
        super().__init__(report)
        self.connection = connection

    async def pump(self) -> None:
        async for event in self.connection:
            self.received(json.loads(event.to_json()))

    async def say(self, text: str) -> None:
        await self.connection.conversation.item.create(item={
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]})
        await self.connection.response.create()

    async def send_audio(self, pcm16: bytes) -> None:
        await self.connection.input_audio_buffer.append(audio=base64.b64encode(pcm16).decode())

    async def interrupt(self) -> None:
        """Truncate the playing item at its real-time position (ms since its first delta,
        at most the audio received), then cancel the response."""
        deltas = [(at, e) for at, e in zip(self.arrived, self.events, strict=True)
                  if e["type"] == "response.output_audio.delta"]
        last = deltas[-1][1]
        first = next(a for a, e in deltas if e["item_id"] == last["item_id"])
        played_ms = min(int((time.monotonic() - first) * 1000), last["audio_end_ms"])
        await self.connection.conversation.item.truncate(
            item_id=last["item_id"], content_index=0, audio_end_ms=played_ms)
        await self.connection.response.cancel()


async def converse(ws_url: str, arguments: list[str]) -> None:
    """Hold the script `arguments` name (`script.run_arguments`) with the server at `ws_url`
    (`ws://HOST:PORT/v1/realtime`); the report goes to stdout (`script.Report`)."""
    sdk = AsyncOpenAI(api_key="unused", websocket_base_url=ws_url.removesuffix("/realtime"))
    async with sdk.realtime.connect(model="gpt-realtime") as connection:
        await connection.session.update(session={
            "type": "realtime", "instructions": "You are a helpful voice assistant.",
            "audio": {"output": {"voice": "alloy"}}})
        await run_arguments(SdkConversation(connection, Report()), arguments)


if __name__ == "__main__":
    asyncio.run(converse(sys.argv[1], sys.argv[2:]))
