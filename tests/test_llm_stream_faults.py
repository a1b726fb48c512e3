"""Every reply ends, whatever an OpenAI-compatible LLM streams (issue 27): split or lone UTF-16
surrogates, control characters, an empty reply, a stall in mid-sentence. The LLM is the
recording proxy's "script" mode (`tests/llm_proxy.py`): its deltas go through the real
`LLMResponder` (the `openai` client decodes a `\\ud83d` escape to a lone surrogate, as with a
real server that splits an emoji's UTF-16 pair) into a real demo server with the real Piper
voice."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.llm_proxy import RecordingProxy
from tests.realtime_client import RealtimeClient

NO_UPSTREAM = "http://127.0.0.1:9"
"""The proxy's upstream: never reached in "script" mode."""


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    with RecordingProxy(NO_UPSTREAM) as recording:
        recording.mode = "script"
        yield recording


async def scripted_server(start_server: Any, proxy: RecordingProxy, **overrides: Any) -> Any:
    settings: dict[str, Any] = {"tts": "piper", "calibration": "marks", "lead_ms": 60_000,
                                "llm_model": "scripted", "llm_timeout_s": 30.0}
    return await start_server(llm_url=proxy.url, **{**settings, **overrides})


async def play_all(client: RealtimeClient, response_id: str) -> dict:
    """Wait for the response's terminal event, acknowledging all of its audio as played;
    check that it is the only one."""
    done = await client.wait_for("response.done",
                                 lambda e: e["response"]["id"] == response_id, 120)
    audio = client.of_type("response.output_audio.delta", response_id=response_id)
    if audio:
        await client.ack(response_id, max(e["audio_end_ms"] for e in audio))
    await client.drain(0.3)
    assert len([e for e in client.of_type("response.done")
                if e["response"]["id"] == response_id]) == 1
    return done["response"]


def transcript(client: RealtimeClient, response_id: str) -> str:
    return "".join(e["delta"] for e in client.of_type(
        "response.output_audio_transcript.delta", response_id=response_id))


@pytest.mark.parametrize(("script", "written"), [
    (["Great work ", "\ud83d", "\udc4d", " see you."], "Great work \U0001f44d see you."),
    (["Great work \ud83d", "\udc4d see you."], "Great work \U0001f44d see you."),
    (["A lone \ud83d half, ", "and \udc4d another."], "A lone \ufffd half, and \ufffd another."),
    (["Ends on a high half \ud83d"], "Ends on a high half \ufffd"),
    (["Bell\x07 and\x00 null, ", "esc\x1b[0m too."], "Bell\x07 and\x00 null, esc\x1b[0m too."),
])
async def test_invalid_or_split_unicode_still_ends_the_reply(
    start_server: Any, proxy: RecordingProxy, script: list[str], written: str,
) -> None:
    """A surrogate pair split across deltas is joined, a lone surrogate becomes U+FFFD, control
    characters pass into the text but not into the voice: the reply is spoken to its end,
    completes, and its heard text is sent and kept as written."""
    proxy.script = script
    server = await scripted_server(start_server, proxy)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt("Hello.")
        response = await play_all(client, response_id)
        assert response["status"] == "completed"
        assert transcript(client, response_id) == written
        heard = await client.heard(item_id, timeout=30)
        assert heard["full_text"] == written
        assert heard["text"] == written.rstrip()
        assert client.of_type("error") == []


@pytest.mark.parametrize("script", [[], [""], ["  ", "\n"]])
async def test_an_empty_reply_fails_and_adds_nothing_to_history(
    start_server: Any, proxy: RecordingProxy, script: list[str],
) -> None:
    """No content, an empty delta, only whitespace: the response fails with an `error`
    (generation_failed), and the next prompt holds no assistant turn and no interruption
    note for it."""
    proxy.script = script
    server = await scripted_server(start_server, proxy)
    async with RealtimeClient.connect(server.ws_url) as client:
        failed_id, _ = await client.prompt("Hello.")
        failed = await play_all(client, failed_id)
        assert failed["status"] == "failed"
        error = await client.wait_for("error")
        assert error["error"]["code"] == "generation_failed"
        assert "answered no text" in error["error"]["message"]
        proxy.script = ["Hi there."]
        second_id, _ = await client.prompt("Are you there?")
        assert (await play_all(client, second_id))["status"] == "completed"
    request = proxy.wait_requests(2)[1]
    assert [m for m in request.body["messages"] if m["role"] != "system"] == [
        {"role": "user", "content": "Hello."}, {"role": "user", "content": "Are you there?"}]


async def test_a_reply_that_stalls_mid_sentence_speaks_its_words_before_it_goes_on(
    start_server: Any, proxy: RecordingProxy,
) -> None:
    """The model writes half a sentence (its last word unfinished), then nothing for 4 s: the
    complete words are spoken within STALLED_TEXT_MS plus synthesis, long before the rest
    arrives; the unfinished word waits for its end; the whole reply is spoken and heard."""
    proxy.script = [("The museum opened ", 0.0), ("its doors in ", 0.05), ("Sept", 0.05),
                    ("ember of that year.", 4.0)]
    server = await scripted_server(start_server, proxy)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt("Hello.")
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == response_id, timeout=60)
        first_audio_s = time.monotonic()
        [request] = proxy.requests
        assert request.first_byte_s is not None
        first_text = transcript(client, response_id)
        response = await play_all(client, response_id)
        heard = await client.heard(item_id, timeout=30)
    assert request.upstream_done_s is not None
    assert first_audio_s < request.upstream_done_s - 1.0, "the stalled words were held back"
    assert first_text == "The museum opened its doors in "
    assert response["status"] == "completed"
    assert heard["text"] == "The museum opened its doors in September of that year."


async def test_reasoning_is_neither_spoken_nor_part_of_the_reply(
    start_server: Any, proxy: RecordingProxy,
) -> None:
    """`reasoning_content` deltas and a `<think>` span in the content (its tags split across
    deltas): the transcript, the heard text and the next prompt hold only the answer."""
    proxy.script = [{"reasoning_content": "The user says hello."}, "<thi", "nk>Greet them",
                    " back.</th", "ink>\n\n", "Hello to you ", "too."]
    server = await scripted_server(start_server, proxy)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt("Hello.")
        assert (await play_all(client, response_id))["status"] == "completed"
        assert transcript(client, response_id) == "Hello to you too."
        assert (await client.heard(item_id, timeout=30))["text"] == "Hello to you too."
        proxy.script = ["Fine."]
        second_id, _ = await client.prompt("How are you?")
        await play_all(client, second_id)
    request = proxy.wait_requests(2)[1]
    assert {"role": "assistant", "content": "Hello to you too."} in request.body["messages"]
