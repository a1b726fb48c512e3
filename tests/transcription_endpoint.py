"""A real OpenAI-compatible `/v1/audio/transcriptions` endpoint for tests.

Stdlib `http.server` on 127.0.0.1 (a free port) in a background thread, transcribing uploads
with the same in-process faster-whisper model as `LocalWhisperTranscriber`. Switchable
behaviour: `delay_s` before answering (watching for the client to hang up), `status` (e.g. 503),
`body` ("json" | "garbage" | "non_string") and `text_override` (answer a fixed text without
running whisper). Every request is recorded as a `ReceivedRequest`.
"""

from __future__ import annotations

import email.policy
import io
import json
import select
import socket
import threading
import time
import wave
from dataclasses import dataclass, field
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler
from typing import Literal

import numpy as np

from calibration.local_asr import LocalWhisperTranscriber
from tests.loopback_http import LoopbackHTTPServer

PATH = "/v1/audio/transcriptions"


@dataclass
class ReceivedRequest:
    """One request as the endpoint saw it.

    `fields` maps every multipart field name to its value (the file field to its filename);
    the `wav_*` attributes describe the uploaded WAV (rate in Hz, frames = samples per channel).
    """

    fields: dict[str, str] = field(default_factory=dict)
    file_content_type: str = ""
    wav_channels: int = 0
    wav_sample_width: int = 0
    wav_rate_hz: int = 0
    wav_frames: int = 0
    client_disconnected: bool = False


class TranscriptionEndpoint(LoopbackHTTPServer):
    """Start with `with TranscriptionEndpoint() as endpoint:`; `endpoint.url` is the full URL."""

    def __init__(self, transcriber: LocalWhisperTranscriber | None = None) -> None:
        self.transcriber = transcriber or LocalWhisperTranscriber()
        self.delay_s = 0.0
        self.status = 200
        self.body: Literal["json", "garbage", "non_string"] = "json"
        self.text_override: str | None = None
        self.requests: list[ReceivedRequest] = []
        self.request_seen = threading.Event()
        self.disconnected = threading.Event()
        super().__init__()

    @property
    def url(self) -> str:
        """The endpoint's full URL, e.g. "http://127.0.0.1:40123/v1/audio/transcriptions"."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{PATH}"

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                endpoint._handle(self)

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.path != PATH:
            self._reply(handler, 404, {"error": {"message": "not found"}})
            return
        length = int(handler.headers.get("Content-Length", "0"))
        body = handler.rfile.read(length)
        request, audio = _parse(handler.headers.get("Content-Type", ""), body)
        self.requests.append(request)
        self.request_seen.set()
        if not self._wait(handler):
            request.client_disconnected = True
            self.disconnected.set()
            return
        if self.status != 200:
            self._reply(handler, self.status, {"error": {"message": "unavailable"}})
            return
        if self.body == "garbage":
            self._send(handler, 200, b'{"text": "unterminated')
            return
        if self.body == "non_string":
            self._reply(handler, 200, {"text": 42})
            return
        if self.text_override is not None:
            text = self.text_override
        else:
            text = self.transcriber.transcribe_blocking(audio, request.wav_rate_hz)
        self._reply(handler, 200, {"text": text})

    def _wait(self, handler: BaseHTTPRequestHandler) -> bool:
        """Sleep `delay_s`; False as soon as the client closes its connection."""
        deadline = time.monotonic() + self.delay_s
        connection = handler.connection
        while (remaining := deadline - time.monotonic()) > 0 and not self._closing.is_set():
            readable, _, _ = select.select([connection], [], [], min(remaining, 0.01))
            if readable:
                try:
                    if connection.recv(1, socket.MSG_PEEK) == b"":
                        return False
                except ConnectionError:
                    return False
        return True

    def _reply(self, handler: BaseHTTPRequestHandler, status: int, payload: object) -> None:
        self._send(handler, status, json.dumps(payload).encode())

    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def _parse(content_type: str, body: bytes) -> tuple[ReceivedRequest, np.ndarray]:
    """Parse a multipart/form-data body; return the record and the WAV as float32 samples."""
    message = BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    request = ReceivedRequest()
    audio = np.zeros(0, dtype=np.float32)
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is None:
            request.fields[name] = payload.decode()
            continue
        request.fields[name] = filename
        request.file_content_type = part.get_content_type()
        with wave.open(io.BytesIO(payload), "rb") as reader:
            request.wav_channels = reader.getnchannels()
            request.wav_sample_width = reader.getsampwidth()
            request.wav_rate_hz = reader.getframerate()
            request.wav_frames = reader.getnframes()
            frames = reader.readframes(request.wav_frames)
        audio = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    return request, audio
