"""Transcription by a remote OpenAI-compatible endpoint (`POST /v1/audio/transcriptions`).

`RemoteTranscriber` posts a WAV (`encode_wav`) to a server-owned, trusted URL
(`validate_transcription_url`; request shape of REFERENCE.md 5.2 steps 3-6) under a per-loop
concurrency limit (`ConcurrencyLimit`), and reads the answer's text and, when asked for and
given, its word timings.

Logs carry statuses, phases and durations only, never transcripts or audio.
"""

from __future__ import annotations

import asyncio
import io
import logging
import math
import time
import wave
from urllib.parse import urlsplit
from weakref import WeakKeyDictionary

import httpx
import numpy as np

from calibration.arguments import positive_seconds
from calibration.asr import TimedWord, Transcript, mono_float

logger = logging.getLogger(__name__)

MAX_TRANSCRIPT_CHARS = 8192
"""Longest accepted remote transcript, in code points (REFERENCE.md 5.2 step 6)."""


class ConcurrencyLimit:
    """At most `limit` holders at once per event loop; asyncio-safe, cancellation-safe.

    An `asyncio.Semaphore` binds to the first loop that waits on it; this keeps one per running
    loop, so a process with one loop (the server) has one process-wide limit and successive
    loops (tests) each get a fresh one.
    """

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError("concurrency limit must be an int >= 1")
        self.limit = limit
        self._semaphores: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            WeakKeyDictionary()
        )

    def semaphore(self) -> asyncio.Semaphore:
        """Return the running loop's semaphore (created on first use)."""
        loop = asyncio.get_running_loop()
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            semaphore = self._semaphores[loop] = asyncio.Semaphore(self.limit)
        return semaphore


def encode_wav(pcm_f32: np.ndarray, sample_rate_hz: int) -> bytes:
    """Encode 1-D float PCM as a 16-bit mono WAV (clipped to [-1, 1], scaled by 32767)."""
    samples = np.clip(np.asarray(pcm_f32, dtype=np.float32), -1.0, 1.0)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(int(sample_rate_hz))
        writer.writeframes((samples * 32767.0).astype("<i2").tobytes())
    return buffer.getvalue()


