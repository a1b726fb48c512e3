"""One session never slows another (issue 26, failing input 1): the input path runs on the
input workers in fair turns (`server.input_work`), and each session's input audio is bounded
(`server.realtime.input_budget`): beyond it the session is throttled, and closed with 1008 when
it keeps on.

The flooding test runs a real server process (`python -m server`): the flooding client and the
measuring one run in this process, so the server's event loop carries only the server's work.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import threading
import time
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from server import input_work
from server.input_work import InputLane
from server.realtime.input_budget import InputAudioBudget
from server.reply_echo import ReplyEcho
from tests.realtime_client import RealtimeClient
from tests.server_process import server_process
from tests.test_reply_echo import RATE_HZ, all_levels, eager_levels, reply_chunks

INPUT_RATE_HZ = 24_000
SERVER_VAD = {"type": "server_vad", "create_response": False}
FLOOD_APPEND_S = 16
"""The failing input's appends: 16 s of noise each (about the largest text frame, 1 MiB)."""


def noise_pcm16(seconds: float, seed: int = 0) -> bytes:
    """White noise at about -21 dBFS RMS, PCM16 LE at the input rate (server VAD hears no
    speech in it, so it costs only the input path)."""
    rng = np.random.default_rng(seed)
    samples = rng.standard_normal(int(INPUT_RATE_HZ * seconds)) * 3000
    return samples.clip(-32767, 32767).astype("<i2").tobytes()


def append_frame(pcm16: bytes) -> str:
    return json.dumps({"type": "input_audio_buffer.append",
                       "audio": base64.b64encode(pcm16).decode()})


# ------------------------------------------------------------------------- the bound itself


def test_budget_lets_a_burst_through_then_the_speed() -> None:
    budget = InputAudioBudget(speed=2.0, window_ms=5000.0)
    assert budget.spend(0.0, 10_000) == 0.0  # the whole window's worth at once
    assert budget.spend(0.0, 1000) == pytest.approx(500.0)  # 1 s more: 0.5 s at 2x
    assert budget.spend(500.0, 1000) == pytest.approx(500.0)
    assert budget.spend(2000.0, 100) == 0.0  # 1.5 s later: 3 s of credit came back


def test_budget_takes_an_append_larger_than_the_window_and_waits_for_it() -> None:
    budget = InputAudioBudget(speed=2.0, window_ms=5000.0)
    assert budget.spend(0.0, 16_000) == pytest.approx(3000.0)
    assert budget.spend(60_000.0, 0) == 0.0  # credit is capped at the window's worth
    assert budget.spend(60_000.0, 10_001) == pytest.approx(0.5)


def test_budget_refuses_a_bound_of_nothing() -> None:
    with pytest.raises(ValueError):
        InputAudioBudget(speed=0.0, window_ms=5000.0)


# ------------------------------------------------------------------------- the input lanes


async def test_a_lane_with_one_job_waits_for_one_job_of_a_busy_lane_at_most() -> None:
    """Round robin: a lane with 20 jobs queued first, another asking for one: the single job
    runs after at most one more job of the busy lane (each job holds the worker 10 ms)."""
    order: list[str] = []

    def job(name: str) -> str:
        time.sleep(0.01)
        order.append(name)
        return name

    busy, quiet = InputLane(), InputLane()
    flood = [asyncio.create_task(busy.run(job, f"busy{i}")) for i in range(20)]
    await asyncio.sleep(0.015)
    assert await quiet.run(job, "quiet") == "quiet"
    await asyncio.gather(*flood)
    assert order.index("quiet") <= order.index("busy0") + 3
    assert [name for name in order if name != "quiet"] == [f"busy{i}" for i in range(20)]


async def test_a_cancelled_caller_leaves_the_lane_after_its_job() -> None:
    """The next job of a lane never overlaps one whose caller was cancelled."""
    running = threading.Lock()
    overlaps: list[str] = []

    def job(seconds: float) -> None:
        if not running.acquire(blocking=False):
            overlaps.append("overlap")
            return
        time.sleep(seconds)
        running.release()

    lane = InputLane()
    first = asyncio.create_task(lane.run(job, 0.1))
    await asyncio.sleep(0.02)
    first.cancel()
    await lane.run(job, 0.0)
    assert first.cancelled() and not overlaps


def test_reply_echo_asked_on_a_worker_while_the_loop_adds_chunks() -> None:
    """`ReplyEcho.reference` on an input worker while the loop goes on adding chunks (each
    piece eager only when `eager` says so as it starts): every chunk is in the reference, in
    reply order, level for level the eager reference."""
    chunks = reply_chunks() * 3
    for asked_after in range(1, len(chunks)):
        echo = ReplyEcho("resp_a", RATE_HZ, eager=False)
        for chunk in chunks[:asked_after]:
            echo.add(chunk, None)
        worker = threading.Thread(target=echo.reference)
        worker.start()
        for chunk in chunks[asked_after:]:
            echo.add(chunk, echo.envelope(chunk) if echo.eager else None)
        worker.join()
        np.testing.assert_array_equal(all_levels(echo), eager_levels(chunks))


# ------------------------------------------------------------------------- a real server


async def _flood(url: str, stop: asyncio.Event, sent: list[int]) -> None:
    """Turn on server VAD and append 16 s of noise per append as fast as the socket takes."""
    frame = append_frame(noise_pcm16(FLOOD_APPEND_S))
    async with connect(url, max_size=None) as websocket:
        await websocket.recv()
        await websocket.send(json.dumps({"type": "session.update", "session": {
            "audio": {"input": {"turn_detection": SERVER_VAD}}}}))
        reader = asyncio.create_task(_discard(websocket))
        try:
            while not stop.is_set():
                await websocket.send(frame)
                sent[0] += 1
        finally:
            reader.cancel()


