"""Real-browser tests: the demo page in headless Debian Chromium against a real demo server.

The page plays the server's audio through its AudioWorklet, ACKs what it rendered and barges in
on Stop / Space. Each test reads the page's test hook (`window.duplexDemo.state`), its DOM, and
the WebSocket frames it exchanged (recorded by `tests.browser.DemoPage`), and checks them against
the server's own view: the `conversation.item.truncated` cap it sent and the prompt its responder
received for the next turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser

from server.responders.prompt import ConversationTurn, Prompt
from tests.browser import DemoPage, chromium, open_demo
from tests.conftest import RunningServer

pytestmark = pytest.mark.timeout(120)
"""Bounded, and with the thread method: a hang inside the event loop cannot swallow it."""

RADIO = "Tell me about the history of radio"
"""A prompt the demo responder answers with a long topic (about a minute of speech)."""

UNIFORM_WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
)
"""Twenty one-word units: with the uniform voice, word i spans [400 i, 400 (i + 1)) ms."""

UNIFORM_WORD_MS = 400
"""Duration of a one-word unit with the uniform test voice (contracts.md, timing rule)."""

MIN_CONTRAST = 4.5
"""WCAG 2.x level AA minimum contrast ratio for normal-size text."""


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """Headless Debian Chromium, one per test (closed before the test's server stops)."""
    async with chromium() as launched:
        yield launched


def js(value: Any) -> str:
    """A Python value as a JavaScript literal (for page predicates)."""
    return json.dumps(value)


async def wait_playing(demo: DemoPage, response_id: str, rendered_ms: int) -> None:
    """Wait until the page rendered more than `rendered_ms` of a response and ACKed it (>= 3)."""
    rid = js(response_id)
    await demo.wait_state(
        f"s.renderedMs({rid}) > {rendered_ms} && "
        f"s.acks.filter((a) => a.response_id === {rid}).length >= 3", timeout_s=15)


async def press_stop(demo: DemoPage, gesture: str) -> None:
    """Barge in with the Stop button ("click") or the Space key ("space")."""
    if gesture == "click":
        await demo.page.get_by_test_id("stop").click()
    else:
        await demo.page.keyboard.press("Space")


async def wait_prompts(server: RunningServer, count: int, timeout_s: float = 10.0) -> Prompt:
    """Wait until the server's responder received `count` prompts; return the last one."""
    async with asyncio.timeout(timeout_s):
        while len(server.responder.prompts) < count:
            await asyncio.sleep(0.02)
    return server.responder.prompts[-1]


TRANSCRIPT_WORDS = """async () => {
  await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  const replies = document.querySelectorAll('#conversation .turn.assistant .transcript');
  const words = [...replies[replies.length - 1].querySelectorAll('.word')];
  return {texts: words.map((w) => w.textContent), states: words.map((w) => w.dataset.state)};
}"""
"""Text and state of each word of the newest reply's transcript, read after two animation
frames (so that the page rendered its latest playback state)."""


async def stop_and_check_agreement(demo: DemoPage, response_id: str, item_id: str,
                                   gesture: str) -> dict[str, Any]:
    """Barge in, then check that page and server agree on the cut; returns the heard event.

    Checks: one `barge_in` (on the wire as in the page state) preceded by a final ACK at the
    same position; the server's `conversation.item.truncated.audio_end_ms` and the heard
    event's `played_ms` equal it; no audio of the response after the cap; the history panel
    shows exactly the heard text, the struck-through rest and nothing pending; the transcript
    shows as spoken exactly the words whose marks end by the cut, none highlighted.
    """
    await press_stop(demo, gesture)
    await demo.wait_state("s.bargeIns.length === 1 && s.responseState === 'stopped'")
    barge = await demo.state("s.bargeIns[0]")
    assert barge["response_id"] == response_id
    assert barge["item_id"] == item_id
    assert barge["source"] == "button"
    cut = barge["audio_end_ms"]
    assert await demo.state("s.lastBargeInLatencyMs") < 500

    item = js(item_id)
    await demo.wait_state(f"s.heard[{item}]?.method === 'marks'")
    heard = await demo.state(f"s.heard[{item}]")
    truncated = await demo.wait_received(
        "conversation.item.truncated", lambda e: e["item_id"] == item_id)
    assert truncated["audio_end_ms"] == cut
    assert heard["played_ms"] == cut
    assert heard["interrupted"] is True

    acks = [a["played_ms"] for a in await demo.state("s.acks")
            if a["response_id"] == response_id]
    assert acks == sorted(acks) and acks[-1] == cut
    wire = [e for e in demo.sent if e["type"] in ("playback.ack", "barge_in")]
    assert wire[-1] == {**barge, "event_id": wire[-1]["event_id"]}
    assert wire[-2]["type"] == "playback.ack" and wire[-2]["played_ms"] == cut

    after_cap = demo.received[demo.received.index(truncated):]
    assert not [e for e in after_cap if e["type"] == "response.output_audio.delta"
                and e["response_id"] == response_id]
    sent = [e["audio_end_ms"] for e in demo.of_type("response.output_audio.delta",
                                                    response_id=response_id)]
    assert cut <= sent[-1]

    full = heard["full_text"]
    assert full.startswith(heard["text"])
    assert await demo.history_parts(item_id) == {
        "heard": heard["text"], "unheard": full[len(heard["text"]):], "pending": ""}

    shown = await demo.page.evaluate(TRANSCRIPT_WORDS)
    assert "current" not in shown["states"], "a stopped reply highlights no word"
    spoken = [text for text, state in zip(shown["texts"], shown["states"], strict=True)
              if state == "spoken"]
    assert spoken == [m["text"] for m in demo.marks(response_id) if m["end_ms"] <= cut]
    return heard


def heard_from_marks(full_text: str, marks: list[dict[str, Any]], cut_ms: int) -> str:
    """The heard prefix implied by word marks: the written text up to the last word whose mark
    ends at or before `cut_ms` (DESIGN.md section 5, marks), with punctuation attached to that
    word, trailing whitespace stripped; "" when no word ended. Marks must be in text order."""
    ended = [mark["end_ms"] <= cut_ms for mark in marks]
    assert ended == sorted(ended, reverse=True), "heard words form a prefix of the reply"
    end = max((m["char_end"] for m, done in zip(marks, ended, strict=True) if done), default=0)
    while 0 < end < len(full_text) and not (full_text[end].isspace() or full_text[end].isalnum()):
        end += 1
    return full_text[:end].rstrip()


@pytest.mark.parametrize("gesture", ["click", "space"])
async def test_stop_cuts_history_where_the_page_stopped(start_server, browser: Browser,
                                                        gesture: str) -> None:
    server = await start_server(tts="piper", calibration="marks")
    async with open_demo(browser, server.http_url) as demo:
        response_id = await demo.prompt(RADIO)
        item_id = await demo.item_of(response_id)
        await wait_playing(demo, response_id, 1200)

        heard = await stop_and_check_agreement(demo, response_id, item_id, gesture)
        marks = demo.marks(response_id)
        assert [m["text"] for m in marks] == [
            heard["full_text"][m["char_start"]:m["char_end"]] for m in marks]
        expected = heard_from_marks(heard["full_text"], marks, heard["played_ms"])
        assert heard["text"] == expected
        assert len(expected.split()) >= 2, "more than a second of speech holds several words"
        assert len(demo.of_type("response.created")) == 1
        assert len([e for e in demo.sent if e["type"] == "conversation.item.create"]) == 1

        follow_up = await demo.prompt("Where did you stop?")
        prompt = await wait_prompts(server, 2)
        assert prompt.turns == (
            ConversationTurn(role="user", text=RADIO),
            ConversationTurn(role="assistant", text=expected, full_text=heard["full_text"],
                             interrupted=True),
            ConversationTurn(role="user", text="Where did you stop?"),
        )
        reply = await demo.wait_received(
            "response.output_audio_transcript.delta", lambda e: e["response_id"] == follow_up)
        assert reply["delta"].startswith("I was cut off after")
        assert expected.split()[-1] in reply["delta"]
        assert await demo.state("s.lastError") is None


async def test_uniform_voice_cut_is_the_words_played(start_server, browser: Browser) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    text = " ".join(UNIFORM_WORDS) + "."
    async with open_demo(browser, server.http_url) as demo:
        response_id = await demo.prompt(f"say: {text}")
        item_id = await demo.item_of(response_id)
        await wait_playing(demo, response_id, 1500)

        heard = await stop_and_check_agreement(demo, response_id, item_id, "click")
        assert heard["full_text"] == text
        words = heard["played_ms"] // UNIFORM_WORD_MS
        assert 3 <= words < len(UNIFORM_WORDS)
        assert heard["text"] == " ".join(UNIFORM_WORDS[:words])

        await demo.prompt("What did you say?")
        prompt = await wait_prompts(server, 2)
        assert prompt.turns[1] == ConversationTurn(
            role="assistant", text=heard["text"], full_text=text, interrupted=True)
        assert await demo.state("s.lastError") is None


SAMPLE_HIGHLIGHT = """async ([responseId, durationMs]) => {
  const state = window.duplexDemo.state;
  const words = () => {
    const replies = document.querySelectorAll('#conversation .turn.assistant .transcript');
    return [...replies[replies.length - 1].querySelectorAll('.word')];
  };
  const samples = [];
  const until = performance.now() + durationMs;
  while (performance.now() < until) {
    await new Promise((resolve) => requestAnimationFrame(resolve));
    samples.push({ms: state.renderedMs(responseId), states: words().map((w) => w.dataset.state)});
  }
  return {samples, texts: words().map((w) => w.textContent)};
}"""
"""Sample, every animation frame for `durationMs`, the rendered position and the state of each
word of the newest reply's transcript ('' | 'current' | 'spoken')."""


def word_position(states: list[str]) -> float:
    """Where the transcript's highlight is: the index of the 'current' word, or (between words)
    the number of spoken words minus 0.5. Checks the states read spoken* current? unplayed*."""
    order = {"spoken": 0, "current": 1, "": 2}
    ranks = [order[state] for state in states]
    assert ranks == sorted(ranks) and states.count("current") <= 1, states
    if "current" in states:
        return float(states.index("current"))
    return states.count("spoken") - 0.5


def mark_position(marks: list[dict[str, Any]], position_ms: float) -> float:
    """Index of the mark containing `position_ms`, or (in a pause) marks ended minus 0.5."""
    for index, mark in enumerate(marks):
        if mark["start_ms"] <= position_ms < mark["end_ms"]:
            return float(index)
    return sum(mark["end_ms"] <= position_ms for mark in marks) - 0.5


async def test_highlighted_word_follows_playback(start_server, browser: Browser) -> None:
    server = await start_server(tts="piper", calibration="marks")
    async with open_demo(browser, server.http_url) as demo:
        response_id = await demo.prompt("How do tides work?")
        await demo.wait_state(f"s.renderedMs({js(response_id)}) > 200", timeout_s=15)
        sampled = await demo.page.evaluate(SAMPLE_HIGHLIGHT, [response_id, 3000])
        await press_stop(demo, "click")
        await demo.wait_state("s.bargeIns.length === 1")

        marks = demo.marks(response_id)
        assert sampled["texts"] == [m["text"] for m in marks][:len(sampled["texts"])]
        highlighted = set()
        for sample in sampled["samples"]:
            shown = word_position(sample["states"])
            expected = mark_position(marks, sample["ms"])
            assert abs(shown - expected) <= 1, (sample["ms"], shown, expected)
            if shown.is_integer():
                highlighted.add(int(shown))
        assert len(sampled["samples"]) >= 60, "animation frames keep coming while playing"
        assert len(highlighted) >= 6, "the highlight moved word by word over three seconds"


async def test_reply_played_to_the_end_is_kept_in_full(start_server, browser: Browser) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    text = "Short and sweet."
    async with open_demo(browser, server.http_url) as demo:
        response_id = await demo.prompt(f"say: {text}")
        item_id = await demo.item_of(response_id)
        item = js(item_id)
        await demo.wait_state(f"s.heard[{item}]?.method === 'full' && s.responseState === 'idle'")

        total_ms = 3 * UNIFORM_WORD_MS
        deltas = demo.of_type("response.output_audio.delta", response_id=response_id)
        assert deltas[-1]["audio_end_ms"] == total_ms
        acks = [a["played_ms"] for a in await demo.state("s.acks")
                if a["response_id"] == response_id]
        assert acks == sorted(set(acks)) and acks[-1] == total_ms
        heard = await demo.state(f"s.heard[{item}]")
        assert (heard["text"], heard["full_text"], heard["played_ms"]) == (text, text, total_ms)
        assert heard["interrupted"] is False

        assert await demo.history_parts(item_id) == {"heard": text, "unheard": "", "pending": ""}
        entry = demo.page.locator(f'[data-testid="history-item"][data-item-id="{item_id}"]')
        assert await entry.locator(".badge.warn").count() == 0
        await demo.wait_state("[...document.querySelectorAll('#conversation .word')]"
                              ".every((w) => w.dataset.state === 'spoken')")
        assert await demo.page.locator("#conversation .turn.stopped").count() == 0

        await demo.page.get_by_test_id("stop").click()
        assert await demo.state("s.bargeIns.length") == 0

        await demo.prompt("What did you say?")
        prompt = await wait_prompts(server, 2)
        assert prompt.turns[1] == ConversationTurn(
            role="assistant", text=text, full_text=text, interrupted=False)
        assert await demo.state("s.lastError") is None


CURRENT_WORD_VISIBLE = """(() => {
  const replies = document.querySelectorAll('#conversation .turn.assistant .transcript');
  const word = replies[replies.length - 1]?.querySelector('.word[data-state="current"]');
  if (!word) return false;
  const box = word.getBoundingClientRect();
  return document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2) === word;
})()"""
"""JS: the word being spoken in the newest reply is on screen, not scrolled away nor covered
(e.g. by a sticky heading)."""

LAYOUT = """() => {
  const rect = (element) => element.getBoundingClientRect().toJSON();
  const root = document.documentElement;
  return {
    overflowX: root.scrollWidth - root.clientWidth,
    viewport: {width: innerWidth, height: innerHeight},
    composer: rect(document.getElementById('composer')),
    panels: [...document.querySelectorAll('.panel')].map((panel) => ({
      ...rect(panel), overflowX: panel.scrollWidth - panel.clientWidth})),
  };
}"""
"""Page geometry in CSS pixels: horizontal overflow of the page and of each panel, the viewport,
the composer's and the panels' boxes."""

CONTRAST = """() => {
  const rgba = (css) => {
    const [r, g, b, a = 1] = css.match(/[\\d.]+/g).map(Number);
    return [r, g, b, a];
  };
  const over = (top, below) => top.slice(0, 3).map((c, i) => c * top[3] + below[i] * (1 - top[3]));
  const luminance = (rgb) => {
    const [r, g, b] = rgb.map((c) => {
      const s = c / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const background = (element) => {
    const layers = [];
    let opacity = 1;
    for (let node = element; node; node = node.parentElement) {
      const style = getComputedStyle(node);
      opacity *= Number(style.opacity);
      layers.push(rgba(style.backgroundColor));
    }
    let color = [255, 255, 255];
    for (const layer of layers.reverse()) color = over(layer, color);
    return {color, opacity};
  };
  const selectors = ['.who', '.transcript .word[data-state=""]',
    '.transcript .word[data-state="spoken"]', '.transcript .word[data-state="current"]',
    '.turn-note', '[data-testid="heard"]',
    '[data-testid="unheard"]', '[data-testid="pending"]', '.badge', '.badge.warn', '.cursor',
    '.status span', 'h2 small', '.log li', '.log time', '#stop', '#send', 'kbd'];
  return selectors.map((selector) => {
    const element = [...document.querySelectorAll(selector)].find((e) => e.textContent.trim());
    if (!element) return {selector, ratio: null};
    const {color: back, opacity} = background(element);
    const fore = over([...rgba(getComputedStyle(element).color).slice(0, 3), opacity], back);
    const [light, dark] = [luminance(fore), luminance(back)].sort((a, b) => b - a);
    return {selector, ratio: (light + 0.05) / (dark + 0.05)};
  });
}"""
"""WCAG 2.x contrast ratio of the first non-empty element of each text style on the page,
against its composited background (ancestors' opacity applied to the text colour)."""


def check_layout(layout: dict[str, Any]) -> None:
    """No horizontal overflow; the composer is on screen; panels are roomy and do not overlap."""
    assert layout["overflowX"] <= 0
    assert layout["composer"]["bottom"] <= layout["viewport"]["height"]
    panels = layout["panels"]
    assert len(panels) == 2
    for panel in panels:
        assert panel["overflowX"] <= 0
        assert panel["height"] >= 150 and panel["width"] >= 280, panel
    first, second = panels
    assert (first["right"] <= second["left"]) or (first["bottom"] <= second["top"])


async def test_screenshot_mid_conversation(start_server, browser: Browser,
                                           tmp_path: Path) -> None:
    server = await start_server(tts="piper", calibration="marks")
    async with open_demo(browser, server.http_url) as demo:
        first = await demo.prompt(RADIO)
        first_item = await demo.item_of(first)
        await wait_playing(demo, first, 1500)
        await press_stop(demo, "click")
        await demo.wait_state(f"s.heard[{js(first_item)}]?.method === 'marks'")
        second = await demo.prompt("Please continue")
        await demo.wait_state(f"s.renderedMs({js(second)}) > 1500", timeout_s=15)

        shots = {"desktop": (1280, 800), "phone": (390, 844)}
        for name, (width, height) in shots.items():
            await demo.page.set_viewport_size({"width": width, "height": height})
            await demo.wait_state(f"innerWidth === {width} && ({CURRENT_WORD_VISIBLE})")
            path = tmp_path / f"mid-conversation-{name}.png"
            await demo.page.screenshot(path=path)
            assert path.stat().st_size > 10_000
            check_layout(await demo.page.evaluate(LAYOUT))
        contrast = await demo.page.evaluate(CONTRAST)
        assert all(c["ratio"] is not None for c in contrast), contrast
        low = [c for c in contrast if c["ratio"] < MIN_CONTRAST]
        assert not low, low
        assert await demo.state("s.responseState") == "speaking"
