"""The echo gate before any echo path is learned: the first `LEARN_WINDOW_MS` of a session's
first reply (issue 24).

The echo path (`server.listening.echo_path`) is learned from 1.5 s windows the reply alone
explains; until the first one, the echo gate fell back on the envelopes' correlation, and a
correlation alone must not decide: a person's "Stop." with no echo in the microphone correlated
0.80-0.92 with some reply word at some lag and was taken for the echo anywhere in the first
1.5 s, and a -10 dB echo in a reverberant room, judged at the gain of a lead-in the reply had not
reached yet, started a turn 308 ms into a session.

What the microphone heard before a candidate is evidence (`EVIDENCE_MS`, ending
`LEARN_GUARD_MS` before it, so that the voice Silero finds late is not part of it). Where the
reply sounded in it (`reply_sounded`) and the microphone heard none of it (`heard_no_echo`: a
headset, a silent microphone), there is no echo, and a candidate is the person unless the noise
floor alone explains it (`server.listening.echo.EchoDetector._unlearned_echo`). Otherwise the
correlation rule stands until a path is learned. A prior path (the reply itself at -10 dB, the
loudest over every lag searched, with its reverberant tail) was measured as the judge of the
reply's first words and dropped: it explained a Piper "Stop." at -6 dBFS peak over a Piper reply
peaking at -2.4 dBFS (Piper's four words at five positions in four rooms: 35 of 80 missed
with it, 23 without, 29 with the correlation rule alone; `benchmarks/bench_interruptions.py`).

Levels are band levels (frames, bands) in dB re full scale (`server.listening.band_envelope`).
Sans-I/O: plain numpy.
"""

from __future__ import annotations

import numpy as np

from server.listening.echo_path import (
    EXCESS_DB,
    LEARN_MIN_SOUNDING_FRAMES,
    LEARN_WINDOW_MS,
    SOUNDING_DB,
    UNEXPLAINED_SHARE,
    excess_db,
)

EVIDENCE_MS = LEARN_WINDOW_MS
"""Microphone audio before a candidate (ms) that tells whether the microphone hears the reply
at all: as long as a learning window, so that the reply's words and pauses both fall in it."""

def reply_sounded(block: np.ndarray) -> bool:
    """True when the reply sounded in an evidence stretch: at least `LEARN_MIN_SOUNDING_FRAMES`
    of the reference frames played there (`block`, (frames, bands) in dB, the reference as
    played over every lag of a lag search) reach `SOUNDING_DB` in their loudest band."""
    return int(np.sum(block.max(axis=1) >= SOUNDING_DB)) >= LEARN_MIN_SOUNDING_FRAMES


def heard_no_echo(mic: np.ndarray, floor: np.ndarray) -> bool:
    """True when the microphone heard nothing but its noise floor in an evidence stretch: less
    than `UNEXPLAINED_SHARE` of its frames (`mic`, (frames, bands) in dB) rise `EXCESS_DB`
    above `floor` (the noise floor plus `NOISE_MARGIN_DB`, per band; mean over the bands, as
    `excess_db` takes it). An echo is heard wherever the reply is loud; a stray click or
    breath leaves a few frames."""
    return float(np.mean(excess_db(mic, np.full_like(mic, -np.inf), np.zeros(mic.shape[1]),
                                   floor) >= EXCESS_DB)) < UNEXPLAINED_SHARE
