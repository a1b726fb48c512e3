"""Heard-text calibration: keep in history exactly the part of a spoken reply that was heard.

Public API, re-exported lazily (PEP 562) so that importing the sans-I/O parts (`word_marks`,
`units`, `align`) does not load numpy-heavy or network modules (`local_asr`, httpx):

- `history_calibration`: HeardTextSnapshot, HistoryCalibrationPolicy, HeardCut, CalibrationView,
  CalibrationSession, HistoryCalibration;
- `policies`: marks_policy, asr_policy, ratio_policy, auto_policy, make_policy;
- `asr`: Transcriber; `local_asr`: LocalWhisperTranscriber; `remote_asr`: RemoteTranscriber;
- `word_marks`: WordMark.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from calibration.cpu_numerics import pin_cpu_numerics

pin_cpu_numerics()

if TYPE_CHECKING:
    from calibration.asr import Transcriber
    from calibration.history_calibration import (
        CalibrationSession,
        CalibrationView,
        HeardCut,
        HeardTextSnapshot,
        HistoryCalibration,
        HistoryCalibrationPolicy,
    )
    from calibration.local_asr import LocalWhisperTranscriber
    from calibration.policies import (
        asr_policy,
        auto_policy,
        make_policy,
        marks_policy,
        ratio_policy,
    )
    from calibration.remote_asr import RemoteTranscriber
    from calibration.word_marks import WordMark

_EXPORTS = {
    "CalibrationSession": "history_calibration",
    "CalibrationView": "history_calibration",
    "HeardCut": "history_calibration",
    "HeardTextSnapshot": "history_calibration",
    "HistoryCalibration": "history_calibration",
    "HistoryCalibrationPolicy": "history_calibration",
    "LocalWhisperTranscriber": "local_asr",
    "RemoteTranscriber": "remote_asr",
    "Transcriber": "asr",
    "WordMark": "word_marks",
    "asr_policy": "policies",
    "auto_policy": "policies",
    "make_policy": "policies",
    "marks_policy": "policies",
    "ratio_policy": "policies",
}

__all__ = [
    "CalibrationSession",
    "CalibrationView",
    "HeardCut",
    "HeardTextSnapshot",
    "HistoryCalibration",
    "HistoryCalibrationPolicy",
    "LocalWhisperTranscriber",
    "RemoteTranscriber",
    "Transcriber",
    "WordMark",
    "asr_policy",
    "auto_policy",
    "make_policy",
    "marks_policy",
    "ratio_policy",
]


def __getattr__(name: str) -> object:
    """Import the submodule that defines `name` on first access (AttributeError if none)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'calibration' has no attribute {name!r}")
    value = getattr(import_module(f"calibration.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
