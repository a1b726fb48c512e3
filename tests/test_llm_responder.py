"""The LLM responder against a real local model: SmolLM2-135M-Instruct on llama-cpp-python's
OpenAI-compatible server (`tests/llm_server.py`), reached through a recording proxy
(`tests/llm_proxy.py`) that keeps the messages the model received, the moments the model's
stream started and ended, and when the demo closed it.

Nothing here asserts what the model says: only that its reply streams into speech, what it was
sent, that a barge-in / cancel / disconnect closes its stream, and how faults end a response.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from server.config import parse_config
from server.realtime.session import DEFAULT_INSTRUCTIONS
from server.responders.prompt import DEFAULT_INTERRUPTION_NOTE, DEFAULT_UNHEARD_NOTE
from tests.llm_proxy import ERROR_MESSAGE, REFUSAL, ChatRequest, RecordingProxy
from tests.llm_server import MODEL_NAME, LocalLLMServer
from tests.realtime_client import RealtimeClient
from tests.server_process import server_process

STORY = "Write a long story about a dragon who learns to fly. Use many sentences."
INSTRUCTIONS = "You are a storyteller. Answer in plain English sentences."
LLM_TIMEOUT_S = 60.0
"""The responder's timeout in the tests that do not test it: a busy CI machine is slow."""
CLOSE_TIMEOUT_S = 60.0
"""The test client's WebSocket close timeout (s): longer than any wait for the LLM stream to
close, so a stream that closes only with the TCP connection is seen as such."""
STALL_TIMEOUT_S = 20.0
"""The timeout of the test with a stalled server (s): longer than the local model takes to
start a reply on a busy machine (measured under load 15 on 2 cores: over 8 s for a 100-token
prompt), so the replies around the stall complete."""


@pytest.fixture(scope="session")
def local_llm() -> Iterator[LocalLLMServer]:
    """One llama_cpp.server with SmolLM2 for the whole test run."""
    with LocalLLMServer() as server:
        yield server


@pytest.fixture
def proxy(local_llm: LocalLLMServer) -> Iterator[RecordingProxy]:
    with RecordingProxy(local_llm.origin) as recording:
        yield recording


async def llm_server(start_server: Any, url: str, **overrides: Any) -> Any:
    settings: dict[str, Any] = {"tts": "uniform", "calibration": "marks", "lead_ms": 60_000,
                                "llm_model": MODEL_NAME, "llm_temperature": 0.0,
                                "llm_max_tokens": 40, "llm_timeout_s": LLM_TIMEOUT_S}
    return await start_server(llm_url=url, **{**settings, **overrides})


async def set_instructions(client: RealtimeClient, instructions: str) -> None:
    await client.send({"type": "session.update",
                       "session": {"type": "realtime", "instructions": instructions}})
    await client.wait_for("session.updated")


async def done(client: RealtimeClient, response_id: str, timeout: float = 120.0) -> dict:
    event = await client.wait_for("response.done",
                                  lambda e: e["response"]["id"] == response_id, timeout)
    return event["response"]


def transcript(client: RealtimeClient, response_id: str) -> str:
    """The reply's text as its transcript deltas streamed it."""
    return "".join(e["delta"] for e in client.of_type(
        "response.output_audio_transcript.delta", response_id=response_id))


async def recorded(proxy: RecordingProxy, count: int) -> list[ChatRequest]:
    """The proxy's first `count` requests once they ended (waited for off the event loop,
    which the demo server shares)."""
    return await asyncio.to_thread(proxy.wait_requests, count)


# ----------------------------------------------------------------------------- streaming


async def test_tokens_stream_into_speech_before_the_model_finished(
    start_server: Any, proxy: RecordingProxy,
) -> None:
    """Real Piper voice: the first audio leaves the demo while the model is still writing;
    the model got exactly the instructions and the user turn, with the configured sampling."""
    server = await llm_server(start_server, proxy.url, tts="piper", llm_max_tokens=60)
    async with RealtimeClient.connect(server.ws_url) as client:
        await set_instructions(client, INSTRUCTIONS)
        response_id, _ = await client.prompt(STORY)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == response_id, timeout=120)
        first_audio_s = time.monotonic()
        response = await done(client, response_id)
    assert response["status"] == "completed"
    [request] = await recorded(proxy, 1)
    assert request.upstream_done_s is not None
    assert first_audio_s < request.upstream_done_s, "first audio only after the model finished"
    assert request.body["messages"] == [{"role": "system", "content": INSTRUCTIONS},
                                        {"role": "user", "content": STORY}]
    assert (request.body["model"], request.body["stream"], request.body["max_tokens"],
            request.body["temperature"]) == (MODEL_NAME, True, 60, 0.0)
    deltas = client.of_type("response.output_audio_transcript.delta", response_id=response_id)
    assert len(deltas) > 1


