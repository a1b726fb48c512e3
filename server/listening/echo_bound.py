"""The loudest echo the reply can be before an echo path is learned, and what it leaves
unexplained (issue 24: "Echo decided by what the echo explains").

In the first `server.listening.echo_path.LEARN_WINDOW_MS` of a session's first reply no path is
held: the echo is the reply's own audio at an unknown lag and gain. The gain is not free,
though: wherever the reply surely sounded loud (`echo_path.sure_levels`), the microphone heard
at least its echo, so at each lag the microphone's level minus the reply's there bounds the
echo's gain from above (`gain_bound`: a low quantile, as frames where someone talks over the
echo raise the difference and never lower it). Energy above that loudest echo, at the lag that
explains the stretch best, is no echo's: it is a person (`bounded_excess`). A stretch whose
only loud reference frames are under the person (their word over the reply's first word)
bounds the gain by the person's level and explains them: the verdict comes once the echo alone
was heard after them (`server.listening.echo.EchoDetector.echo_refuted`, asked until
`server.listening.vad.RECONSIDER_MS` after the candidate).

Levels are band levels (`server.listening.band_envelope`): (frames, bands) in dB. Sans-I/O:
plain numpy.
"""

from __future__ import annotations

import numpy as np

from server.listening.band_envelope import FRAME_MS
from server.listening.echo_path import (
    EXCESS_GAIN_RANGE_DB,
    SOUNDING_DB,
    loudest_levels,
    reverberant,
    sure_levels,
)

BOUND_QUANTILE = 0.25
"""The quantile (the lower one) of microphone minus the sure reference, over the frames where
the reference is loud, that bounds the echo's gain (`gain_bound`): as `echo_path.echo_gain` on a
stretch that may hold a person. A quarter of the loud frames may fall short of the echo (the
playing position's estimate jitters past `echo_path.EXCESS_SLACK_FRAMES`)."""

BOUND_MIN_FRAMES = 10
"""Loud sure reference frames (100 ms) a band needs to bound the echo's gain there by
`BOUND_QUANTILE`; with fewer (the reply just began), the loosest bound they give."""


def gain_bound(mic: np.ndarray, sure: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """The highest gain (dB per band) an echo of the reference can have, per lag.

    Args:
        mic: the microphone's levels (frames, bands).
        sure: the reference's sure levels at each lag (lags, frames, bands;
            `echo_path.sure_levels`).
        floor: the microphone's noise floor plus `NOISE_MARGIN_DB` per band (dB).

    Returns (lags, bands): the `BOUND_QUANTILE` quantile of the microphone (raised to `floor`:
    an echo under it bounds the gain as well) minus `sure`, over the frames where the reference
    sounds (its loudest band reaches `SOUNDING_DB`) and the band is within
    `EXCESS_GAIN_RANGE_DB` of its loudest at that lag; the loosest of them (the largest) with
    fewer than `BOUND_MIN_FRAMES` such frames; -inf with none (the reply is silent there at
    that lag: its echo explains nothing).
    """
    sounding = sure.max(axis=2, keepdims=True) >= SOUNDING_DB
    loud = sounding & (sure >= sure.max(axis=1, keepdims=True) - EXCESS_GAIN_RANGE_DB)
    heard = np.maximum(mic, floor)[None, :, :]
    differences = np.sort(np.where(loud, heard - sure, np.inf), axis=1)
    counts = loud.sum(axis=1)
    rank = np.floor((np.maximum(counts, 1) - 1) * BOUND_QUANTILE).astype(int)
    picked = np.take_along_axis(differences, rank[:, None, :], axis=1)[:, 0, :]
    loosest = np.where(loud, heard - sure, -np.inf).max(axis=1)
    return np.where(counts >= BOUND_MIN_FRAMES, picked, loosest)


def bounded_excess(
    mic: np.ndarray, block: np.ndarray, max_lag: int, floor: np.ndarray, threshold_db: float
) -> tuple[int, np.ndarray]:
    """How far the microphone rises above the loudest echo the reply can be: (lag ms, excess
    per frame in dB), at the lag where the fewest frames reach `threshold_db`.

    Args:
        mic: the microphone's levels (frames, bands).
        block: the reference's levels as played for every lag (frames + lags - 1, bands): the
            window of lag index i, block[i : i + frames], is at lag `max_lag` - i frames
            (`server.listening.mic_timeline.Stretch`).
        max_lag: the lag (frames) of window 0.
        floor: the microphone's noise floor plus `NOISE_MARGIN_DB` per band (dB).
        threshold_db: the excess that counts a frame unexplained when choosing the lag.

    At each lag the echo is the reference with its reverberant tail (`echo_path.reverberant`),
    each frame the loudest within the slack (`echo_path.loudest_levels`), at the gain bound
    (`gain_bound`); a frame's excess is how far the microphone rises above that echo plus the
    noise floor, added in power, in the band the echo explains least (the largest over the
    bands): a person's voice over the reply's first word
    stands out in some bands only (measured: `server.listening.echo.UNEXPLAINED_RUN_FRAMES`).
    With nothing to compare the excess is all zeros.
    """
    count = len(mic)
    if len(block) < count or count == 0:
        return 0, np.zeros(count)
    windows = np.lib.stride_tricks.sliding_window_view
    sure = windows(sure_levels(block), count, axis=0).transpose(0, 2, 1)
    loudest = windows(loudest_levels(reverberant(block)), count, axis=0).transpose(0, 2, 1)
    echo = loudest + gain_bound(mic, sure, floor)[:, None, :]
    with np.errstate(over="ignore"):
        explained = 10.0 * np.log10(10.0 ** (echo / 10.0) + 10.0 ** (floor / 10.0))
    excess = np.maximum(mic[None, :, :] - explained, 0.0).max(axis=2)
    total = excess.sum(axis=1)
    score = np.count_nonzero(excess >= threshold_db, axis=1) * (total.max() + 1.0) + total
    best = int(np.argmin(score))
    return (max_lag - best) * FRAME_MS, excess[best]