async def _discard(websocket: Any) -> None:
    async for _ in websocket:
        pass


async def _first_audio_ms(client: RealtimeClient, prompt: str) -> float:
    """ms from the prompt to the reply's first audio delta; the reply is cancelled."""
    started = time.perf_counter()
    response_id, _ = await client.prompt(prompt)
    await client.wait_for("response.output_audio.delta", timeout=30,
                          predicate=lambda e: e["response_id"] == response_id)
    elapsed_ms = (time.perf_counter() - started) * 1000
    await client.send({"type": "response.cancel"})
    await client.wait_for("response.done", timeout=30,
                          predicate=lambda e: e["response"]["id"] == response_id)
    return elapsed_ms


async def test_a_session_flooding_server_vad_with_noise_leaves_another_its_first_audio() -> None:
    """The failing input: session A turns on server VAD and appends 16 s of noise per append
    as fast as it likes; session B's first audio (uniform voice) took 2.4-2.8 s instead of
    4 ms while the input path ran on the event loop. Now A is throttled to twice real time
    and its VAD runs on the input worker: B's first audio stays far below that."""
    async with server_process("--tts", "uniform", "--calibration", "marks",
                              "--log-level", "warning") as served:
        stop, sent = asyncio.Event(), [0]
        flood = asyncio.create_task(_flood(served.ws_url, stop, sent))
        try:
            await asyncio.sleep(2.0)
            async with RealtimeClient.connect(served.ws_url) as client:
                samples = [await _first_audio_ms(client, "say: The tide comes in twice a day.")
                           for _ in range(4)]
        finally:
            stop.set()
            await asyncio.gather(flood, return_exceptions=True)
    assert sent[0] >= 2, "the flood did not start"
    assert max(samples) < 1000, samples


async def test_audio_beyond_the_bound_holds_the_next_event_back(start_server) -> None:
    """16 s in one append with the default bound (twice real time, 5 s window: 10 s of credit):
    the append is taken whole, and the commit behind it waits for the other 6 s at twice real
    time, about 3 s."""
    server = await start_server(tts="uniform")
    async with RealtimeClient.connect(server.ws_url) as client:
        started = time.perf_counter()
        await client.send_raw(append_frame(noise_pcm16(FLOOD_APPEND_S)))
        await client.send({"type": "input_audio_buffer.commit"})
        committed = await client.wait_for("input_audio_buffer.committed", timeout=30)
        waited_s = time.perf_counter() - started
        assert committed["item_id"]
        assert waited_s >= 2.9, waited_s
        assert not client.of_type("error")


async def test_a_client_that_keeps_sending_too_fast_is_closed_with_1008(
        start_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Throttled without a break for THROTTLED_CLOSE_S (here 1 s): close 1008 with a reason,
    not a keepalive timeout blamed on the server."""
    monkeypatch.setattr(input_work, "THROTTLED_CLOSE_S", 1.0)
    server = await start_server(tts="uniform", max_input_speed=1.0, input_window_s=0.5)
    frame = append_frame(noise_pcm16(0.5))
    async with connect(server.ws_url, max_size=None) as websocket:
        await websocket.recv()
        with pytest.raises(ConnectionClosed) as closed:
            async with asyncio.timeout(30):
                while True:
                    await websocket.send(frame)
                    await asyncio.sleep(0)
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 1008
        assert "input audio" in closed.value.rcvd.reason


# ------------------------------------------------------------------------- OS priority


def _spin(seconds: float, cpu: int) -> float:
    """On one core `cpu`: hash (hashlib releases the GIL for large buffers: the kernel, not the
    GIL, decides who runs) for `seconds` of wall time; returns this thread's CPU time (s)."""
    os.sched_setaffinity(threading.get_native_id(), {cpu})
    block = bytes(1 << 20)
    started, cpu_started = time.perf_counter(), time.thread_time()
    while time.perf_counter() - started < seconds:
        hashlib.sha256(block).digest()
    return time.thread_time() - cpu_started


async def test_input_work_yields_the_core_to_foreground_work() -> None:
    """The input workers run at `INPUT_NICE` below the process (Linux's per-thread nice): on
    one core shared with a foreground thread (synthesis, transcription, the event loop), both
    busy, the foreground thread gets most of the core (weights 1024 : 110 at nice 0 : 10,
    whatever other processes run there too), and the event loop's own thread is not niced."""
    loop_thread = threading.get_native_id()
    base = os.getpriority(os.PRIO_PROCESS, loop_thread)
    nice = await InputLane().run(lambda: os.getpriority(os.PRIO_PROCESS,
                                                        threading.get_native_id()))
    assert nice == min(19, base + input_work.INPUT_NICE)
    assert os.getpriority(os.PRIO_PROCESS, loop_thread) == base
    cpu = min(os.sched_getaffinity(0))
    foreground = asyncio.create_task(asyncio.to_thread(_spin, 2.0, cpu))
    background = await InputLane().run(_spin, 2.0, cpu)
    assert await foreground > 3 * background, (await foreground, background)


async def test_a_paused_session_s_input_work_runs_at_the_process_s_priority() -> None:
    """A session whose reply is paused judges the quiet that resumes it on its input lane:
    foreground work, run on the paused sessions' worker at the process's own nice value (at
    `INPUT_NICE` it starved behind other processes: server VAD's lag up to 1 s at load 12-18),
    in the lane's order with its other jobs; the other sessions' stay at `INPUT_NICE`."""
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    lane = InputLane()

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    niced, paused, again = await asyncio.gather(
        lane.run(nice), lane.run(nice, paused=True), lane.run(nice))
    assert (niced, paused, again) == (min(19, base + input_work.INPUT_NICE), base,
                                      min(19, base + input_work.INPUT_NICE))