async def test_the_model_receives_the_heard_prefix_and_the_note_after_an_interruption(
    start_server: Any, proxy: RecordingProxy,
) -> None:
    """A reply cut at 800 ms reaches the model as exactly its heard text plus the note; one
    cut before its first word as an empty turn plus the unheard note."""
    server = await llm_server(start_server, proxy.url)
    async with RealtimeClient.connect(server.ws_url) as client:
        first_id, first_item = await client.prompt(STORY)
        await client.wait_audio_until(first_id, 0, timeout=120)
        await client.ack(first_id, 0)  # a client that reports playback: cuts go by its ACKs
        await client.wait_audio_until(first_id, 1500, timeout=120)
        await client.ack(first_id, 800)
        await client.barge_in(first_id, 800)
        heard = await client.heard(first_item, lambda e: e["method"] == "marks", timeout=60)
        assert heard["text"] and heard["full_text"].startswith(heard["text"])
        assert heard["text"] != heard["full_text"].rstrip()

        second_id, second_item = await client.prompt("Why did you stop?")
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == second_id, timeout=120)
        await client.ack(second_id, 0)
        await client.barge_in(second_id, 0)
        unheard = await client.heard(second_item, lambda e: e["interrupted"], timeout=60)
        assert unheard["text"] == ""

        third_id, _ = await client.prompt("Go on.")
        await done(client, third_id)
    requests = await recorded(proxy, 3)
    system = {"role": "system", "content": DEFAULT_INSTRUCTIONS}
    note = DEFAULT_INTERRUPTION_NOTE.replace("{heard}", heard["text"])
    assert requests[1].body["messages"] == [
        system,
        {"role": "user", "content": STORY},
        {"role": "assistant", "content": heard["text"]},
        {"role": "system", "content": note},
        {"role": "user", "content": "Why did you stop?"},
    ]
    assert requests[2].body["messages"] == [
        *requests[1].body["messages"],
        {"role": "assistant", "content": ""},
        {"role": "system", "content": DEFAULT_UNHEARD_NOTE},
        {"role": "user", "content": "Go on."},
    ]


# ----------------------------------------------------------------------------- closing the stream


@pytest.mark.parametrize("stop", ["barge_in", "response.cancel", "disconnect"])
async def test_stopping_a_reply_closes_the_llm_stream_while_the_model_writes(
    start_server: Any, proxy: RecordingProxy, stop: str,
) -> None:
    """The demo closes its HTTP stream to the model (the proxy sees the connection close
    before the model finished: it may write 400 tokens) on a barge-in, a cancel and when the
    client closes its WebSocket mid-reply; the model's server is disconnected in turn.

    The disconnecting client has stopped reading (its receive queue holds one frame), so the
    closing handshake cannot complete: the stream must close at the client's close frame,
    while the server's side of the WebSocket is still closing, not when websockets' close
    timeout (10 s) ends the TCP connection (a model faster than that had written its whole
    reply first)."""
    server = await llm_server(start_server, proxy.url, llm_max_tokens=400)
    async with RealtimeClient.connect(server.ws_url, max_queue=1,
                                      close_timeout=CLOSE_TIMEOUT_S) as client:
        response_id, _ = await client.prompt(STORY)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == response_id, timeout=120)
        if stop == "barge_in":
            await client.barge_in(response_id, 200)
            assert (await done(client, response_id))["status"] == "cancelled"
        elif stop == "response.cancel":
            await client.send({"type": "response.cancel", "response_id": response_id})
            assert (await done(client, response_id))["status"] == "cancelled"
        else:
            [server_side] = server.demo.server.connections
            closing = asyncio.ensure_future(client.websocket.close())
            await recorded(proxy, 1)
            assert server_side.state is State.CLOSING, (
                "the LLM stream closed only with the TCP connection")
            client.websocket.transport.abort()
            await closing
    [request] = await recorded(proxy, 1)
    assert request.client_closed_s is not None, "the LLM stream was not closed"
    assert request.upstream_done_s is None, "the model finished before the stream was closed"


