"""The page renders a reply's markdown and keeps the heard cut exact on it (issue 27).

Real headless Chromium against a real demo server (uniform test voice for exact timing) whose
replies come from an OpenAI-compatible LLM stream (`tests/llm_proxy.py`, "script" mode: the
reply in token-sized pieces, as an LLM streams it): the reply's code block, table, link, list
and emphasis render as HTML in the conversation and the history; the history shows the heard
prefix and the struck-through unheard rest on the rendered
text, exactly where the server cut; LLM text cannot inject script (`<img onerror>`,
`javascript:` links, `<script>`). `web/markdown-view.js` is also driven directly in the page
for cuts at every kind of place (inside a link, after a code block, in a table, a list).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.async_api import Browser

from tests.browser import chromium, open_demo
from tests.llm_proxy import RecordingProxy
from tests.test_browser import js, press_stop, wait_playing

pytestmark = pytest.mark.timeout(120)

REPLY = (
    "Intro words come first. See [the docs](https://docs.python.org/3/library/) and **run** "
    "it:\n\n```python\nprint('hi')\nx = 1\n```\n\n| name | size |\n|---|---|\n"
    "| alpha | 3 |\n| beta | 4 |\n\n- one item\n- two _items_\n\nThat is all."
)
"""A reply with a link, emphasis, a fenced code block, a table and a list."""

RENDER = """async ([text, offsets]) => {
  const {renderMarkdown} = await import('/markdown-view.js');
  const box = document.createElement('div');
  document.body.append(box);
  const segments = renderMarkdown(box, Array.from(text), offsets);
  const result = {
    segments: segments.map((nodes) => nodes.map((n) => n.data).join('')),
    html: box.innerHTML,
    text: box.textContent,
    tags: [...box.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()),
    links: [...box.querySelectorAll('a')].map((a) => ({
      href: a.getAttribute('href'), target: a.target, rel: a.rel})),
  };
  box.remove();
  return result;
}"""
"""Render `text` with `offsets` in the page with web/markdown-view.js; the text of each segment,
the HTML, the element names and the links."""


NO_UPSTREAM = "http://127.0.0.1:9"
"""The proxy's upstream: never reached in "script" mode."""


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    """An LLM server that streams `proxy.script`."""
    with RecordingProxy(NO_UPSTREAM) as recording:
        recording.mode = "script"
        yield recording


async def llm_server(start_server: Any, proxy: RecordingProxy, reply: str) -> Any:
    """A demo server (uniform voice, marks) whose LLM streams `reply` in word-sized pieces; the
    server sends audio (and its transcript) up to a minute ahead of playback, so the whole
    reply's text reaches the page before the person interrupts."""
    proxy.script = re.findall(r"\S+\s*|\s+", reply)
    proxy.script_pause_s = 0.0
    return await start_server(tts="uniform", calibration="marks", lead_ms=60_000,
                              llm_url=proxy.url,
                              llm_model="scripted", llm_timeout_s=30.0)


@pytest.fixture
async def browser():
    """Headless Debian Chromium, one per test."""
    async with chromium() as launched:
        yield launched


async def render(demo, text: str, offsets: list[int]) -> dict[str, Any]:
    """`RENDER` in the demo page."""
    return await demo.page.evaluate(RENDER, [text, offsets])


def letters(text: str) -> str:
    """`text` without whitespace: rendered parts are compared by their characters (markdown puts
    line ends between blocks; whitespace between two parts belongs to neither)."""
    return "".join(text.split())


