"""The page's "End of turn" choice on the real page (issue 24: "the end of a turn judged by
meaning"): headless Chromium, the page's fake microphone, a real server with Piper and
faster-whisper tiny.en; `semantic_vad` runs Smart Turn v3.2 from the `pipecat-ai` wheel.

The page asks for `server_vad` (a turn ends after 500 ms of silence) unless the person picks
"when the sentence is finished" (`semantic_vad`, eagerness `auto`): then a sentence with a
700 ms pause inside it ("I want to book a table for... two people tonight.") is one turn,
answered once, where `server_vad` answers its first half.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests import speech_fixtures
from tests.browser import DemoPage, chromium, open_demo
from tests.conftest import RunningServer
from tests.test_browser_microphone import CLICK_MIC, start_piper
from tests.test_semantic_vad import paused_sentence

FIRST_HALF, SECOND_HALF = "I want to book a table for", "two people tonight."
"""Issue 24's failing input 5, said with a 700 ms pause after "for"."""

TURN_WAIT_S = 60.0
"""Longest wait for a transcript or a prompt (s): the machine may be loaded."""


async def mic_on_with(demo: DemoPage, choice: str) -> None:
    """Pick `choice` in the page's "End of turn" select, switch the microphone on, and wait
    until the server confirmed that turn detection."""
    await demo.page.get_by_test_id("turn-end").select_option(choice)
    await demo.page.evaluate(CLICK_MIC, None)
    await demo.wait_state(f"s.mic.serverVad === 'on' && s.mic.turnDetection === '{choice}'")


def asked_for(demo: DemoPage) -> list[dict[str, object]]:
    """The `turn_detection` of every `session.update` the page sent since it connected, in
    order (the first, at connect, is null: no turns until the microphone is on)."""
    asked = [e["session"]["audio"]["input"]["turn_detection"] for e in demo.sent
             if e["type"] == "session.update"]
    assert asked[0] is None, asked
    return asked[1:]


async def test_the_choice_asks_the_server_for_that_turn_detection_at_once(
        start_server, tmp_path: Path) -> None:
    """Picking the other choice while the microphone is on sends one `session.update` with it:
    `semantic_vad` with eagerness `auto` (and none of `server_vad`'s fields, which the server
    would refuse), then `server_vad` again with its own settings; the level meter says how the
    turn ends."""
    wav = speech_fixtures.write_wav(tmp_path / "quiet.wav", speech_fixtures.silence(8000.0))
    server = await start_piper(start_server)
    async with chromium(fake_mic=wav) as browser, open_demo(browser, server.http_url) as demo:
        await mic_on_with(demo, "server_vad")
        note = demo.page.get_by_test_id("level-meter")
        assert "500 ms of silence" in (await note.text_content() or "")
        await demo.page.get_by_test_id("turn-end").select_option("semantic_vad")
        await demo.wait_state("s.mic.turnDetection === 'semantic_vad'")
        assert "sentence is finished" in (await note.text_content() or "")
        await demo.page.get_by_test_id("turn-end").select_option("server_vad")
        await demo.wait_state("s.mic.turnDetection === 'server_vad'")
        assert asked_for(demo) == [
            {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
             "silence_duration_ms": 500, "create_response": True, "interrupt_response": True},
            {"type": "semantic_vad", "eagerness": "auto", "create_response": True,
             "interrupt_response": True},
            {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
             "silence_duration_ms": 500, "create_response": True, "interrupt_response": True},
        ]
        updated = [e["session"]["audio"]["input"]["turn_detection"]["type"]
                   for e in demo.received if e["type"] == "session.updated"
                   and e["session"]["audio"]["input"]["turn_detection"]]
        assert updated == ["server_vad", "semantic_vad", "server_vad"]
        assert await demo.state("s.lastError") is None


async def wait_prompt_with(server: RunningServer, turns: int) -> list[str]:
    """Wait (at most `TURN_WAIT_S`) until the responder got a prompt with `turns` user turns;
    return them, lower-cased."""
    async with asyncio.timeout(TURN_WAIT_S):
        while True:
            if server.responder.prompts:
                said = [t.text.lower() for t in server.responder.prompts[-1].turns
                        if t.role == "user"]
                if len(said) >= turns:
                    return said
            await asyncio.sleep(0.05)


@pytest.mark.parametrize(("choice", "turns"), [("semantic_vad", 1), ("server_vad", 2)])
async def test_a_pause_inside_a_spoken_sentence_is_one_turn_when_the_sentence_decides(
        start_server, tmp_path: Path, choice: str, turns: int) -> None:
    """Piper says the sentence with a 700 ms pause after "for" into the page's microphone:
    with `semantic_vad` it is one user turn with every word, prompted once; with `server_vad`
    (its 500 ms of silence, as OpenAI's) the first half is a turn of its own (answered on its
    own when its transcript came before the second half ended; either way the reply that goes
    on is prompted with both turns: tests/test_semantic_vad.py)."""
    utterance = paused_sentence(FIRST_HALF, SECOND_HALF, "piper", None)
    wav = speech_fixtures.write_wav(tmp_path / "paused.wav",
                                    speech_fixtures.place(utterance, 1000.0, 6000.0))
    server = await start_piper(start_server)
    async with chromium(fake_mic=wav) as browser, open_demo(browser, server.http_url) as demo:
        await mic_on_with(demo, choice)
        await demo.wait_state(f"s.userTranscripts.length >= {turns}", timeout_s=TURN_WAIT_S)
        prompted = await wait_prompt_with(server, turns)
        await demo.page.wait_for_timeout(1500)
        said = [t["transcript"].lower() for t in await demo.state("s.userTranscripts")]
        assert prompted == said, (prompted, said)
        if turns == 1:
            assert re.search(r"table for\W+(two|2) people", said[0]), said
            assert len(server.responder.prompts) == 1
        else:
            assert "table for" in said[0] and "people" not in said[0], said
            assert "people" in said[1], said