async def test_sigterm_closes_the_llm_stream_of_an_open_session(
    proxy: RecordingProxy,
) -> None:
    """SIGTERM to a real `python -m server` while the model writes a reply: the session is
    closed with 1001, the demo closes its stream to the model before the model finished, and
    the process exits cleanly."""
    async with server_process(
            "--tts", "uniform", "--calibration", "marks", "--deterministic", "--llm-url",
            proxy.url, "--llm-model", MODEL_NAME, "--llm-max-tokens", "400",
            "--llm-temperature", "0") as server:
        async with RealtimeClient.connect(server.ws_url) as client:
            response_id, _ = await client.prompt(STORY)
            await client.wait_for("response.output_audio.delta",
                                  lambda e: e["response_id"] == response_id, timeout=120)
            server.process.send_signal(signal.SIGTERM)
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await client.websocket.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        await server.exited_cleanly(30)
    [request] = await recorded(proxy, 1)
    assert request.client_closed_s is not None, "the LLM stream was not closed"
    assert request.upstream_done_s is None, "the model finished before the stream was closed"


# ----------------------------------------------------------------------------- faults


@pytest.mark.parametrize("fault", ["status", "stall", "refusal", "refused", "garbage", "cut"])
async def test_an_llm_fault_fails_the_response_and_the_session_goes_on(
    start_server: Any, local_llm: LocalLLMServer, fault: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """HTTP 500, no answer within the timeout (the demo then hangs up), a refusal, connection
    refused, a stream event that is not JSON, a stream cut off mid-reply: the reply ends with
    `response.done` status failed and an `error` event saying why, and nothing is logged at
    ERROR; the history before it stays, the failed reply adds nothing to the prompt (not even
    the words the cut stream wrote, none of them heard: no empty turn, no interruption note),
    and the next prompt is answered once the server is back."""
    proxy = RecordingProxy(local_llm.origin).__enter__()
    try:
        server = await llm_server(start_server, proxy.url, llm_max_tokens=12,
                                  llm_timeout_s=STALL_TIMEOUT_S if fault == "stall"
                                  else LLM_TIMEOUT_S)
        async with RealtimeClient.connect(server.ws_url) as client:
            first_id, _ = await client.prompt("Say hello.")
            await client.wait_audio_until(first_id, 0, timeout=120)
            await client.ack(first_id, 0)
            first = await done(client, first_id)
            assert first["status"] == "completed"
            played = max(e["audio_end_ms"] for e in client.of_type(
                "response.output_audio.delta", response_id=first_id))
            await client.ack(first_id, played)  # all of it was heard
            await client.drain(0.3)

            if fault == "refused":
                port = proxy.port
                proxy.__exit__()
            else:
                proxy.mode = fault  # type: ignore[assignment]
            failed_id, _ = await client.prompt("Tell me more.")
            failed = await done(client, failed_id, timeout=60)
            error = await client.wait_for("error")
            expected = {"status": f"HTTP 500: {ERROR_MESSAGE}",
                        "stall": f"did not answer within {STALL_TIMEOUT_S:g} s",
                        "refusal": f"refused to answer: {REFUSAL}",
                        "refused": "no answer from the LLM server at",
                        "garbage": "sent a stream event that is not JSON",
                        "cut": "ended before the reply was finished"}[fault]
            assert failed["status"] == "failed"
            assert expected in failed["status_details"]["error"]["message"]
            assert expected in error["error"]["message"]
            assert error["error"]["code"] == "generation_failed"
            if fault == "stall":
                assert (await recorded(proxy, 2))[1].client_closed_s is not None, "never hung up"

            if fault == "refused":
                proxy = RecordingProxy(local_llm.origin, port=port).__enter__()
            proxy.mode = "forward"
            third_id, _ = await client.prompt("Say goodbye.")
            assert (await done(client, third_id))["status"] == "completed"
        [*_, last] = proxy.wait_requests(1 if fault == "refused" else 3)
        assert last.body["messages"][1:] == [
            {"role": "user", "content": "Say hello."},
            {"role": "assistant", "content": transcript(client, first_id)},
            {"role": "user", "content": "Tell me more."},
            {"role": "user", "content": "Say goodbye."},
        ]
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    finally:
        proxy.__exit__()


# ----------------------------------------------------------------------------- configuration


def test_the_llm_key_comes_from_the_environment_only_and_is_never_shown() -> None:
    key = "sk-test-0123456789"
    config = parse_config(["--llm-url", "http://127.0.0.1:1/v1", "--llm-model", "m"],
                          {"DUPLEX_LLM_API_KEY": key})
    assert config.llm_api_key == key
    assert key not in repr(config)
    assert parse_config([], {"OPENAI_API_KEY": key}).llm_api_key == key
    with pytest.raises(SystemExit):
        parse_config(["--llm-api-key", key], {})
    with pytest.raises(SystemExit):
        parse_config(["--llm-url", "http://127.0.0.1:1/v1"], {})


def test_the_demo_responder_stays_the_default() -> None:
    config = parse_config([], {})
    assert config.llm_url is None
    assert (config.llm_max_tokens, config.llm_temperature, config.llm_timeout_s) == (
        512, 0.7, 30.0)
