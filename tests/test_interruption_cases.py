"""The public interruption cases (../shared/cases/interruption_cases.md) through a real server.

The cases are data (`tests/data/interruption_cases.json`); this driver runs each one over a
real loopback server with the uniform test TTS (or its no-marks twin for F15 and F19). Cases
marked `calibration_free` also run with `--calibration off`: they must hold without calibration.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.realtime_client import RealtimeClient

CASES = json.loads((Path(__file__).parent / "data" / "interruption_cases.json").read_text())

PARAMS = []
for case in CASES["cases"]:
    PARAMS.append(pytest.param(case, case.get("calibration", "marks"), id=case["id"]))
    if case.get("calibration_free"):
        PARAMS.append(pytest.param(case, "off", id=f"{case['id']}-calibration-off"))


class CaseRunner:
    """Executes one case's steps; `refs` maps a case's names (R1, A, …) to ids."""

    def __init__(self, client: RealtimeClient, server: Any) -> None:
        self.client = client
        self.server = server
        self.refs: dict[str, tuple[str, str]] = {}

    def ids(self, ref: str) -> tuple[str, str]:
        return self.refs[ref]

    async def stored_text(self, ref: str) -> str:
        return (await self.client.retrieve(self.ids(ref)[1]))["content"][0]["transcript"]

    async def settle_heard(self, ref: str, accept: list[str], timeout: float = 8.0) -> str:
        """Wait until the stored heard text is one of `accept` (calibration is asynchronous)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        text = await self.stored_text(ref)
        while text not in accept and loop.time() < deadline:
            await asyncio.sleep(0.05)
            text = await self.stored_text(ref)
        return text

    def prompt_of(self, ref: str) -> Any:
        index = [rid for rid, _ in self.refs.values()].index(self.ids(ref)[0])
        responses = [name for name in self.refs]
        assert responses[index] == ref
        return self.server.responder.prompts[index]

    async def run(self, step: dict[str, Any]) -> None:
        client = self.client
        action = step["do"]
        if action in ("reply", "prompt"):
            text = f"say: {step['text']}" if action == "reply" else step["text"]
            self.refs[step["as"]] = await client.prompt(text)
        elif action == "user":
            await client.send({"type": "conversation.item.create", "item": {
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": step["text"]}]}})
            await client.wait_for("conversation.item.done")
        elif action == "sent":
            await client.wait_audio_until(self.ids(step["ref"])[0], step["ms"])
        elif action == "done":
            rid = self.ids(step["ref"])[0]
            done = await client.wait_for("response.done", lambda e: e["response"]["id"] == rid)
            if "status" in step:
                assert done["response"]["status"] == step["status"]
        elif action == "ack":
            await client.ack(self.ids(step["ref"])[0], step["ms"])
            await client.wait_for("playback.acknowledged")
        elif action == "barge_in":
            rid = self.ids(step["ref"])[0]
            if step.get("after_sent"):
                await client.wait_audio_until(rid, step["ms"])
            await client.barge_in(rid, step["ms"])
        elif action == "raw":
            event_id = await client.send(dict(step["event"]))
            error = await client.wait_for("error", lambda e: e["error"]["event_id"] == event_id)
            assert error["error"]["code"] == step["error"]
        elif action == "sleep":
            await asyncio.sleep(step["s"])
        elif action == "expect":
            accept = step.get("heard_any") or [step["heard"]]
            assert await self.settle_heard(step["ref"], accept) in accept
            if "method_in" in step:
                item_id = self.ids(step["ref"])[1]
                heard = client.of_type("conversation.item.heard", item_id=item_id)
                assert heard[-1]["method"] in step["method_in"]
        elif action == "expect_truncated":
            item_id = self.ids(step["ref"])[1]
            truncated = await client.wait_for("conversation.item.truncated",
                                              lambda e: e["item_id"] == item_id)
            assert truncated["audio_end_ms"] == step["ms"]
        elif action == "expect_heard_events":
            await client.drain(0.2)
            events = client.of_type("conversation.item.heard", item_id=self.ids(step["ref"])[1])
            assert len(events) == step["count"], [e["text"] for e in events]
            if "text" in step:
                assert sum(e["text"] == step["text"] for e in events) == step["text_count"]
        elif action == "expect_no_audio":
            await client.drain(0.3)
            assert not client.audio_bytes(self.ids(step["ref"])[0])
        elif action == "expect_no_audio_after_done":
            rid = self.ids(step["ref"])[0]
            done = next(i for i, e in enumerate(client.events)
                        if e["type"] == "response.done" and e["response"]["id"] == rid)
            assert not [e for e in client.events[done:]
                        if e["type"] == "response.output_audio.delta"
                        and e["response_id"] == rid]
        elif action == "expect_prompt":
            await client.wait_for("response.output_audio.delta",
                                  lambda e: e["response_id"] == self.ids(step["ref"])[0])
            turns = [[t.role, t.text] for t in self.prompt_of(step["ref"]).turns]
            assert turns == step["turns"]
        elif action == "expect_prompt_note":
            await client.wait_for("response.output_audio.delta",
                                  lambda e: e["response_id"] == self.ids(step["ref"])[0])
            messages = self.prompt_of(step["ref"]).as_messages()
            assert any(step["contains"] in m["content"] for m in messages
                       if m["role"] != "user"), messages
        elif action == "expect_reply_contains":
            rid = self.ids(step["ref"])[0]
            done = client.of_type("response.done")
            reply = next(e for e in client.of_type("response.output_audio_transcript.done")
                         if e["response_id"] == rid)
            assert done and step["text"] in reply["transcript"]
        elif action == "expect_cursor":
            rid = self.ids(step["ref"])[0]
            await client.ack(rid, step["played_ms"])
            ack = await client.wait_for("playback.acknowledged",
                                        lambda e: e["response_id"] == rid)
            assert ack["cursor"]["committed_ms"] == step["played_ms"]
        else:
            raise AssertionError(f"unknown step {action}")


@pytest.mark.parametrize(("case", "calibration"), PARAMS)
async def test_interruption_case(start_server, case: dict[str, Any], calibration: str) -> None:
    server = await start_server(tts=case.get("tts", "uniform"), calibration=calibration,
                                lead_ms=60_000, tts_delay_s=case.get("tts_delay_s", 0.0))
    async with RealtimeClient.connect(server.ws_url) as client:
        runner = CaseRunner(client, server)
        for step in case["steps"]:
            await runner.run(step)
        assert not [e for e in client.events if e["type"] == "error"
                    and not any(s["do"] == "raw" for s in case["steps"])]
