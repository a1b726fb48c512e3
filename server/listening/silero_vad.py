"""Streaming Silero VAD: the speech probability of every 32 ms window of a microphone stream
fed in pieces of any size.

- `SileroStreamingVad` runs the Silero VAD v6 model bundled with faster-whisper
  (`faster_whisper.vad.get_vad_model()`, `assets/silero_vad_v6.onnx`) over audio fed in pieces
  of any size. It reproduces `SileroVADModel.__call__` (512-sample windows at 16 kHz, each
  preceded by the last 64 samples of the previous window, zeros before the first; the model
  runs the windows of one call in order, carrying the LSTM state `h`/`c` of shape (1, 1, 128))
  and keeps that state, the context and the unfinished window across calls, so any chunking
  gives faster-whisper's batch probabilities (tests: within 1e-5 for chunks of 1 to 4801
  samples). Each window (`VadWindow`) also carries its RMS level.
- `resample_to_16k` turns PCM16 LE microphone bytes into the model's 16 kHz float32 input.

The turn detector over these windows is `server.listening.vad.TurnDetector`.

Cost, measured here (2 cores, shared with other work; onnxruntime CPU with the one intra-op
thread faster-whisper configures): 0.15-0.18 ms CPU per 32 ms window when fed 20 ms at a time,
i.e. 5 ms CPU per second of audio (0.5 % of a core) including the detector; 0.06 ms per window
in one batch call. Model load 0.13 s once per process, after a 0.2 s faster-whisper import.
`feed` is cheap enough to call on the event loop for each microphone append.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from server.listening.pcm16 import pcm16_to_float
from server.speech.resampling import resample

if TYPE_CHECKING:
    import onnxruntime

SAMPLE_RATE_HZ = 16_000
"""Input rate of the Silero model."""

WINDOW_SAMPLES = 512
"""Samples per Silero window at 16 kHz (faster-whisper `SileroVADModel`, `num_samples`)."""

CONTEXT_SAMPLES = 64
"""Samples of the previous window prepended to each window (`context_size_samples`)."""

WINDOW_MS = WINDOW_SAMPLES * 1000 // SAMPLE_RATE_HZ
"""Duration of one window: 32 ms."""

STATE_SHAPE = (1, 1, 128)
"""Shape of the LSTM state tensors `h` and `c` of `silero_vad_v6.onnx`."""

SILENCE_DBFS = -120.0
"""Level reported for an all-zero window (instead of minus infinity)."""

BATCH_WINDOWS = 10_000
"""Most windows per inference call (faster-whisper's `encoder_batch_size`)."""

_SAMPLES_PER_MS = SAMPLE_RATE_HZ // 1000
_model_lock = threading.Lock()


def load_vad_model() -> onnxruntime.InferenceSession:
    """Return the process-wide Silero VAD inference session, loading it on first use.

    The session is faster-whisper's cached `get_vad_model().session` (CPU provider, one
    intra-op thread); `run` is thread-safe, so every `SileroStreamingVad` shares it. Blocking
    on first use (0.13 s, plus 0.2 s to import faster-whisper); call at start-up to warm up.

    Raises:
        RuntimeError: onnxruntime is not installed (from faster-whisper).
    """
    from faster_whisper.vad import get_vad_model

    with _model_lock:
        return get_vad_model().session


@dataclass(frozen=True, slots=True)
class VadWindow:
    """The verdict on one 512-sample window.

    Attributes:
        end_ms: end of the window on the input timeline, ms since the stream started (floor).
        probability: Silero speech probability in [0, 1].
        level_dbfs: RMS level of the window's samples in dB relative to full scale 1.0 (a
            full-scale square wave is 0 dBFS, a full-scale sine -3 dBFS); `SILENCE_DBFS` for
            digital silence.
    """

    end_ms: int
    probability: float
    level_dbfs: float


class SileroStreamingVad:
    """Incremental Silero VAD over 16 kHz mono float audio; one instance per input stream.

    Feed audio in pieces of any size; every complete 512-sample window (32 ms) gets one
    probability, the one faster-whisper's batch `SileroVADModel.__call__` gives it on the whole
    stream (that call also zeroes the last 64 samples of its input in place: a quirk not
    reproduced). Samples of an unfinished window wait for the next call. Not thread-safe
    (one caller per instance); the model itself is shared (`load_vad_model`).
    """

    def __init__(self) -> None:
        """Create the stream state; loads the shared model on first use (see `load_vad_model`)."""
        self._session = load_vad_model()
        self._received = 0
        self._base = 0
        self._windows = 0
        self._h = np.zeros(STATE_SHAPE, dtype=np.float32)
        self._c = np.zeros(STATE_SHAPE, dtype=np.float32)
        self._context = np.zeros((1, CONTEXT_SAMPLES), dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)

    @property
    def received_ms(self) -> int:
        """Input received so far, ms since the stream started (floor), including samples still
        waiting for their window to complete."""
        return self._received // _SAMPLES_PER_MS

    def feed(self, pcm_16k: np.ndarray) -> list[float]:
        """Append `pcm_16k` and return one speech probability per newly completed window.

        Same input and errors as `feed_windows`.
        """
        return [window.probability for window in self.feed_windows(pcm_16k)]

    def feed_windows(self, pcm_16k: np.ndarray) -> list[VadWindow]:
        """Append `pcm_16k` (1-D float samples in [-1, 1] at 16 kHz, any length) and return the
        newly completed windows in order, with their end positions and levels.

        Raises:
            ValueError: the input is not 1-D or holds non-finite samples.
        """
        samples = np.asarray(pcm_16k, dtype=np.float32)
        if samples.ndim != 1:
            raise ValueError("pcm_16k must be a 1-D array")
        if not np.isfinite(samples).all():
            raise ValueError("pcm_16k contains non-finite samples")
        self._received += samples.size
        buffer = np.concatenate((self._pending, samples)) if self._pending.size else samples
        count = buffer.size // WINDOW_SAMPLES
        self._pending = buffer[count * WINDOW_SAMPLES :].copy()
        if count == 0:
            return []
        frames = buffer[: count * WINDOW_SAMPLES].reshape(count, WINDOW_SAMPLES)
        contexts = np.concatenate((self._context, frames[:-1, -CONTEXT_SAMPLES:]))
        inputs = np.concatenate((contexts, frames), axis=1)
        self._context = frames[-1:, -CONTEXT_SAMPLES:].copy()
        probabilities = [self._run(inputs[i : i + BATCH_WINDOWS])
                         for i in range(0, count, BATCH_WINDOWS)]
        powers = np.mean(np.square(frames, dtype=np.float64), axis=1)
        windows = []
        for probability, power in zip(np.concatenate(probabilities), powers, strict=True):
            self._windows += 1
            end_sample = self._base + self._windows * WINDOW_SAMPLES
            level = 10.0 * math.log10(power) if power > 0.0 else SILENCE_DBFS
            windows.append(VadWindow(end_sample // _SAMPLES_PER_MS, float(probability),
                                     max(level, SILENCE_DBFS)))
        return windows

    def reset(self) -> None:
        """Forget the model state and the unfinished window (e.g. after the input buffer was
        cleared). The timeline keeps counting: the next window ends 512 samples after the last
        sample received so far."""
        self._base = self._received
        self._windows = 0
        self._h = np.zeros(STATE_SHAPE, dtype=np.float32)
        self._c = np.zeros(STATE_SHAPE, dtype=np.float32)
        self._context = np.zeros((1, CONTEXT_SAMPLES), dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)

    def _run(self, inputs: np.ndarray) -> np.ndarray:
        """Run the model on (n, 576) window inputs in order, carrying the LSTM state."""
        output, self._h, self._c = self._session.run(
            None, {"input": inputs, "h": self._h, "c": self._c}
        )
        return np.asarray(output, dtype=np.float32).reshape(-1)


def resample_to_16k(pcm16: bytes, rate_hz: int) -> np.ndarray:
    """Decode PCM16 little-endian mono bytes at `rate_hz` Hz to float32 at 16 kHz.

    Samples are scaled by 1/32768 into [-1, 1) and resampled with soxr HQ
    (`server.speech.resampling.resample`); the output has round(n * 16000 / rate_hz) samples. Each
    call is resampled on its own, so a stream cut into 20 ms pieces gets filter edges at every cut:
    measured, Silero probabilities move by up to 0.13 and turn events by at most one window;
    a stream is better served by one `soxr.ResampleStream`.

    Raises:
        ValueError: an odd number of bytes or a rate that is not a positive int.
    """
    if isinstance(rate_hz, bool) or not isinstance(rate_hz, int) or rate_hz <= 0:
        raise ValueError("rate_hz must be a positive int")
    if len(pcm16) % 2:
        raise ValueError("PCM16 audio must have an even number of bytes")
    return resample(pcm16_to_float(pcm16), rate_hz, SAMPLE_RATE_HZ)
