"""Fault injection against a real server on loopback: nothing a client sends or does, and no
failing engine, kills a session, stalls another session or loses heard text.

- the TTS raises in the middle of a reply;
- the remote ASR (`--asr-url`) times out, answers 503 or answers garbage;
- a client aborts its TCP connection mid-sentence (no close frame) while Piper speaks (and
  the two waits that make its session end: a cancel is never lost, the voice is held until the
  engine returns);
- a client stops reading while the server streams a long reply;
- SIGTERM to a real `python -m server` process with open sessions.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from calibration.history_calibration import HistoryCalibration
from server.app import SHUTDOWN_GRACE_S, WEBSOCKET_WRITE_LIMIT_BYTES
from server.input_work import wait_through_cancellation
from server.sending import STALLED_CLIENT_CLOSE_CODE, wait_set
from server.speech.synthesizer import SpeechChunk, SpeechSynthesizer, StopSignal
from tests.realtime_client import RealtimeClient
from tests.server_process import server_process
from tests.transcription_endpoint import TranscriptionEndpoint

ABORTED_REPLY = (
    "Sure, I can help with that, because the train to the coast leaves at ten past nine from "
    "the old platform near the river and the trip takes a little under two hours today."
)
"""33 words: a first clause (the first TTS segment, about 1.7 s of Piper audio) and one long
sentence (the second segment: one Piper chunk of about 7 s, about 1 s of ONNX run when idle)."""
SHORT_REPLY = "Hello there."
VOICE_FREE_BOUND_S = 0.15
"""A cancel frees the voice within this (the issue's target: one synthesis chunk)."""
FIRST_AUDIO_SLACK_S = 0.5
"""The next session's first audio after an abort may exceed the slowest idle one by this much
(the abort used to cost 2.9-5.4 s: the rest of the dead session's sentence)."""


async def first_audio_s(url: str, text: str) -> float:
    """Seconds from `response.create` to the first audio delta of a `say:` reply in a new
    session (the session closes right after)."""
    async with RealtimeClient.connect(url) as client:
        started = time.perf_counter()
        response_id, _ = await client.prompt(f"say: {text}")
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == response_id)
        return time.perf_counter() - started


async def until(condition: Any, timeout: float, what: str) -> float:
    """Poll `condition()` every millisecond until it is true; returns perf_counter() then.

    Raises AssertionError naming `what` after `timeout` seconds."""
    deadline = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.001)
    return time.perf_counter()


async def play_fully(client: RealtimeClient, response_id: str) -> dict[str, Any]:
    """ACK the audio of a response as played as soon as it arrives; return its
    `response.done` (TimeoutError after 20 s without it)."""
    acked = 0
    deadline = time.perf_counter() + 20
    while time.perf_counter() < deadline:
        sent = max((e["audio_end_ms"] for e in client.of_type(
            "response.output_audio.delta", response_id=response_id)), default=0)
        if sent > acked:
            await client.ack(response_id, sent)
            acked = sent
        for event in client.of_type("response.done"):
            if event["response"]["id"] == response_id:
                return event
        await client.drain(0.02)
    raise TimeoutError(f"no response.done for {response_id}")


# ------------------------------------------------------------------------------- TTS failure


