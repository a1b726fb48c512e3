"""Drive the demo page in the system's headless Chromium with Playwright's async API.

Debian's `/usr/bin/chromium` is used as is (Playwright never downloads a browser here); the flags
are those measured to work on this machine (DESIGN.md section 6): autoplay without a gesture, a
fake microphone, no sandbox, no GPU, no background traffic. `DemoPage` wraps one open page: it
reads the page's test hook `window.duplexDemo.state` and records every WebSocket frame the page
sent and received, so tests can compare what the page did with what the server said.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Page, WebSocket, async_playwright

CHROMIUM_PATH = "/usr/bin/chromium"
"""Debian's Chromium; Playwright's own browser builds are never downloaded."""

CHROMIUM_ARGS = (
    "--autoplay-policy=no-user-gesture-required",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
)
"""Flags that work in this container (DESIGN.md section 6)."""

NO_LOOP = "%noloop"
"""Suffix of the fake-microphone file path that makes Chromium play the file once (then
silence) instead of looping it; this Chromium build honours it (checked in
tests/test_browser_microphone.py)."""

VIEWPORT = {"width": 1280, "height": 800}
"""Page size in CSS pixels (a laptop screen)."""

Event = dict[str, Any]


class DemoPage:
    """One open demo page plus the WebSocket frames it exchanged with the server.

    Attributes:
        page: the Playwright page.
        received: server events the page received on `/v1/realtime`, in order (parsed JSON).
        sent: client events the page sent, in order (parsed JSON).
        sockets: the WebSockets the page opened, in order (across reloads).
    """

    def __init__(self, page: Page) -> None:
        self.page = page
        self.received: list[Event] = []
        self.sent: list[Event] = []
        self.sockets: list[WebSocket] = []
        page.on("websocket", self._watch)

    def _watch(self, websocket: WebSocket) -> None:
        self.sockets.append(websocket)
        websocket.on("framereceived", lambda payload: self._record(self.received, payload))
        websocket.on("framesent", lambda payload: self._record(self.sent, payload))

    @staticmethod
    def _record(into: list[Event], payload: str | bytes) -> None:
        if isinstance(payload, str):
            into.append(json.loads(payload))

    def of_type(self, event_type: str, **match: Any) -> list[Event]:
        """Received server events of `event_type` whose top-level fields equal `match`."""
        return [e for e in self.received if e["type"] == event_type
                and all(e.get(k) == v for k, v in match.items())]

    async def wait_received(self, event_type: str, predicate: Callable[[Event], bool] | None = None,
                            timeout_s: float = 10.0) -> Event:
        """The first received event of `event_type` matching `predicate`, waiting for it.

        Polls the recorded frames every 20 ms; raises TimeoutError after `timeout_s` seconds.
        """
        async with asyncio.timeout(timeout_s):
            while True:
                for event in self.of_type(event_type):
                    if predicate is None or predicate(event):
                        return event
                await asyncio.sleep(0.02)

    def marks(self, response_id: str) -> list[Event]:
        """Every word mark (wire dicts) the page received for a response, in text order."""
        marks = [mark for delta in self.of_type("response.output_audio.delta",
                                                response_id=response_id)
                 for mark in delta.get("marks") or ()]
        return sorted(marks, key=lambda mark: mark["char_start"])

    async def state(self, expression: str = "s") -> Any:
        """Evaluate `expression` with `s` bound to `window.duplexDemo.state` (JSON-able result)."""
        return await self.page.evaluate(f"(() => {{ const s = window.duplexDemo.state; "
                                        f"return {expression}; }})()")

    async def wait_state(self, predicate: str, timeout_s: float = 10.0) -> None:
        """Wait until `predicate` (JS, `s` = the page state) is truthy; polls every 50 ms.

        Polls from here with `page.evaluate` (DevTools evaluation, which the page's
        Content-Security-Policy does not restrict) rather than `wait_for_function`, whose
        in-page `eval` the policy blocks. Raises TimeoutError after `timeout_s` seconds.
        """
        expression = (f"(() => {{ const s = window.duplexDemo?.state; "
                      f"return !!s && !!({predicate}); }})()")
        async with asyncio.timeout(timeout_s):
            while not await self.page.evaluate(expression):
                await asyncio.sleep(0.05)

    async def prompt(self, text: str) -> str:
        """Type a prompt, press Send and return the id of the response it started."""
        before = await self.state("s.currentResponseId")
        await self.page.get_by_test_id("prompt").fill(text)
        await self.page.get_by_test_id("send").click()
        await self.wait_state(
            f"s.currentResponseId && s.currentResponseId !== {json.dumps(before)}")
        return await self.state("s.currentResponseId")

    async def item_of(self, response_id: str) -> str:
        """The assistant item id the page holds for a response."""
        await self.wait_state(
            f"s.items.some((i) => i.responseId === {json.dumps(response_id)})")
        return await self.state(
            f"s.items.find((i) => i.responseId === {json.dumps(response_id)}).id")

    async def history_parts(self, item_id: str) -> dict[str, str]:
        """The history panel's text parts of an assistant item: heard, unheard, pending (each
        the text of all its elements, in document order: a reply's rendered markdown has one
        per text run)."""
        entry = self.page.locator(f'[data-testid="history-item"][data-item-id="{item_id}"]')
        return {part: "".join(await entry.get_by_test_id(part).all_text_contents())
                for part in ("heard", "unheard", "pending")}


def fake_mic_args(wav: Path | None, loop: bool = False) -> list[str]:
    """Extra Chromium flags for a fake microphone that plays `wav` (a PCM WAV file, e.g.
    16-bit mono at 16 kHz) from the moment capture starts: once (`NO_LOOP`), or over and over
    with `loop`. No flags for None (Chromium's default fake microphone: a beep every second).

    Raises:
        FileNotFoundError: `wav` does not exist.
    """
    if wav is None:
        return []
    path = Path(wav).resolve(strict=True)
    return [f"--use-file-for-fake-audio-capture={path}{'' if loop else NO_LOOP}"]


@asynccontextmanager
async def chromium(fake_mic: Path | None = None, loop_mic: bool = False,
                   extra_args: Sequence[str] = ()) -> AsyncIterator[Browser]:
    """Launch headless Debian Chromium (CHROMIUM_ARGS, then `extra_args`); closed on exit.

    `fake_mic` / `loop_mic`: the fake microphone's WAV file and whether it loops (see
    `fake_mic_args`); Chromium takes one file per launch, so each recording needs a launch.
    """
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM_PATH, headless=True,
            args=[*CHROMIUM_ARGS, *fake_mic_args(fake_mic, loop_mic), *extra_args])
        try:
            yield browser
        finally:
            await browser.close()


@asynccontextmanager
async def open_demo(browser: Browser, http_url: str) -> AsyncIterator[DemoPage]:
    """Open the demo page at `http_url` in a fresh context; yields once the session is connected
    and the page's audio output is configured. Raises TimeoutError otherwise."""
    context = await browser.new_context(viewport=VIEWPORT)
    try:
        demo = DemoPage(await context.new_page())
        await demo.page.goto(http_url + "/")
        await demo.wait_state("s.connected && s.sessionRate > 0")
        yield demo
    finally:
        await context.close()