def validate_transcription_url(url: str) -> str:
    """Return `url` when it is http(s) with a host and no embedded credentials.

    Raises ValueError otherwise (REFERENCE.md 3.9: server-owned, trusted URL).
    """
    if not isinstance(url, str):
        raise ValueError("transcription URL must be a string")
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError("transcription URL has an invalid port") from exc
    if port == 0:
        raise ValueError("transcription URL has an invalid port")
    if parts.scheme not in ("http", "https"):
        raise ValueError("transcription URL must be http or https")
    if not parts.hostname:
        raise ValueError("transcription URL must have a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("transcription URL must not embed credentials")
    return url


class RemoteTranscriber:
    """OpenAI-compatible remote transcription (`POST /v1/audio/transcriptions`).

    Args:
        url: the full endpoint URL, e.g. "http://127.0.0.1:8001/v1/audio/transcriptions";
            http(s), a host, no credentials (else ValueError).
        model: the `model` form field (non-blank, else ValueError).
        timeout_s: HTTP client timeout in seconds (> 0, finite); the caller's own deadline
            (which also covers queueing for a slot) normally fires first.
        max_concurrency: concurrent requests per event loop for this transcriber (>= 1).
        word_timestamps: ask for word timings (OpenAI's `response_format=verbose_json` with
            `timestamp_granularities[]=word`); only for endpoints that support it (vLLM's
            Whisper endpoint, for one, has no word timings). Default False.

    Request: multipart fields exactly `file` ("heard.wav", audio/wav, 16-bit mono at the
    input rate), `model`, `response_format=json` (REFERENCE.md 5.2 step 5), or with
    `word_timestamps` `response_format=verbose_json` and `timestamp_granularities[]=word`; a
    new client per call with `trust_env=False` (no environment proxies), no auth header, no
    prompt. With `word_timestamps`, an answer whose `words` are a list of {"word": str, "start":
    s, "end": s} (finite, 0 <= start <= end) gives a `Transcript` with them; an answer without
    usable `words` gives the plain text.

    Raises (from `transcribe`): httpx.HTTPStatusError for a non-2xx answer, httpx transport
    errors, ValueError for a body that is not JSON or whose `text` is not a string of at most
    8192 code points. Cancellation propagates into the request and frees the slot; a call
    cancelled while queued never reaches HTTP.
    """

    def __init__(
        self,
        url: str,
        model: str = "whisper-1",
        timeout_s: float = 1.0,
        max_concurrency: int = 4,
        word_timestamps: bool = False,
    ) -> None:
        self.url = validate_transcription_url(url)
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model must be a non-blank string")
        self.timeout_s = positive_seconds("timeout_s", timeout_s)
        self.model = model
        self.limit = ConcurrencyLimit(max_concurrency)
        self.fields = (
            {"model": model, "response_format": "verbose_json",
             "timestamp_granularities[]": "word"}
            if word_timestamps else {"model": model, "response_format": "json"}
        )

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        """POST `pcm_f32` as a WAV at `sample_rate_hz` and return the transcript."""
        started = time.perf_counter()
        timings = {"preprocess": 0.0, "queue": 0.0, "http": 0.0}
        status, phase = "cancelled", "preprocess"
        mark = started
        try:
            wav = encode_wav(mono_float(pcm_f32, sample_rate_hz), int(sample_rate_hz))
            timings["preprocess"], mark = _lap(mark)
            phase = "queue"
            async with self.limit.semaphore():
                timings["queue"], mark = _lap(mark)
                phase = "http"
                async with httpx.AsyncClient(timeout=self.timeout_s, trust_env=False) as client:
                    response = await client.post(
                        self.url,
                        files={"file": ("heard.wav", wav, "audio/wav")},
                        data=self.fields,
                    )
                timings["http"], mark = _lap(mark)
                response.raise_for_status()
            phase = "parse"
            text = _transcript_text(response)
            status = "ok"
            return text
        except Exception as exc:
            status = type(exc).__name__
            raise
        finally:
            logger.info(
                "remote asr status=%s phase=%s preprocess_ms=%.1f queue_ms=%.1f http_ms=%.1f "
                "total_ms=%.1f",
                status,
                phase,
                timings["preprocess"],
                timings["queue"],
                timings["http"],
                (time.perf_counter() - started) * 1000.0,
            )


def _lap(mark: float) -> tuple[float, float]:
    """Return (ms since `mark`, now)."""
    now = time.perf_counter()
    return (now - mark) * 1000.0, now


def _transcript_text(response: httpx.Response) -> str:
    """Return the `text` field of a transcription answer, as a `Transcript` when the answer
    has valid `words` (see `RemoteTranscriber`); ValueError when the text is not valid."""
    try:
        payload = response.json()
    except ValueError as exc:
        raise ValueError("transcription answer is not JSON") from exc
    text = payload.get("text") if isinstance(payload, dict) else None
    if not isinstance(text, str) or len(text) > MAX_TRANSCRIPT_CHARS:
        raise ValueError("transcription answer has no valid text")
    words = _timed_words(payload.get("words"))
    return text if words is None else Transcript(text, words)


def _timed_words(words: object) -> list[TimedWord] | None:
    """The `words` of a verbose answer as TimedWords; None when absent or not all valid."""
    if not isinstance(words, list) or not words:
        return None
    timed = []
    for word in words:
        if not isinstance(word, dict):
            return None
        text, start, end = word.get("word"), word.get("start"), word.get("end")
        if (not isinstance(text, str) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                for v in (start, end)) or not 0 <= start <= end):
            return None
        timed.append(TimedWord(f" {text.strip()}", float(start), float(end)))
    return timed
