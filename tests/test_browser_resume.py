"""The page after a dropped connection, in headless Chromium against a real server (issue 26):
mid-reply, the network drops (the server's side of the socket aborted) or the person reloads
the page; the page reconnects by itself with its resume token, gets its session back and
shows the history the server kept, as heard: the reply cut where its last ACK put it (with
the uniform voice, word i spans [400 i, 400 (i + 1)) ms), the rest struck through."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser

from server.responders.prompt import ConversationTurn
from tests.browser import DemoPage, chromium, open_demo
from tests.conftest import RunningServer
from tests.test_browser import UNIFORM_WORD_MS, UNIFORM_WORDS, wait_playing, wait_prompts

pytestmark = pytest.mark.timeout(120)

TEXT = " ".join(UNIFORM_WORDS) + "."


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """Headless Debian Chromium, one per test (closed before the test's server stops)."""
    async with chromium() as launched:
        yield launched


def acked_ms(demo: DemoPage, response_id: str) -> list[int]:
    """Every `played_ms` the page ACKed for a response, in order."""
    return [e["played_ms"] for e in demo.sent
            if e["type"] == "playback.ack" and e["response_id"] == response_id]


async def check_kept(demo: DemoPage, server: RunningServer, response_id: str, item_id: str,
                     acked_before_drop: int) -> str:
    """Wait for the page's resumed session and check what it shows; returns the heard text."""
    await demo.wait_state("s.resumed.length === 1 && s.connected", timeout_s=20)
    resumed = (await demo.state("s.resumed"))[0]
    created = demo.of_type("session.created")
    assert len(created) == 2 and created[0]["session"]["id"] == created[1]["session"]["id"]
    heard = resumed["heard"][0]
    assert (heard["item_id"], heard["response_id"]) == (item_id, response_id)
    assert heard["played_ms"] in acked_ms(demo, response_id)
    assert heard["played_ms"] >= acked_before_drop
    words = heard["played_ms"] // UNIFORM_WORD_MS
    assert 2 <= words < len(UNIFORM_WORDS)
    expected = " ".join(UNIFORM_WORDS[:words])
    assert (heard["text"], heard["full_text"], heard["interrupted"]) == (expected, TEXT, True)
    assert [item["id"] for item in resumed["items"]][1:] == [item_id]
    parts = await demo.history_parts(item_id)
    assert parts["heard"] == expected
    assert parts["unheard"].strip() == TEXT[len(expected):].strip()
    users = demo.page.get_by_test_id("history-user")
    assert await users.count() == 1
    assert await users.first.locator("p").text_content() == f"say: {TEXT}"
    assert await demo.state("s.items.length") == 2
    badges = await demo.page.locator(
        f'[data-testid="history-item"][data-item-id="{item_id}"] .badge').all_text_contents()
    assert "interrupted" in badges
    assert "Resumed session" in await demo.page.locator("#log").text_content()
    # The conversation goes on from the heard text.
    await demo.prompt("What did you say?")
    prompt = await wait_prompts(server, 2)
    assert prompt.turns[1] == ConversationTurn(
        role="assistant", text=expected, full_text=TEXT, interrupted=True)
    return expected


async def test_a_dropped_connection_reconnects_and_shows_the_history_as_heard(
        start_server, browser: Browser) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    async with open_demo(browser, server.http_url) as demo:
        response_id = await demo.prompt(f"say: {TEXT}")
        item_id = await demo.item_of(response_id)
        await wait_playing(demo, response_id, 1500)
        acked = max(acked_ms(demo, response_id))
        for websocket in list(server.demo._open):
            websocket.transport.abort()
        await check_kept(demo, server, response_id, item_id, acked)
        reconnects = await demo.state("s.reconnects")
        assert len(reconnects) == 1 and 300 <= reconnects[0]["retryMs"] <= 700
        assert await demo.state("s.lastError") is None


async def test_a_reload_mid_reply_gets_the_session_back(start_server, browser: Browser) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    async with open_demo(browser, server.http_url) as demo:
        response_id = await demo.prompt(f"say: {TEXT}")
        item_id = await demo.item_of(response_id)
        await wait_playing(demo, response_id, 1500)
        acked = max(acked_ms(demo, response_id))
        token = await demo.page.evaluate("sessionStorage.getItem('duplex-demo.resume-token')")
        assert token == demo.of_type("session.created")[0]["session"]["resume"]["token"]
        await demo.page.reload()
        assert any(json.dumps(token)[1:-1] in url for url in await socket_urls(demo))
        await check_kept(demo, server, response_id, item_id, acked)
        assert await demo.state("s.lastError") is None


async def socket_urls(demo: DemoPage) -> list[str]:
    """The URLs of the WebSockets the page has opened (after its reload: the resuming one)."""
    await demo.wait_state("s.connected", timeout_s=20)
    return [ws.url for ws in demo.sockets]
