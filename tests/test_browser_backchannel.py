"""The page pauses a reply for a backchannel and resumes it (headless Chromium, fake mic).

A uniform-voice `say:` reply plays; the fake microphone, switched on as it starts rendering,
carries espeak-ng "uh-huh" 900 ms later. The page's VAD and the server's hear it: the page
shows "paused — listening", the server decides "backchannel", the page resumes the very
audio it kept (the reply renders to its end, its history stays whole) and shows the
backchannel marked as such, never as a turn.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import speech_fixtures
from tests.browser import chromium, open_demo
from tests.test_browser import js
from tests.test_browser_microphone import CLICK_MIC

pytestmark = pytest.mark.timeout(180)

REPLY = "First, open the settings app. Then tap on Wi-Fi and choose your network."


async def test_the_page_pauses_for_uh_huh_and_resumes_where_it_stopped(
        start_server, tmp_path: Path) -> None:
    server = await start_server(tts="uniform", calibration="marks", pause_timeout_ms=20000)
    uh_huh = speech_fixtures.speech("uh-huh", "espeak", "en-us")
    wav = speech_fixtures.write_wav(tmp_path / "uh_huh.wav",
                                    speech_fixtures.place(uh_huh, 900, 3000))
    async with chromium(fake_mic=wav) as browser, open_demo(browser, server.http_url) as demo:
        response_id = await demo.prompt(f"say: {REPLY}")
        item_id = await demo.item_of(response_id)
        await demo.page.evaluate(CLICK_MIC, response_id)
        await demo.wait_state("s.responseState === 'paused'", timeout_s=15)
        status = await demo.page.text_content("#status-response")
        await demo.wait_state("s.pauses.some((e) => e.type === 'response.resumed')",
                              timeout_s=60)
        await demo.wait_state(f"s.heard[{js(item_id)}]?.method === 'full'", timeout_s=60)
        pauses = await demo.state("s.pauses")
        backchannels = await demo.state("s.backchannels")
        heard = await demo.state(f"s.heard[{js(item_id)}]")
        rendered = await demo.state(f"s.renderedMs({js(response_id)})")
        note = await demo.page.text_content(".turn.assistant .turn-note")
        shown = await demo.page.locator("[data-testid=backchannel]").count()
        transcripts = await demo.state("s.userTranscripts")
    assert status == "Assistant: paused — listening"
    assert [e["type"] for e in pauses] == ["response.paused", "response.resumed"]
    assert pauses[1]["reason"] == "backchannel"
    assert len(backchannels) == 1 and shown == 1
    assert note == "Resumed (backchannel)"
    assert heard["text"] == REPLY and heard["interrupted"] is False
    assert abs(rendered - heard["played_ms"]) <= 150, "every sample rendered once"
    assert transcripts == []
    assert len(server.responder.prompts) == 1, "no responder turn for the backchannel"
