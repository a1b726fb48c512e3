"""Logs: free of the conversation's text and audio at every level, and `--log-format json`.

A real server with the Piper voice and server VAD holds a conversation with a spoken
interruption (real Silero VAD, faster-whisper transcription, marks calibration) while the
root logger records everything at `debug` as JSON lines; no line may hold a prompt, a reply, a
transcript or base64 audio. The CLI test starts `duplex-demo` itself
with `--log-format json`.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.logs import PROJECT_LOGGERS, configure_logging
from tests import speech_fixtures
from tests.realtime_client import RealtimeClient
from tests.test_metrics import scrape, value
from tests.test_server_vad import SERVER_VAD, SimulatedPage, mic_pcm16, receive_while, stream_mic

ROOT = Path(__file__).resolve().parent.parent
BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")
"""40 or more base64 characters in a row: a piece of encoded audio (ids hold 20 hex digits)."""
JSON_KEYS = {"time", "level", "logger", "message"}


@pytest.fixture
def json_debug_log() -> Iterator[io.StringIO]:
    """Everything logged during the test, as `configure_logging("debug", "json")` writes it."""
    loggers = [logging.getLogger(name) for name in ("", *PROJECT_LOGGERS)]
    levels = [logger.level for logger in loggers]
    stream = io.StringIO()
    handler = configure_logging("debug", "json", stream)
    try:
        yield stream
    finally:
        loggers[0].removeHandler(handler)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def word_windows(text: str, size: int = 4) -> set[str]:
    """Every run of `size` consecutive words of `text` (lower case), or the whole text when
    it is shorter."""
    words = text.lower().split()
    return {" ".join(words[i:i + size]) for i in range(max(1, len(words) - size + 1))}


async def test_logs_hold_no_text_or_audio_and_name_their_session(start_server,
                                                                  json_debug_log) -> None:
    server = await start_server(tts="piper", calibration="marks", lead_ms=400)
    prompt = "Tell me about the history of radio."
    utterance = speech_fixtures.speech("What time does the museum open tomorrow?")
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=1500, tail_ms=1500))
    async with RealtimeClient.connect(server.ws_url) as client:
        session_id = client.events[0]["session"]["id"]
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        response_id, item_id = await client.prompt(prompt)
        await client.wait_for("response.output_audio.delta")
        page = SimulatedPage(client, response_id)
        playing = asyncio.create_task(page.run())
        await receive_while(client, asyncio.create_task(stream_mic(client, mic)))
        transcript = await client.wait_for(
            "conversation.item.input_audio_transcription.completed", timeout=60)
        heard = await client.heard(item_id, lambda e: e["elapsed_ms"] is not None)
        await playing
        answer = await client.wait_for("response.created",
                                       lambda e: e["response"]["id"] != response_id)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == answer["response"]["id"])
        scraped = await scrape(server)
    assert value(scraped, "duplex_barge_ins_total", source="server_vad") == 1
    replies = "".join(e["delta"] for e in client.of_type("response.output_audio_transcript.delta"))
    spoken = [prompt, transcript["transcript"], heard["text"], heard["full_text"], replies]
    assert transcript["transcript"] and heard["text"]
    windows = set().union(*(word_windows(text) for text in spoken))
    lines = json_debug_log.getvalue().splitlines()
    assert lines
    session_lines = []
    for line in lines:
        record = json.loads(line)
        assert record.keys() >= JSON_KEYS, line
        assert not BASE64_RUN.search(line), line
        message = " ".join(record["message"].lower().split())
        assert not [window for window in windows if window in message], line
        if record["logger"].startswith("calibration.history_calibration"):
            session_lines.append(record)
    assert session_lines
    assert {record.get("session_id") for record in session_lines} == {session_id}


def test_the_cli_writes_json_lines(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "server", "--tts", "uniform", "--calibration", "marks",
               "--port", "0", "--log-format", "json", "--metrics-port", "0"]
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr,
                                   text=True, env={**os.environ, "DUPLEX_LOG_LEVEL": "info"})
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            url = re.search(r"http://\S+", line).group(0)
            metrics_port = int(re.search(r"/metrics also at http://[^:]+:(\d+)", line).group(1))
            session_id = asyncio.run(_barge_in_once(url))
            asyncio.run(_hang_ups([int(url.rsplit(":", 1)[1]), metrics_port]))
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    records = [json.loads(line) for line in stderr_path.read_text().splitlines()]
    assert records and all(record.keys() >= JSON_KEYS for record in records)
    assert any(record["message"] == "loading uniform speech" and "session_id" not in record
               for record in records)
    assert any(record.get("session_id") == session_id for record in records)
    assert all(record["time"].endswith("Z") for record in records)


async def _hang_ups(ports: list[int]) -> None:
    """Scrapers that hang up before the answer and malformed requests, on every port (issue
    26: the old metrics port printed raw tracebacks for these, outside `--log-format json`)."""
    for port in ports:
        for raw in (b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                    b"GET /a\x00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"GET /me", b"\r\n\r\n"):
            for _ in range(20):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(raw)
                writer.transport.abort()
    await asyncio.sleep(1)


async def _barge_in_once(http_url: str) -> str:
    """One session at `http_url` whose reply is cut by a barge-in (a calibration logs a line);
    returns the session id."""
    ws_url = http_url.replace("http://", "ws://") + "/v1/realtime"
    async with RealtimeClient.connect(ws_url) as client:
        session_id = client.events[0]["session"]["id"]
        response_id, item_id = await client.prompt("say: one two three four five six.")
        await client.wait_audio_until(response_id, 800)
        await client.barge_in(response_id, 800)
        await client.heard(item_id, lambda e: e["elapsed_ms"] is not None)
    return session_id

