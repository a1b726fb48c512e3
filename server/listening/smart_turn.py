"""Smart Turn v3.2: an acoustic end-of-turn model on CPU, for `semantic_vad`.

The model is `smart-turn-v3.2-cpu.onnx` (8.7 MB), shipped inside the `pipecat-ai` 1.14 wheel
(BSD-2-Clause, Copyright (c) 2024-2026 Daily), which the Makefile installs with `--no-deps`: the
file is read from the installed distribution's file list; pipecat itself is never imported.
Input, as pipecat's `LocalSmartTurnAnalyzerV3._predict_endpoint` prepares it: the last 8 s of
the turn at 16 kHz (zeros in front of a shorter turn), normalized to zero mean and unit
variance, as whisper log-mel features of shape (1, 80, 800) (pipecat's `_whisper_features.py`;
faster-whisper's `FeatureExtractor` with `padding=0` gives the same features, within 4e-7).
Output: the probability (0-1) that the speaker has finished their turn.

Cost, measured here (2 cores shared with other work, one onnxruntime thread): 43-64 ms per
call, 5 ms of it the features (DESIGN.md 6). Blocking: call it off the event loop.
"""

from __future__ import annotations

import threading
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnxruntime
    from faster_whisper.feature_extractor import FeatureExtractor

SAMPLE_RATE_HZ = 16_000
"""Rate of the model's input audio."""

WINDOW_SAMPLES = 8 * SAMPLE_RATE_HZ
"""The model sees the last 8 s of a turn (128,000 samples)."""

MODEL_FILE = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
"""Where the model lies inside the `pipecat-ai` distribution."""

_NORM_EPS = 1e-7
"""Variance floor of the waveform normalization (`transformers`' `WhisperFeatureExtractor`)."""

_lock = threading.Lock()
_loaded: tuple[onnxruntime.InferenceSession, FeatureExtractor] | None = None


def model_path() -> Path:
    """The path of `smart-turn-v3.2-cpu.onnx` in the installed `pipecat-ai` distribution.

    Raises:
        FileNotFoundError: `pipecat-ai` is not installed, or its wheel has no such file.
    """
    try:
        distribution = metadata.distribution("pipecat-ai")
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            "semantic_vad needs the pipecat-ai wheel (make install: pip install --no-deps "
            "pipecat-ai==1.14.0)") from None
    path = Path(str(distribution.locate_file(MODEL_FILE)))
    if not path.is_file():
        raise FileNotFoundError(f"{MODEL_FILE} is missing from pipecat-ai")
    return path


def _load() -> tuple[onnxruntime.InferenceSession, FeatureExtractor]:
    """The process-wide model session and feature extractor, loaded on first use."""
    global _loaded
    with _lock:
        if _loaded is None:
            import onnxruntime
            from faster_whisper.feature_extractor import FeatureExtractor

            options = onnxruntime.SessionOptions()
            options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
            options.inter_op_num_threads = 1
            options.intra_op_num_threads = 1
            session = onnxruntime.InferenceSession(
                str(model_path()), sess_options=options, providers=["CPUExecutionProvider"])
            _loaded = session, FeatureExtractor(feature_size=80)
        return _loaded


def warm_up() -> None:
    """Load the model (about 0.1 s) and run it once, so that the first turn does not wait.

    Raises:
        FileNotFoundError: see `model_path`.
    """
    end_of_turn_probability(np.zeros(SAMPLE_RATE_HZ, dtype=np.float32))


def end_of_turn_probability(audio_16k: np.ndarray) -> float:
    """The probability (0-1) that the speech in `audio_16k` (1-D float samples in [-1, 1] at
    16 kHz: the turn's audio up to now, any length; only its last 8 s count) is a finished
    turn. Thread-safe (onnxruntime's `run` is).

    Raises:
        ValueError: `audio_16k` is not 1-D.
        FileNotFoundError: see `model_path`.
    """
    samples = np.asarray(audio_16k, dtype=np.float32)
    if samples.ndim != 1:
        raise ValueError("audio_16k must be a 1-D array")
    samples = samples[-WINDOW_SAMPLES:]
    if samples.size < WINDOW_SAMPLES:
        samples = np.pad(samples, (WINDOW_SAMPLES - samples.size, 0))
    samples = (samples - samples.mean()) / np.sqrt(samples.var() + _NORM_EPS)
    session, features = _load()
    log_mel = features(samples, padding=0)[np.newaxis, :, : WINDOW_SAMPLES // 160]
    output = session.run(None, {"input_features": log_mel.astype(np.float32)})[0]
    return float(np.asarray(output).reshape(-1)[0])
