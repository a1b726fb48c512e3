"""Server-side voice activity detection: streaming Silero VAD and an OpenAI `server_vad` turn
detector.

- `SileroStreamingVad` runs the Silero VAD v6 model bundled with faster-whisper
  (`faster_whisper.vad.get_vad_model()`, `assets/silero_vad_v6.onnx`) over audio fed in pieces
  of any size. It reproduces `SileroVADModel.__call__` (512-sample windows at 16 kHz, each
  preceded by the last 64 samples of the previous window, zeros before the first; the model
  runs the windows of one call in order, carrying the LSTM state `h`/`c` of shape (1, 1, 128))
  and keeps that state, the context and the unfinished window across calls, so any chunking
  gives faster-whisper's batch probabilities (tests: within 1e-5 for chunks of 1 to 4801
  samples).
- `TurnDetector` is the sans-I/O state machine over (window end ms, probability, level) that
  emits `SpeechStarted` / `SpeechStopped` with OpenAI Realtime `server_vad` semantics
  (`threshold` 0.5, `prefix_padding_ms` 300, `silence_duration_ms` 500; openai
  `types/realtime/realtime_audio_input_turn_detection.py`) plus a minimum speech duration,
  hysteresis (speech continues while probability >= threshold - 0.15), a level-range gate
  against hums and an echo guard while the assistant is playing; `SpeechPaused` tells early
  that a turn may be ending (for speculative transcription).
- `resample_to_16k` turns PCM16 LE microphone bytes into the model's 16 kHz float32 input.

Cost, measured here (2 cores, shared with other work; onnxruntime CPU with the one intra-op
thread faster-whisper configures): 0.15-0.18 ms CPU per 32 ms window when fed 20 ms at a time,
i.e. 5 ms CPU per second of audio (0.5 % of a core) including the detector; 0.06 ms per window
in one batch call. Model load 0.13 s once per process, after a 0.2 s faster-whisper import.
`feed` is cheap enough to call on the event loop for each microphone append.

Echo guard: Silero's probability barely depends on level (Piper speech at -3, -30 and -50 dBFS
peak all reaches 0.96-0.99), so a raised threshold alone cannot reject the assistant's voice
leaking into the microphone, and no level gate can either: Chromium's automatic gain control
(which the page requests) lifts a quiet echo by about 10 dB, to -28..-35 dBFS per loudest 10 ms
frame, as loud as a person. While `assistant_playing` is set, a candidate turn therefore also
has to pass `TurnDetector.echo_gate`, which the server sets to `server.listening.echo`'s comparison
of the microphone with the reply audio actually sent (double-talk detection by cross-correlation).
An earlier absolute gate (mean power of the last `min_speech_ms` >= -35 dBFS while playing) was
removed: AGC lets the echo through it, and it rejected real speech quieter than -35 dBFS.
"""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Callable
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


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """A turn began: `audio_start_ms` is the speech start minus the prefix padding (>= 0), ms
    on the input timeline (`input_audio_buffer.speech_started.audio_start_ms`)."""

    audio_start_ms: int


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    """A turn ended: `audio_end_ms` is the end of its last speech window, ms on the input
    timeline (`input_audio_buffer.speech_stopped.audio_end_ms`); `forced`: it did not pause
    but ran into `TurnDetectionConfig.max_turn_ms` (`audio_end_ms` is then the end of the
    window that reached it)."""

    audio_end_ms: int
    forced: bool = False


@dataclass(frozen=True, slots=True)
class SpeechPaused:
    """A turn may be ending: the non-speech after its last speech window reached
    `TurnDetectionConfig.pause_ms`, sooner than `silence_duration_ms`. `audio_end_ms` is the
    end of that window, ms on the input timeline: the `SpeechStopped.audio_end_ms` to come if
    no speech follows. Lets the caller start work on the utterance (its transcription) while
    the rest of the silence is awaited."""

    audio_end_ms: int


