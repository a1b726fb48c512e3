"""Refresh the README's picture of the page mid-interruption: `make screenshot`.

Starts a real server (`python -m server`, Piper voice, `marks` calibration) on a free loopback
port, opens the page in headless Debian Chromium (tests/browser.py), asks about the history of
radio, presses Stop after about 4 s of played audio, waits for the page to show the heard cut,
asks "Where did you stop?", scrolls the history to the cut reply's heard words and saves the page
(1280 x 800 CSS pixels) once that answer has played for 1.5 s, to docs/page-mid-interruption.png.

Raises TimeoutError when the server or the page does not get there (within 120 s / 15 s a step).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.browser import chromium, open_demo
from tests.server_process import server_process

PICTURE = Path(__file__).resolve().parent / "page-mid-interruption.png"
"""Where the picture goes (committed; the README shows it)."""

PLAYED_BEFORE_STOP_MS = 4000
"""Audio the page has played when Stop is pressed (ms): a sentence and a half of Piper."""


async def take_picture(path: Path = PICTURE) -> None:
    """Drive one conversation with an interruption and save the page to `path` (PNG)."""
    async with server_process("--tts", "piper", "--calibration", "marks") as server, \
            chromium() as browser, \
            open_demo(browser, f"http://127.0.0.1:{server.port}") as demo:
        first = await demo.prompt("Tell me about the history of radio")
        await demo.wait_state(f"s.renderedMs({json.dumps(first)}) > {PLAYED_BEFORE_STOP_MS}",
                              timeout_s=30)
        await demo.page.get_by_test_id("stop").click()
        item = await demo.item_of(first)
        await demo.wait_state(f"s.heard[{json.dumps(item)}]?.method === 'marks'")
        second = await demo.prompt("Where did you stop?")
        await demo.wait_state(f"s.renderedMs({json.dumps(second)}) > 1500", timeout_s=30)
        heard = demo.page.locator(f'[data-testid="history-item"][data-item-id="{item}"]')
        await heard.get_by_test_id("heard").evaluate("(e) => e.scrollIntoView({block: 'start'})")
        await demo.page.screenshot(path=path)
    print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    asyncio.run(take_picture())