class FailingSynthesizer:
    """A real synthesizer whose `fail_at`-th `synthesize` call raises, once `release` is set."""

    def __init__(self, inner: SpeechSynthesizer, fail_at: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.sample_rate_hz = inner.sample_rate_hz
        self.fail_at = fail_at
        self.calls = 0
        self.release = threading.Event()

    def warm_up(self) -> None:
        self.inner.warm_up()

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        self.calls += 1
        if self.calls == self.fail_at:
            self.release.wait(10)
            raise RuntimeError("injected TTS failure")
        yield from self.inner.synthesize(text, stop)


async def test_tts_failure_mid_reply_fails_the_response_and_keeps_what_was_heard(
    start_server: Any,
) -> None:
    failing: list[FailingSynthesizer] = []

    def wrap(inner: SpeechSynthesizer) -> SpeechSynthesizer:
        failing.append(FailingSynthesizer(inner, fail_at=2))
        return failing[0]

    server = await start_server(tts="uniform", lead_ms=60_000, wrap_tts=wrap)
    first_sentence = "The first sentence is heard in full."
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt(
            f"say: {first_sentence} The second one never comes. Nor does the third.")
        await client.wait_audio_until(response_id, 7 * 400)
        await client.ack(response_id, 7 * 400)
        await client.retrieve(item_id)  # a round trip: the ACK is applied
        failing[0].release.set()

        error = await client.wait_for("error")
        assert error["error"]["type"] == "server_error"
        assert "RuntimeError" in error["error"]["message"]
        done = await client.wait_for("response.done", lambda e: e["response"]["id"] == response_id)
        assert done["response"]["status"] == "failed"
        assert "RuntimeError" in done["response"]["status_details"]["error"]["message"]
        heard = await client.heard(item_id, lambda e: e["text"] == first_sentence)
        assert heard["method"] == "marks"
        item = await client.retrieve(item_id)
        assert item["content"][0]["transcript"] == first_sentence

        next_id, _ = await client.prompt("say: Still here.")
        done = await play_fully(client, next_id)
        assert done["response"]["status"] == "completed"
        assert client.audio_bytes(next_id)
        turns = server.responder.prompts[-1].turns
        assert [(t.role, t.text, t.interrupted) for t in turns[-3:-1]] == [
            ("user", f"say: {first_sentence} The second one never comes. Nor does the third.",
             False),
            ("assistant", first_sentence, True),
        ]


# ------------------------------------------------------------------------------- remote ASR


@pytest.mark.parametrize("fault", ["timeout", "503", "garbage"])
async def test_failing_remote_asr_falls_back_to_ratio_and_keeps_history(
    start_server: Any, fault: str,
) -> None:
    with TranscriptionEndpoint() as endpoint:
        if fault == "timeout":
            endpoint.delay_s = 5.0
        elif fault == "503":
            endpoint.status = 503
        else:
            endpoint.body = "garbage"
        # The ASR attempt has its own 0.7 s budget (AUTO_ASR_TIMEOUT_S); the controller's
        # deadline around the whole policy is raised from 1 s so that a loaded CI machine
        # (one full-suite run stalled this loop past 1 s) cannot time out the ratio fallback.
        server = await start_server(tts="uniform-nomarks", calibration="auto",
                                    asr_url=endpoint.url, lead_ms=60_000,
                                    calibration_timeout_ms=3000)
        async with RealtimeClient.connect(server.ws_url) as client:
            first_id, first_item = await client.prompt("say: Good morning.")
            await play_fully(client, first_id)
            counting = "one two three four five six seven eight nine ten"
            response_id, item_id = await client.prompt(f"say: {counting}")
            # The whole reply synthesized (and sent: the lead is 60 s), so that ratio has its
            # complete duration: a reply cut while still being synthesized has none, and ratio
            # refuses it (the last audio delta can arrive before the server has seen the
            # synthesis end, so waiting for it raced: one CI run in four failed).
            await client.wait_for("response.output_audio.done",
                                  lambda e: e["response_id"] == response_id)
            await client.ack(response_id, 2000)
            await client.barge_in(response_id, 2000)
            heard = await client.heard(item_id, lambda e: e["method"] != "none", timeout=5)
            # ratio errs short: a word counts when it ended a margin before the cut
            # (calibration.spoken_time), so the fifth word, which ends exactly at 2000 ms, is
            # not claimed.
            assert (heard["method"], heard["text"]) == ("ratio", "one two three four")
            assert endpoint.requests, "the ASR was asked first"

            first = await client.retrieve(first_item)
            second = await client.retrieve(item_id)
            assert first["content"][0]["transcript"] == "Good morning."
            assert second["content"][0]["transcript"] == "one two three four"

            next_id, _ = await client.prompt("say: Shall I go on?")
            done = await play_fully(client, next_id)
            assert done["response"]["status"] == "completed"
            turns = server.responder.prompts[-1].turns
            assert [(t.role, t.text) for t in turns[:4]] == [
                ("user", "say: Good morning."), ("assistant", "Good morning."),
                ("user", f"say: {counting}"), ("assistant", "one two three four"),
            ]


# ------------------------------------------------------------------------------- client abort


class WatchedSynthesizer:
    """A real synthesizer that records when each `synthesize` call starts and ends (the end is
    when the engine is free again: Piper releases its lock before its generator returns)."""

    def __init__(self, inner: SpeechSynthesizer) -> None:
        self.inner = inner
        self.name = inner.name
        self.sample_rate_hz = inner.sample_rate_hz
        self.calls: list[list[float | None]] = []

    def warm_up(self) -> None:
        self.inner.warm_up()

    def running(self) -> int:
        """Calls started and not ended."""
        return sum(end is None for _, end in self.calls)

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        call: list[float | None] = [time.perf_counter(), None]
        self.calls.append(call)
        try:
            yield from self.inner.synthesize(text, stop)
        finally:
            call[1] = time.perf_counter()


async def test_client_abort_mid_sentence_frees_the_voice_and_ends_the_session(
    start_server: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    calibrations: list[HistoryCalibration] = []
    original_init = HistoryCalibration.__init__

    def recording_init(self: HistoryCalibration, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        calibrations.append(self)

    monkeypatch.setattr(HistoryCalibration, "__init__", recording_init)
    watched: list[WatchedSynthesizer] = []

    def wrap(inner: SpeechSynthesizer) -> SpeechSynthesizer:
        watched.append(WatchedSynthesizer(inner))
        return watched[0]

    server = await start_server(tts="piper", wrap_tts=wrap)
    voice = watched[0]
    idle = [await first_audio_s(server.ws_url, SHORT_REPLY) for _ in range(3)]

    before = asyncio.all_tasks()
    known = len(calibrations)
    async with RealtimeClient.connect(server.ws_url) as doomed:
        (calibration,) = calibrations[known:]
        calls = len(voice.calls)
        response_id, _ = await doomed.prompt(f"say: {ABORTED_REPLY}")
        for _ in range(2):
            await doomed.wait_for("response.output_audio.delta",
                                  lambda e: e["response_id"] == response_id)
        await until(lambda: len(voice.calls) == calls + 2 and voice.running(), 5,
                    "the second segment's synthesis runs")
        await asyncio.sleep(0.1)  # inside its sentence's ONNX run (about 1 s long)
        assert voice.running() == 1
        aborted = time.perf_counter()
        doomed.websocket.transport.abort()

    turn_free = await until(lambda: not server.demo.services.tts_turn.locked(), 5,
                            "the TTS turn is free")
    await until(lambda: not voice.running(), 5, "the voice is free")
    voice_free = max(end for _, end in voice.calls if end is not None)
    assert voice_free - aborted < VOICE_FREE_BOUND_S
    assert turn_free - aborted < VOICE_FREE_BOUND_S + 0.05
    current = asyncio.current_task()
    await until(lambda: not asyncio.all_tasks() - before - {current}, 2,
                "every task of the aborted connection ends")
    assert calibration.closed and not calibration.tasks and not calibration.audio

    after = await first_audio_s(server.ws_url, SHORT_REPLY)
    assert after < max(idle) + FIRST_AUDIO_SLACK_S, (idle, after)


async def test_a_cancel_that_comes_with_a_wake_up_still_ends_the_send_loop() -> None:
    """The send loop waits with `wait_set`: a wake-up in the loop iteration that cancels the
    loop (a chunk queued as the client aborts) must not swallow the cancel, as
    `asyncio.wait_for` does on Python 3.11 (the closed session's sender then waited forever)."""
    wake = asyncio.Event()

    async def send_loop() -> None:
        while True:
            wake.clear()
            await wait_set(wake, 5.0)

    task = asyncio.create_task(send_loop())
    await asyncio.sleep(0.01)
    wake.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1.0)
    assert task in done and task.cancelled()
    started = time.perf_counter()
    await wait_set(asyncio.Event(), 0.05)
    assert 0.04 < time.perf_counter() - started < 1.0


async def test_a_test_client_reading_in_a_loop_ends_when_cancelled_as_a_frame_arrives() -> None:
    """`RealtimeClient.drain` in a loop (how `tests.echo_room.RoomPage` reads) ends when
    cancelled in the loop iteration a frame arrives. Reading under `asyncio.wait_for`, the
    reader took the frame, dropped the cancellation and read on, and the test awaiting it hung
    until pytest's timeout (CI, `test_hold_on_a_second_over_the_echo_is_heard_word_for_word`)."""
    frames: asyncio.Queue[str] = asyncio.Queue()

    class QueueSocket:
        async def recv(self) -> str:
            return await frames.get()

    client = RealtimeClient(QueueSocket())  # type: ignore[arg-type]

    async def reader() -> None:
        while True:
            await client.drain(0.05)

    task = asyncio.create_task(reader())
    await asyncio.sleep(0.01)
    frames.put_nowait('{"type": "session.updated"}')
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1.0)
    assert task in done and task.cancelled()


async def test_a_cancelled_speaker_keeps_the_voice_until_its_worker_returns() -> None:
    """`wait_through_cancellation` (how `Speaker.speak` holds the TTS turn): cancels, even repeated,
    wait for the worker thread, then propagate."""
    release = threading.Event()
    worker = asyncio.get_running_loop().run_in_executor(None, release.wait, 5.0)

    async def speaker() -> None:
        await wait_through_cancellation(worker)

    task = asyncio.create_task(speaker())
    await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert worker.done()


# ------------------------------------------------------------------------------- stalled reader


async def small_window_socket(host: str, port: int) -> socket.socket:
    """A TCP socket connected to host:port with a 4 KiB receive buffer (set before the
    handshake, so the window stays small): a client on it that stops reading stops the
    server's data within a few KiB."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, port))
    return sock


async def prompt_without_reading(client: RealtimeClient, text: str) -> None:
    """Send a typed prompt and `response.create`, reading nothing."""
    await client.send({"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
    await client.send({"type": "response.create"})


def server_connection(server: Any) -> ServerConnection:
    """The server side of the only open WebSocket connection."""
    (connection,) = server.demo.server.connections
    return connection


async def test_client_that_stops_reading_is_closed_and_stalls_nobody(start_server: Any) -> None:
    send_timeout_s = 3.0
    server = await start_server(tts="uniform", lead_ms=60_000,
                                send_timeout_ms=int(send_timeout_s * 1000))
    sock = await small_window_socket("127.0.0.1", server.demo.port())
    before = asyncio.all_tasks()
    async with RealtimeClient.connect(server.ws_url, sock=sock, max_queue=1) as stalled:
        stalled_side = server_connection(server)
        await prompt_without_reading(stalled, "tell me about tides")
        stalled_at = await until(
            lambda: stalled_side.transport.get_write_buffer_size() > WEBSOCKET_WRITE_LIMIT_BYTES,
            10, "the server's send buffer fills")

        async with RealtimeClient.connect(server.ws_url) as other:
            started = time.perf_counter()
            other_id, _ = await other.prompt("say: I am not stalled by anyone.")
            await other.wait_for("response.output_audio.delta",
                                 lambda e: e["response_id"] == other_id)
            assert time.perf_counter() - started < 1.0
            done = await play_fully(other, other_id)
            assert done["response"]["status"] == "completed"
        assert stalled_side.state is State.OPEN, "the second reply came while the first stalled"
        assert stalled_side.transport.get_write_buffer_size() < 2 * WEBSOCKET_WRITE_LIMIT_BYTES

        closing_at = await until(lambda: stalled_side.protocol.close_sent is not None,
                                 send_timeout_s + 2, "the server closes the stalled client")
        assert closing_at - stalled_at >= send_timeout_s - 0.1
        assert stalled_side.protocol.close_sent.code == STALLED_CLIENT_CLOSE_CODE
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await stalled.websocket.recv()
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == STALLED_CLIENT_CLOSE_CODE
    current = asyncio.current_task()
    await until(lambda: not asyncio.all_tasks() - before - {current}, 5,
                "every task of the stalled session ends")


# ------------------------------------------------------------------------------- SIGTERM


async def test_sigterm_closes_every_session_with_1001_and_exits_cleanly() -> None:
    async with server_process("--tts", "piper", "--calibration", "marks", "--deterministic",
                              "--lead-ms", "60000") as server:
        url = server.ws_url
        sock = await small_window_socket("127.0.0.1", server.port)
        async with (RealtimeClient.connect(url) as speaking,
                    RealtimeClient.connect(url) as idle,
                    RealtimeClient.connect(url) as played,
                    RealtimeClient.connect(url, sock=sock, max_queue=1) as stalled):
            await prompt_without_reading(stalled, "tell me about tides")
            played_id, _ = await played.prompt("say: Done already.")
            await play_fully(played, played_id)
            response_id, _ = await speaking.prompt(f"say: {ABORTED_REPLY}")
            await speaking.wait_audio_until(response_id, 2000)
            await asyncio.sleep(0.2)  # Piper is inside the long sentence
            signalled = time.perf_counter()
            server.process.send_signal(signal.SIGTERM)

            async def closed_code(client: RealtimeClient) -> int | None:
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        await client.websocket.recv()
                assert closed.value.rcvd is not None
                return closed.value.rcvd.code

            async with asyncio.timeout(2):
                codes = await asyncio.gather(*(closed_code(c) for c in (speaking, idle, played)))
            assert time.perf_counter() - signalled < 2.0
            assert codes == [1001, 1001, 1001]
            await server.exited_cleanly(SHUTDOWN_GRACE_S + 2)