@dataclass(frozen=True, slots=True)
class SpeechGap:
    """The non-speech after a turn's last speech window reached `TurnDetectionConfig.gap_ms`,
    sooner than `pause_ms`: `audio_end_ms` is the end of that window, ms on the input
    timeline (the `SpeechPaused` and `SpeechStopped` to come if no speech follows). Lets the
    caller decide early what a short utterance was (a backchannel over a paused reply)."""

    audio_end_ms: int


@dataclass(frozen=True, slots=True)
class SpeechResumed:
    """Speech came back after a reported `SpeechGap` or `SpeechPaused`: work started on the
    utterance up to that pause no longer covers all of it. `audio_end_ms` is the end of the
    speech window that resumed it, ms on the input timeline."""

    audio_end_ms: int


TurnEvent = SpeechStarted | SpeechGap | SpeechPaused | SpeechResumed | SpeechStopped


@dataclass(frozen=True, slots=True)
class TurnDetectionConfig:
    """Parameters of `TurnDetector`; the first three are OpenAI `server_vad`'s, with its
    defaults.

    Attributes:
        threshold: probability at which a window is speech (default 0.5).
        prefix_padding_ms: audio included before the speech start (default 300).
        silence_duration_ms: non-speech after the last speech window that ends a turn
            (default 500).
        min_speech_ms: speech must last this long (ms from the start of its first window)
            before the turn starts, so that coughs, clicks and knocks do not (default 250).
        hysteresis: windows down to `threshold - hysteresis` (at least 0.01) continue speech,
            and such windows just before the first one >= threshold count as its start
            (faster-whisper's `neg_threshold` default; default 0.15).
        candidate_gap_ms: before the turn starts, dips below the hysteresis level up to this
            long do not restart the count, e.g. the closure of the "t" in "What time" or
            "Actually" (measured with espeak-ng: up to three windows at 0.16-0.34; default 96 ms).
        min_level_range_db: before the turn starts, the window levels of the last
            `min_speech_ms` (the first window of the speech excluded, windows more than
            `MODULATION_FLOOR_DB` below the loudest ignored) must differ by this much: speech
            rises and falls by syllable, a hum does not (measured: Silero scores harmonic hums
            at 0.5-0.85 with a level range under 1 dB; speech at the start moment ranged
            5.5-105 dB). 0 disables the check (default 3.0 dB).
        echo_threshold: used instead of `threshold` while the assistant is playing (default
            0.6). Measured (`benchmarks/bench_backchannel.py`'s 50 recordings 900 ms into the
            microphone, 40 ms appends): at 0.8, 6 short words were never heard over a reply
            (Piper "wait", "uh-uh", "right", "uh huh", espeak-ng en-gb-x-rp and en-029 "stop":
            a missed barge-in, or a backchannel that could not pause), at 0.7 four, at 0.6 one
            (Piper "wait"), at 0.5 none; the echo gate (`echo_gate`) does the rest of the
            echo's rejection: `tests/test_echo.py` passes at 0.6, while at 0.5 a candidate
            begun on the echo put one person's turn start 270 ms before their voice.
        pause_ms: non-speech after the last speech window at which a turn in progress reports
            `SpeechPaused`, when shorter than `silence_duration_ms`; None never reports it
            (default). The server passes the utterance tail its commits keep
            (`server.listening.server_vad_settings.UTTERANCE_TAIL_MS`): the audio is then complete
            up to the end of what a commit at that moment would take.
        gap_ms: non-speech after the last speech window at which a turn in progress reports
            `SpeechGap`, when shorter than `pause_ms` (or `silence_duration_ms`); None never
            reports it (default). The server passes the shorter tail a backchannel decision
            takes (`server.listening.server_vad_settings.DECISION_TAIL_MS`). A speech window
            after a reported gap or pause reports `SpeechResumed`.
        max_turn_ms: the longest turn (ms from its speech start): a turn still speaking then
            returns `SpeechStopped(forced=True)` and the detector listens for a new one (speech
            that never pauses, such as steady babble, is still committed and never holds the
            input); None: no bound (default).

    Raises:
        ValueError: a threshold outside (0, 1), a negative duration or range, or a
            hysteresis outside [0, 1).
    """

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    min_speech_ms: int = 250
    hysteresis: float = 0.15
    candidate_gap_ms: int = 96
    min_level_range_db: float = 3.0
    echo_threshold: float = 0.6
    pause_ms: int | None = None
    gap_ms: int | None = None
    max_turn_ms: int | None = None

    def __post_init__(self) -> None:
        for name in ("threshold", "echo_threshold"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in (0, 1)")
        for name in ("prefix_padding_ms", "silence_duration_ms", "min_speech_ms",
                     "candidate_gap_ms", "min_level_range_db"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0")
        if not 0.0 <= self.hysteresis < 1.0:
            raise ValueError("hysteresis must be in [0, 1)")
        for name in ("pause_ms", "gap_ms", "max_turn_ms"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"{name} must be >= 0")


ONSET_LOOKBACK_MS = 64
"""How far the speech start reaches back over windows >= threshold - hysteresis right before
the first window >= threshold (the soft start of "Wait" scores 0.41 in the window before)."""

VOICE_ONSET_MARGIN_MS = 40
"""Audio kept before the voice onset the echo detector locates (ms): its 10 ms frames analyse
30 ms, and the first sound of a word may be fainter than the echo under it."""

FIRST_WORD_RUNS = 8
"""Dropped candidates kept for `TurnDetector`'s look-back at a turn's start (the short words
and their pauses just before it)."""

MODULATION_FLOOR_DB = 30.0
"""Windows this far below the loudest recent one do not count for `min_level_range_db` (the
silence right after a hum stops, which Silero still scores at about 0.6)."""


class TurnDetector:
    """OpenAI `server_vad` turn detection over VAD windows; sans-I/O (no model, no clock).

    Feed every window in order to `process`; a window spans `WINDOW_MS` (32 ms) ending at
    `window_end_ms`. With `low = max(active threshold - hysteresis, 0.01)`:

    - silence: a window >= the active threshold opens a candidate; its speech starts at the
      start of that window, or up to `ONSET_LOOKBACK_MS` earlier over the unbroken run of
      windows >= low right before it;
    - candidate: windows >= low continue it, dips below low longer than `candidate_gap_ms`
      drop it silently; on a window >= low once it lasted `min_speech_ms`, its recent
      levels pass the `min_level_range_db` gate and `echo_gate` does not call it echo,
      `SpeechStarted(max(0, start - prefix_padding_ms))` is returned;
    - speaking: a window >= low is speech; once the windows below low reach
      `silence_duration_ms` past the end of the last speech window, `SpeechStopped(end of the
      last speech window)` is returned. (faster-whisper's `get_speech_timestamps` lets a
      window between low and threshold only continue a silence already begun; that cut the
      final "s" of "minutes" off, whose windows score 0.4-0.5 after a 0.2 dip.) Before that,
      with a `pause_ms` shorter than the silence duration, `SpeechPaused(end of the last
      speech window)` is returned once the silence reaches `pause_ms`, once per silence: a
      speech window ends the pause, so a later silence can pause again. Likewise
      `SpeechGap` at `gap_ms`, and a speech window after either returns `SpeechResumed`.

    `assistant_playing` (set by the caller) switches the threshold to `echo_threshold`.
    `echo_gate(start_ms, window_end_ms)` (set by the caller, None: no gate) returns True when
    the candidate's audio from `start_ms` to `window_end_ms` is the assistant's own voice; it
    is asked whether or not `assistant_playing` is set (the microphone hears the end of a reply
    after its playback ended) and says False when it has no reply audio to compare with. A
    candidate it rejects is not dropped (a person may start talking over the echo): from then
    on the gate is asked on every window, each rejection moves the candidate's start to that
    window's end, and the turn starts once `min_speech_ms` of speech passed the gate on every
    window (so a cough over the echo does not start one), reaching back over no echo (only
    `prefix_padding_ms` does). `voice_onset(from_ms, window_end_ms, echo_until_ms)` (set by the
    caller, None: none) returns where the person's own sound begins after `from_ms`, or None
    when it cannot tell; `echo_until_ms` is where the candidate's speech began when the gate
    moved its start past that (None otherwise). The turn's audio then starts at that onset
    less `VOICE_ONSET_MARGIN_MS` when that is later than the speech start minus
    `prefix_padding_ms`, so that a committed turn does not begin with the assistant's echo
    (Silero scores that echo as speech too: the speech start may lie on it).
    `room_gate(start_ms, window_end_ms)` (set by the caller, None: no gate; the server's is
    `server.listening.room_background.RoomBackground.is_background`) returns True when the
    candidate's speech is the room's background, not the person: like an echo rejection, the
    candidate's start then moves to that window's end, so a turn needs `min_speech_ms` of
    speech the room gate passed; in a turn, a window the room gate calls background counts
    toward the silence (a TV talking on after the person stopped ends the turn).
    """

    def __init__(self, config: TurnDetectionConfig | None = None) -> None:
        """Start in silence with `config` (defaults: `TurnDetectionConfig()`)."""
        self.config = config or TurnDetectionConfig()
        self.assistant_playing = False
        self.echo_gate: Callable[[int, int], bool] | None = None
        self.voice_onset: Callable[[int, int, int | None], int | None] | None = None
        self.room_gate: Callable[[int, int], bool] | None = None
        self._turn_start_ms = 0
        self._last_end_ms: int | None = None
        self._run_start_ms: int | None = None
        self._start_ms: int | None = None
        self._echo_held = False
        self._speaking = False
        self._paused = False
        self._gapped = False
        self._speech_end_ms = 0
        self._early_stop_ms: int | None = None
        self._recent: collections.deque[tuple[int, float | None]] = collections.deque()
        self._dropped: collections.deque[tuple[int, int]] = collections.deque(
            maxlen=FIRST_WORD_RUNS)

    @property
    def speaking(self) -> bool:
        """True between a `SpeechStarted` and its `SpeechStopped`."""
        return self._speaking

    def reset(self) -> None:
        """Return to silence, dropping a candidate or a turn in progress without an event.
        Window positions may then start over (any non-negative `window_end_ms`)."""
        self._last_end_ms = None
        self._stop()
        self._dropped.clear()
        self._drop_candidate()

    def end_turn(self, audio_end_ms: int, min_silence_ms: int) -> SpeechStopped | None:
        """End the turn in progress once its silence reaches `min_silence_ms`, sooner than
        `silence_duration_ms` (a semantic end of turn), when its last speech window ended at
        `audio_end_ms`: `SpeechStopped(audio_end_ms)` now when the silence is already that
        long, else from the window that makes it so (`process`). None, and nothing changes,
        without a turn or when the person spoke on (the verdict was on speech that is no
        longer the turn's end); speech before the stop cancels it."""
        if not self._speaking or self._speech_end_ms != audio_end_ms:
            return None
        if self._last_end_ms is not None and (
                self._last_end_ms - self._speech_end_ms >= min_silence_ms):
            self._stop()
            return SpeechStopped(audio_end_ms)
        self._early_stop_ms = min_silence_ms
        return None

    def _stop(self) -> None:
        self._speaking = False
        self._paused = self._gapped = False
        self._early_stop_ms = None

    def process(
        self, window_end_ms: int, probability: float, level_dbfs: float | None = None
    ) -> TurnEvent | None:
        """Take the next window and return the event it completes, if any.

        Args:
            window_end_ms: end of the window, ms on the input timeline; never decreasing.
            probability: speech probability of the window in [0, 1].
            level_dbfs: RMS level of the window (`VadWindow.level_dbfs`), or None when
                unknown: the level gates are open while a recent window has no level.

        Raises:
            ValueError: `window_end_ms` is negative or below the previous one, or the
                probability is not in [0, 1].
        """
        if window_end_ms < 0 or (self._last_end_ms is not None
                                 and window_end_ms < self._last_end_ms):
            raise ValueError("window_end_ms must be >= 0 and never decrease")
        if not 0.0 <= probability <= 1.0:
            raise ValueError("probability must be in [0, 1]")
        self._last_end_ms = window_end_ms
        config = self.config
        threshold = config.echo_threshold if self.assistant_playing else config.threshold
        low = max(threshold - config.hysteresis, 0.01)
        if self._speaking:
            return self._continue_turn(window_end_ms, probability, low)
        if self._start_ms is None:
            return self._listen(window_end_ms, probability, level_dbfs, threshold, low)
        self._remember(window_end_ms, level_dbfs)
        if probability < low:
            if window_end_ms - self._speech_end_ms > config.candidate_gap_ms:
                if not self._echo_held:
                    self._dropped.append((self._first_ms(), self._speech_end_ms))
                self._drop_candidate()
            return None
        self._speech_end_ms = window_end_ms
        return self._maybe_start(window_end_ms, self._start_ms)

    def _listen(self, window_end_ms: int, probability: float, level_dbfs: float | None,
                threshold: float, low: float) -> TurnEvent | None:
        """Silence: track the run of windows >= low; a window >= threshold opens a candidate."""
        if probability < low:
            if self._run_start_ms is not None:
                self._dropped.append((self._run_start_ms, self._speech_end_ms))
            self._drop_candidate()
            return None
        window_start_ms = max(window_end_ms - WINDOW_MS, 0)
        if self._run_start_ms is None:
            self._run_start_ms = window_start_ms
        self._speech_end_ms = window_end_ms
        self._remember(window_end_ms, level_dbfs)
        if probability < threshold:
            return None
        self._start_ms = max(self._run_start_ms, window_start_ms - ONSET_LOOKBACK_MS)
        self._speech_end_ms = window_end_ms
        return self._maybe_start(window_end_ms, self._start_ms)

    def _remember(self, window_end_ms: int, level_dbfs: float | None) -> None:
        """Keep the levels of the candidate's windows that end within the last `min_speech_ms`."""
        self._recent.append((window_end_ms, level_dbfs))
        span = max(self.config.min_speech_ms, WINDOW_MS)
        while self._recent[0][0] <= window_end_ms - span:
            self._recent.popleft()

    def _maybe_start(self, window_end_ms: int, start_ms: int) -> SpeechStarted | None:
        """Start the turn when the candidate (speech from `start_ms`) lasted `min_speech_ms`
        and its recent windows pass the level and echo gates. Once the echo gate rejected the
        candidate, it is asked on every window, and each rejection moves the start to that
        window's end: the turn needs `min_speech_ms` of speech the gate passed throughout."""
        if self._echo_held and self._is_echo(start_ms, window_end_ms):
            self._start_ms = window_end_ms
            return None
        if window_end_ms - start_ms < self.config.min_speech_ms or not self._gates_open(start_ms):
            return None
        if self.room_gate is not None and self.room_gate(start_ms, window_end_ms):
            self._start_ms = window_end_ms
            return None
        if not self._echo_held and self._is_echo(start_ms, window_end_ms):
            self._echo_held = True
            self._start_ms = window_end_ms
            return None
        audio_start_ms = self._audio_start(self._first_word_ms(start_ms), window_end_ms)
        self._dropped.clear()
        self._drop_candidate()
        self._speaking = True
        self._turn_start_ms = start_ms
        return SpeechStarted(audio_start_ms)

    def _audio_start(self, start_ms: int, window_end_ms: int) -> int:
        """The turn's audio start: the speech start minus the prefix padding, but not before
        the person's voice onset (minus `VOICE_ONSET_MARGIN_MS`) when `voice_onset` finds one
        there, even after the speech start: the padding holds the person's own audio, not the
        assistant's echo before it. The audio before the candidate's first speech window
        (when the echo gate moved the start past it) is no person's: `voice_onset` may
        measure the echo there."""
        padded = max(start_ms - self.config.prefix_padding_ms, 0)
        if self.voice_onset is None:
            return padded
        first_ms = min(self._first_ms(), start_ms)
        echo_until_ms = first_ms if first_ms < padded else None
        onset = self.voice_onset(padded, window_end_ms, echo_until_ms)
        if onset is None:
            return padded
        return max(padded, onset - VOICE_ONSET_MARGIN_MS)

    def _first_ms(self) -> int:
        """Where the current candidate's speech began: its run of windows >= low, before the
        echo gate moved its start on."""
        if self._run_start_ms is not None:
            return self._run_start_ms
        return self._start_ms if self._start_ms is not None else 0

    def _first_word_ms(self, start_ms: int) -> int:
        """The turn's speech start, looking back from `start_ms` past the trigger: a run of
        windows >= low dropped before it (too short, or never >= threshold, then a pause
        longer than `candidate_gap_ms`) whose last window ends within `prefix_padding_ms`
        before it is the same person's speech, and so on back, no further than
        `prefix_padding_ms` + `silence_duration_ms` before the trigger (a longer pause would
        have ended a turn); not a run the echo gate calls the assistant's echo. Measured on
        Piper "Wait, stop, I have a question.": "Wait" (1056-1280 ms, Silero 0.82-0.91) is too
        short to start a turn, the "st" of "stop" scores 0.48-0.49 (1568-1632), and the
        trigger (1664) less the padding began the turn 84 ms after "Wait" ended: ASR heard
        "Stop, I have a question."."""
        config = self.config
        reach_ms = start_ms - config.prefix_padding_ms - config.silence_duration_ms
        for run_start_ms, run_end_ms in reversed(self._dropped):
            if (run_end_ms < start_ms - config.prefix_padding_ms or run_start_ms >= start_ms
                    or run_start_ms < reach_ms):
                break
            if self._is_echo(run_start_ms, run_end_ms):
                break
            start_ms = run_start_ms
        return start_ms

    def _gates_open(self, start_ms: int) -> bool:
        """The level gates over the recent windows; open while a recent level is unknown."""
        recent = [(end_ms, level) for end_ms, level in self._recent if level is not None]
        if len(recent) < len(self._recent):
            return True
        modulated = [level for end_ms, level in recent if end_ms - WINDOW_MS > start_ms]
        if len(modulated) >= 2 and self.config.min_level_range_db > 0:
            loudest = max(modulated)
            audible = [level for level in modulated if level >= loudest - MODULATION_FLOOR_DB]
            if loudest - min(audible) < self.config.min_level_range_db:
                return False
        return True

    def _is_echo(self, start_ms: int, window_end_ms: int) -> bool:
        """The echo gate's verdict on the candidate's audio (False without a gate)."""
        return self.echo_gate is not None and self.echo_gate(start_ms, window_end_ms)

    def _drop_candidate(self) -> None:
        self._run_start_ms = None
        self._start_ms = None
        self._echo_held = False
        self._recent.clear()

    def _continue_turn(self, window_end_ms: int, probability: float,
                       low: float) -> TurnEvent | None:
        """Speaking state: a window >= low is speech (resuming a reported gap or pause), a
        lower one counts toward the silence (a gap at `gap_ms`, a pause at `pause_ms`, the
        stop at `silence_duration_ms`)."""
        max_turn_ms = self.config.max_turn_ms
        if max_turn_ms is not None and window_end_ms - self._turn_start_ms >= max_turn_ms:
            self._speaking = False
            self._paused = self._gapped = False
            return SpeechStopped(window_end_ms, forced=True)
        if probability >= low and not (self.room_gate is not None and self.room_gate(
                window_end_ms - WINDOW_MS, window_end_ms)):
            self._speech_end_ms = window_end_ms
            resumed = self._paused or self._gapped
            self._paused = self._gapped = False
            self._early_stop_ms = None
            return SpeechResumed(window_end_ms) if resumed else None
        silence_ms = window_end_ms - self._speech_end_ms
        stop_ms = self.config.silence_duration_ms
        if self._early_stop_ms is not None:
            stop_ms = min(stop_ms, self._early_stop_ms)
        if silence_ms >= stop_ms:
            self._stop()
            return SpeechStopped(self._speech_end_ms)
        gap_ms = self.config.gap_ms
        if not self._gapped and gap_ms is not None and silence_ms >= gap_ms:
            self._gapped = True
            return SpeechGap(self._speech_end_ms)
        pause_ms = self.config.pause_ms
        if self._paused or pause_ms is None or silence_ms < pause_ms:
            return None
        self._paused = True
        return SpeechPaused(self._speech_end_ms)


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