async def test_reply_markdown_renders_and_the_cut_is_exact(start_server, browser: Browser,
                                                           proxy: RecordingProxy) -> None:
    server = await llm_server(start_server, proxy, REPLY)
    async with open_demo(browser, server.http_url) as demo:
        response_id = await demo.prompt("Show me the docs and a table.")
        item_id = await demo.item_of(response_id)
        await wait_playing(demo, response_id, 2300)
        await press_stop(demo, "click")
        item = js(item_id)
        await demo.wait_state(f"s.heard[{item}]?.method === 'marks'")
        heard = await demo.state(f"s.heard[{item}]")
        assert heard["full_text"] == REPLY
        assert REPLY.startswith(heard["text"]) and heard["text"]
        assert len(heard["text"]) < REPLY.index("```"), "the cut is before the code block"

        conversation = demo.page.locator("#conversation .turn.assistant .transcript").last
        entry = demo.page.locator(f'[data-testid="history-item"][data-item-id="{item_id}"]')
        for view in (conversation, entry.locator(".markdown")):
            assert await view.locator("pre code").text_content() == "print('hi')\nx = 1\n"
            assert await view.locator("table th").all_text_contents() == ["name", "size"]
            assert await view.locator("table td").all_text_contents() == [
                "alpha", "3", "beta", "4"]
            link = view.locator("a")
            assert await link.text_content() == "the docs"
            assert await link.get_attribute("href") == "https://docs.python.org/3/library/"
            assert await link.get_attribute("target") == "_blank"
            assert await view.locator("strong").text_content() == "run"
            assert await view.locator("li").all_text_contents() == ["one item", "two items"]
            assert await view.locator("em").text_content() == "items"

        parts = await demo.history_parts(item_id)
        cut = await render(demo, REPLY, [len(heard["text"])])
        assert letters(parts["heard"]) == letters(cut["segments"][0]), "the rendered prefix"
        written = re.sub(r"\]\([^)]*\)|[\[\]*_`]", "", heard["text"])
        assert letters(parts["heard"]) == letters(written), "the heard words, no markup"
        assert parts["pending"] == ""
        whole = await render(demo, REPLY, [])
        assert letters(parts["heard"] + parts["unheard"]) == letters(whole["text"])
        assert await entry.locator("pre del.unheard").count() == 1, "the code block is unheard"
        assert await entry.locator("table del.unheard").count() == 6, "each cell struck"
        assert await entry.locator("pre .heard, table .heard").count() == 0
        spoken = await conversation.locator('.word[data-state="spoken"]').all_text_contents()
        ended = [m["text"] for m in demo.marks(response_id) if m["end_ms"] <= heard["played_ms"]]
        assert spoken == ended, "the transcript shows as spoken the words whose marks ended"


@pytest.mark.parametrize(("cut_after", "heard", "first_unheard"), [
    ("See [the", "Intro words come first. See the", " docs"),
    ("**run** it:", "Intro words come first. See the docs and run it:", "print('hi')"),
    ("x = 1\n```", "Intro words come first. See the docs and run it:print('hi')\nx = 1\n",
     "name"),
    ("| alpha |", "Intro words come first. See the docs and run it:print('hi')\nx = 1\n"
     "namesizealpha", "3"),
    ("- one", "Intro words come first. See the docs and run it:print('hi')\nx = 1\n"
     "namesizealpha3beta4one", " item"),
    ("two _items_", "Intro words come first. See the docs and run it:print('hi')\nx = 1\n"
     "namesizealpha3beta4one itemtwo items", "That"),
])
async def test_cut_on_rendered_markdown(start_server, browser: Browser, cut_after: str,
                                        heard: str, first_unheard: str) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    cut = REPLY.index(cut_after) + len(cut_after)
    async with open_demo(browser, server.http_url) as demo:
        result = await render(demo, REPLY, [cut])
        before, after = result["segments"]
        assert "".join(before.split("\n")) == "".join(heard.split("\n"))
        assert after.lstrip("\n").startswith(first_unheard), after
        whole = await render(demo, REPLY, [])
        assert result["html"] == whole["html"], "the cut changes nothing in the rendering"


@pytest.mark.parametrize("attack", [
    '<img src=x onerror="window.__injected = 1">',
    '<script>window.__injected = 1</script>',
    '[click me](javascript:window.__injected=1)',
    '<a href="javascript:window.__injected=1">click me</a>',
    '<svg onload="window.__injected = 1"></svg>',
    '<iframe src="javascript:window.__injected=1"></iframe>',
    '<details open ontoggle="window.__injected = 1">x</details>',
])
async def test_llm_text_cannot_inject_script(start_server, browser: Browser, attack: str) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    async with open_demo(browser, server.http_url) as demo:
        result = await render(demo, f"Here you go: {attack} and more.", [5])
        await demo.page.wait_for_timeout(100)
        assert await demo.page.evaluate("window.__injected") is None
        assert not {"img", "script", "svg", "iframe"} & set(result["tags"])
        assert "onerror" not in result["html"] and "onload" not in result["html"]
        assert "ontoggle" not in result["html"]
        assert all(not (link["href"] or "").lower().startswith("javascript")
                   for link in result["links"])


async def test_injection_in_a_spoken_reply_runs_nothing(start_server, browser: Browser,
                                                        proxy: RecordingProxy) -> None:
    reply = ('Look <img src=x onerror="window.__injected = 1"> and '
             '[this](javascript:window.__injected=1) now.')
    server = await llm_server(start_server, proxy, reply)
    async with open_demo(browser, server.http_url) as demo:
        response_id = await demo.prompt("Show me a picture.")
        item_id = await demo.item_of(response_id)
        await demo.wait_state(f"s.heard[{js(item_id)}]?.method === 'full'", timeout_s=20)
        for link in await demo.page.locator(".markdown a").all():
            await link.click()
        await demo.page.wait_for_timeout(200)
        assert await demo.page.evaluate("window.__injected") is None
        assert await demo.page.locator(".markdown img, .markdown script").count() == 0
        assert await demo.state("s.lastError") is None
