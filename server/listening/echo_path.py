"""The echo path: how the assistant's own reply reaches the microphone, learned where it is
clearly the echo, held, and the measure of what it explains (issue 24).

A candidate is the echo only where the reply's audio at the echo path's lag and gain explains
its energy; speech energy the echo does not explain is the person, whatever the envelopes'
correlation. The path is *not* measured on the candidate (its lead-in may already hold the
person's first syllable, and a person's onset can line up with some reply word at some lag:
a Piper "Stop." with no echo in the microphone at all correlated 0.81-0.92 with the reply at a
580 ms lag). It is learned from stretches the reply alone explains (`learn_path`) and held
(`EchoPath`); where the reply played loud and the microphone heard nothing of it (headphones,
a digitally silent microphone, a noise floor only), the held path explains nothing, and all
speech is the person. How a candidate is judged against the held path:
`server.listening.echo.EchoDetector.is_echo`.

Levels are band levels (`server.listening.band_envelope`): (frames, bands) arrays in dB re
full scale, one frame per `FRAME_MS`. Sans-I/O: plain objects and numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from server.listening.band_envelope import FRAME_MS

DYNAMIC_RANGE_DB = 50.0
"""Band levels more than this below the loudest one of an analysed stretch are raised to that
floor, so that the depth of silences (digital zero in the reply, a noise floor in the
microphone) does not count as a difference."""

ECHO_CORRELATION = 0.8
"""A stretch whose best correlation with the reply reaches this is echo.

Measured through `server.listening.input_speech.InputSpeechDetector` (Silero + `TurnDetector`, 40 ms
appends at 24 kHz, playing position known to +-20 ms) on a 6 s Piper reply over a -65 dBFS
peak pink noise floor, every gate question counted: the reply's own echo, delayed 55, 155 and
405 ms (off the 10 ms grid), at -40..0 dBFS peak, with and without a simulated AGC (10 ms frames
pulled toward -25 dBFS RMS with a 300 ms time constant, up to +30 dB), correlated 0.882-1.0 and
never started a turn. A different sentence (Piper, espeak-ng en-us and en-us+f3) at -6 or -15
dBFS peak over that echo at about -25 dBFS peak: the correlation falls from 0.97-0.99 at the
onset to 0.5-0.8 within 100-250 ms; the turn started 180-474 ms after the onset (median 256;
with 0.85: median 234, same worst case; with 0.7 and 0.6 the worst cases grew past 1.1 s). An
echo at -50 dBFS peak without AGC, 15 dB over that noise floor, correlated down to 0.77 and
could start a turn: its band levels are then mostly the noise floor (since then compared above
the noise floor, `NOISE_MARGIN_DB`, with `WEAK_ECHO_CORRELATION` for what remains)."""

NOISE_MARGIN_DB = 6.0
"""Band levels less than this above the noise floor are raised to it, in the microphone and in
the reference mapped onto the microphone's level: what the noise masks is not compared. Without
it an echo 15 dB over a pink noise floor correlated 0.5-0.86 (its quiet frames are the noise's
random levels, the reference's are its own); with it 0.9 and above."""

REVERB_DECAY_DB_PER_FRAME = 60.0 * FRAME_MS / 500
"""Decay of the reverberant reference (dB per frame): a room with a 500 ms reverberation time
(RT60, the time sound takes to decay by 60 dB; living rooms and offices are 300-600 ms). The
reference is compared dry and with this tail (every level at least the previous frame's minus
the decay), and the better match counts: the room keeps the end of every word, and of the
reply, sounding after the reply's audio fell silent."""

EXCESS_DB = 6.0
"""A microphone frame this far above the echo plus the noise (band mean, dB) holds someone
else: measured, echo-only frames stayed under 0.5 dB, a person over the echo reached 6 dB within
20-40 ms of the onset and 10-18 dB later."""

UNEXPLAINED_SHARE = 0.1
"""Share of a candidate's frames above `EXCESS_DB` that makes it more than echo."""

MISSING_DB = 10.0
"""How far (dB, band mean) the microphone falls short of a supposed echo in a frame that
refutes it (`deficit_db`)."""

EXCESS_SLACK_FRAMES = 5
"""The echo explains a microphone frame with its loudest level within this many frames
(50 ms): the position the session estimates is playing jitters with the ACKs and appends
(measured over loopback on a loaded machine: tags spread over 100-400 ms within a second)."""

EXCESS_GAIN_RANGE_DB = 20.0
"""Reference frames within this of the reference's loudest (per band) set the echo's gain."""

LEARN_WINDOW_MS = 1500
"""Microphone audio (ms) one learning window spans: long enough that a reply's pauses and
words both fall in it, so that its echo gain is measured on many words."""

LEARN_STEP_MS = 250
"""Learning windows end at every multiple of this (ms of the microphone stream)."""

LEARN_GUARD_MS = 200
"""A candidate is judged with the path learned from windows ending at least this long (ms)
before its start: the candidate's own audio (and the voice onset Silero finds late, by up to
one 32 ms window and the 64 ms look-back) never teaches the path."""

SOUNDING_DB = -60.0
"""A reference frame sounds (the reply was really playing) when its loudest band reaches this
(dBFS); Piper's speech frames are -15 to -45 dB, its pauses digital silence."""

LEARN_MIN_SOUNDING_FRAMES = 50
"""Sounding reference frames (500 ms) a learning window needs to teach the path anything."""

LEARN_MIN_GAIN_FRAMES = 10
"""A band's gain in a learning window needs this many frames (`echo_gain`); with fewer, the
held path keeps its earlier gain for that band."""

LEARN_MIN_HEARD_SHARE = 0.3
"""A band's echo counts as heard in a learning window when at least this share of its loud
reference frames (`EXCESS_GAIN_RANGE_DB`) are heard above the noise floor: an echo is heard
wherever the reply is loud, a person's stray sound or a click only in a few frames (which would
otherwise set the echo's gain to the person's level)."""

LEARN_GAIN_QUANTILE = 0.5
"""The echo's gain in a learning window is the median of microphone minus reference (`echo_gain`):
an automatic gain control ramps the echo's gain up within a window, and a low percentile held it
at the ramp's start (measured: a 10 dB ramp over 1 s left the held gain 10.1-10.6 dB under the
echo 300 ms later, and the echo started a turn)."""

AGC_RISE_DB = 10.0
"""An automatic gain control may lift the echo by this much (dB, per band) above the held
path's gain within a candidate (`EchoDetector.is_echo`): Chromium's lifts a quiet echo by about
10 dB and keeps changing its gain."""

LAG_DRIFT_MS = 150
"""How far (ms) the lag may drift from the held path's within a reply
(`server.listening.echo.EchoDetector._searched_echo`): measured, 100 ms while a client waited
for audio without ACKs."""

FOLLOWED_CORRELATION = 0.9
"""Where an echo was heard and its lag held, a candidate correlating this well within
`LAG_DRIFT_MS` of that lag is the echo whatever its level (`EchoDetector._searched_echo`): a
page's own echo through Chromium's fake microphone, its gain lifted by auto gain and its file
running on while the page's playback stalled, correlated 0.93-0.94 with 31-35 % of its frames
6 dB over the held echo, and paused the reply (tests/test_browser_microphone.py). A person over
a heard echo correlated at most 0.81 (benchmarks/bench_interruptions.py); with no echo heard
(the issue's "Stop.", 0.81-0.92) this never applies."""


ONSET_RUN_FRAMES = 3
"""Consecutive frames of excess that mark a voice onset over the echo (30 ms): over `EXCESS_DB`
in `voice_over_echo`, over `server.listening.echo.ONSET_EXCESS_DB` in
`EchoDetector.voice_onset_ms`."""

VOICE_RISE_FRAMES = 5
"""Frames (50 ms) within which such a run must follow a frame the echo explains
(`voice_over_echo`): measured, a person over the echo reached 6 dB within 20-40 ms of the
onset (`EXCESS_DB`)."""

ONSET_EDGE_DB = 1.5
"""Excess (dB) up to which a frame counts as explained by the echo before a voice's onset
(`voice_over_echo`), and from which the frames right before an onset's run whose excess rises
toward it still belong to the voice: its rising edge, e.g. the breath of an "h"
(`EchoDetector.voice_onset_ms`)."""


@dataclass(frozen=True, slots=True, eq=False)
class EchoPath:
    """The held echo path: what the microphone hears of the playing reply.

    Attributes:
        gain_db: per band (5), microphone level minus the reference's (dB); -inf: the reply is
            not heard in that band (the echo is below the noise floor, or there is none).
        lag_ms: how long after its estimated playing time the microphone hears the reply (ms,
            within `server.listening.mic_timeline.LAG_RANGE_MS`); None when no band is heard
            (no echo to align; the loudest reference over the whole lag range is taken, at
            -inf).
    """

    gain_db: np.ndarray
    lag_ms: int | None


def learn_path(held: EchoPath | None, mic: np.ndarray, aligned: np.ndarray, tail: np.ndarray,
               floor: np.ndarray, correlation: float, lag_ms: int,
               sounded_at_every_lag: bool) -> EchoPath | None:
    """The path a learning window teaches, or None when it teaches nothing.

    Args:
        held: the path held so far (None: none yet).
        mic: the window's microphone levels (frames, bands).
        aligned: the reference's levels at the window's best lag (frames, bands), as played
            (dry, or with the reverberant tail when that matched the window better).
        tail: the same with the reverberant tail (`reverberant`): what the echo explains. The
            gain is measured on `aligned`: against the tail, the frames where the reference
            decays and the microphone does not (no reverberation) pulled a median gain 5 dB low
            in the top band (measured, a dry echo lifted by an AGC; it then started a turn).
        floor: the microphone's noise floor plus `NOISE_MARGIN_DB` per band (dB).
        correlation: the window's best correlation with the reply (`best_lag`).
        lag_ms: the lag of that correlation (ms).
        sounded_at_every_lag: the reply sounded in at least `LEARN_MIN_SOUNDING_FRAMES` of the
            window's frames at every lag searched (`sounds_at_every_lag`): an echo of any
            lag the loudspeaker may have would be in the window.

    The window teaches when at least `LEARN_MIN_SOUNDING_FRAMES` of its reference frames sound
    (`SOUNDING_DB`) and the reply (`tail`) at its own gain (`echo_gain` on `aligned`; a band
    heard in less than `LEARN_MIN_HEARD_SHARE` of its loud frames is not heard: -inf) plus the
    noise floor explain the whole window: less than `UNEXPLAINED_SHARE` of its heard frames
    (the reply sounding there, or the microphone `EXCESS_DB` above them) are `EXCESS_DB` above
    them (so nobody else spoke in it; the share is not diluted by the silence of a window
    that began before the session's first reply). The new path has that gain (bands
    measured on fewer than `LEARN_MIN_GAIN_FRAMES` frames keep the held gain) and the window's
    lag; a heard echo teaches only when the correlation reaches `ECHO_CORRELATION` (else its
    lag is not known, and a loud echo at an unknown lag, each frame the loudest reference over
    the whole lag range, explained a person over it: measured, a 0 dB echo hid a person at
    -6 dBFS); an echo heard in no band teaches a path with no lag (nothing to align), but
    only when `sounded_at_every_lag`: at the start of a reply the reply sounds in the window
    at short lags only, and a loudspeaker 600-700 ms late (Bluetooth) has not been heard yet.
    Taught there, the path said "no echo" (replacing the lag held from the reply before), the
    echo's first words then started a turn 0.9 s into every reply, and each answer was cut by
    its own echo (tester F2: 14 replies in 45 s, 13 cut).
    """
    if int(np.sum(aligned.max(axis=1) >= SOUNDING_DB)) < LEARN_MIN_SOUNDING_FRAMES:
        return None
    gain, heard, loud = echo_gain(mic, aligned, floor, LEARN_GAIN_QUANTILE)
    gain = np.where(heard >= LEARN_MIN_HEARD_SHARE * np.maximum(loud, 1), gain, -np.inf)
    unexplained = excess_db(mic, tail, gain, floor) >= EXCESS_DB
    heard = unexplained | (aligned.max(axis=1) >= SOUNDING_DB)
    if np.count_nonzero(unexplained) >= UNEXPLAINED_SHARE * np.count_nonzero(heard):
        return None
    if held is not None:
        gain = np.where(loud >= LEARN_MIN_GAIN_FRAMES, gain, held.gain_db)
    if not np.isfinite(gain).any():
        return EchoPath(gain, None) if sounded_at_every_lag else None
    return EchoPath(gain, lag_ms) if correlation >= ECHO_CORRELATION else None


def sounds_at_every_lag(block: np.ndarray, count: int) -> bool:
    """True when the reference sounds (`SOUNDING_DB`) in at least `LEARN_MIN_SOUNDING_FRAMES` of
    the `count` frames of every lag's window of a lag search's `block` (count + lags - 1
    frames, bands; dB: `best_lag`)."""
    sounding = np.concatenate(([0], np.cumsum(block.max(axis=1) >= SOUNDING_DB)))
    return bool(np.min(sounding[count:] - sounding[:-count]) >= LEARN_MIN_SOUNDING_FRAMES)


def aligned_at(block: np.ndarray, count: int, max_lag: int, lag_ms: int | None) -> np.ndarray:
    """The reference's levels (count, bands) at `lag_ms` from a lag search's `block` (count +
    lags - 1 frames, window i at lag max_lag - i frames: `best_lag`); with None, each frame the
    loudest over every lag of the block."""
    if lag_ms is None:
        windows = np.lib.stride_tricks.sliding_window_view(block, count, axis=0)
        return windows.max(axis=0).T
    index = max_lag - lag_ms // FRAME_MS
    return block[index:index + count]


def reverberant(levels: np.ndarray) -> np.ndarray:
    """`levels` (frames, bands) with a reverberant tail: each frame at least the previous
    one's level minus `REVERB_DECAY_DB_PER_FRAME` (a running maximum of level + decay x frame,
    minus decay x frame)."""
    ramp = REVERB_DECAY_DB_PER_FRAME * np.arange(len(levels))[:, None]
    return np.maximum.accumulate(levels + ramp, axis=0) - ramp


def comparable_levels(mic: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """The microphone's levels (frames, bands) as `best_lag` compares them: raised to the noise
    `floor` and to `DYNAMIC_RANGE_DB` below their loudest, each band's mean removed."""
    mic = np.maximum(mic, np.maximum(floor, mic.max() - DYNAMIC_RANGE_DB))
    return mic - mic.mean(axis=0)


def best_lag(block: np.ndarray, mic: np.ndarray, mic_top: np.ndarray, floor: np.ndarray,
              max_lag: int) -> tuple[float, int]:
    """The lag (within `block`) at which the reference correlates best with `mic`: (Pearson's
    r in [-1, 1], 0.0 when either is constant; lag in ms).

    Args:
        block: reference levels (count + lags - 1, bands): the window of lag index i is
            block[i : i + count].
        mic: the microphone's levels (count, bands), floored and centred per band.
        mic_top: the microphone's loudest level per band before flooring (dB).
        floor: the microphone's noise floor plus `NOISE_MARGIN_DB` per band (dB).
        max_lag: the lag (frames) of window 0.

    Each window is mapped to the microphone's level (per band, its loudest frame to the
    microphone's loudest), floored where that puts it under `floor`, and within
    `DYNAMIC_RANGE_DB` of the block's loudest, then correlated with `mic` (Pearson's r with
    per-band means; `mic` is centred, so the numerator needs no centred windows, and their
    centred energy is the sum of squares minus count x mean^2).
    """
    count = len(mic)
    windows = np.lib.stride_tricks.sliding_window_view(block, count, axis=0)
    floors = np.maximum(floor - (mic_top - windows.max(axis=2)),
                        block.max() - DYNAMIC_RANGE_DB)
    windows = np.maximum(windows, floors[:, :, None])
    numerator = np.einsum("lbn,nb->l", windows, mic)
    sums = windows.sum(axis=2)
    centred = np.maximum(np.einsum("lbn,lbn->lb", windows, windows) - sums * sums / count,
                         0.0).sum(axis=1)
    energy = centred * float(np.sum(mic * mic))
    scores = np.where(energy > 1e-6, numerator / np.sqrt(np.maximum(energy, 1e-6)), 0.0)
    best = int(np.argmax(scores))
    return float(scores[best]), (max_lag - best) * FRAME_MS


def echo_gain(mic: np.ndarray, aligned: np.ndarray, floor: np.ndarray,
              quantile: float = 0.25, sounding_only: bool = False,
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The echo's gain per band (dB, microphone over reference; -inf: no audible echo), with
    the number of frames it was measured on and of loud reference frames, per band.

    Args:
        mic: the microphone's levels (frames, bands).
        aligned: the reference's levels at the best lag (frames, bands).
        floor: the noise floor plus `NOISE_MARGIN_DB` per band.
        quantile: which quantile of the differences is the gain.
        sounding_only: only frames where the reference sounds (`SOUNDING_DB`) are loud: the
            reference's silence (before the reply began, at a long lag) is no echo's level.

    The `quantile` (the lower one, no interpolation) of microphone minus reference over the
    frames where the reference is loud (within `EXCESS_GAIN_RANGE_DB` of its loudest) and the
    microphone above `floor`; a band without such frames has no audible echo. On a stretch
    that may hold a person (a candidate's lead-in), the 25th percentile: frames where someone
    talks over the echo raise the difference, never lower it. On a learning window, which
    teaches only when nobody spoke in it, `LEARN_GAIN_QUANTILE`.
    """
    loud = aligned >= aligned.max(axis=0) - EXCESS_GAIN_RANGE_DB
    if sounding_only:
        loud &= aligned.max(axis=1, keepdims=True) >= SOUNDING_DB
    audible = loud & (mic >= floor)
    differences = np.sort(np.where(audible, mic - aligned, np.inf), axis=0)
    counts = audible.sum(axis=0)
    rank = np.floor((np.maximum(counts, 1) - 1) * quantile).astype(int)
    picked = differences[rank, np.arange(mic.shape[1])]
    return np.where(counts > 0, picked, -np.inf), counts, loud.sum(axis=0)


def excess_db(mic: np.ndarray, aligned: np.ndarray, gain: np.ndarray,
               floor: np.ndarray) -> np.ndarray:
    """Per frame, how far the microphone (frames, bands) rises above what the echo (`aligned`
    reference levels plus `gain`, each frame the loudest within `EXCESS_SLACK_FRAMES` of it:
    the playing position is an estimate) and the noise (`floor`) explain, added in power (dB,
    mean over bands of the positive part)."""
    return np.maximum(mic - explained_db(aligned, gain, floor), 0.0).mean(axis=1)


def explained_db(aligned: np.ndarray, gain: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """The levels (frames, bands; dB) the echo (`echo_db` of the `aligned` reference levels at
    `gain`) and the noise (`floor`, per band) explain together, added in power."""
    return 10.0 * np.log10(10.0 ** (echo_db(aligned, gain) / 10.0) + 10.0 ** (floor / 10.0))


def deficit_db(mic: np.ndarray, aligned: np.ndarray, gain: np.ndarray,
               floor: np.ndarray) -> np.ndarray:
    """Per frame, how far the microphone (frames, bands) falls short of an echo that surely
    sounds there (dB, mean over bands of the positive part; bands of -inf gain add nothing):
    the `aligned` reference levels plus `gain`, each frame the quietest within
    `EXCESS_SLACK_FRAMES` of it (the playing position is an estimate: a word's edge may fall
    anywhere in that slack), against the microphone raised to the noise `floor`. An echo cannot
    fall silent while the reply it repeats plays on: where the reply is loud, a microphone
    at its noise floor refutes an echo of that gain at that lag."""
    sure = _slack_window(aligned).min(axis=2)
    with np.errstate(invalid="ignore"):
        short = np.where(np.isfinite(gain), sure + gain - np.maximum(mic, floor), 0.0)
    return np.maximum(np.nan_to_num(short, nan=0.0, neginf=0.0), 0.0).mean(axis=1)


def voice_over_echo(mic: np.ndarray, aligned: np.ndarray, gain: np.ndarray,
                    floor: np.ndarray) -> bool:
    """True when a person's voice begins where the echo sounds: a run of `ONSET_RUN_FRAMES`
    microphone frames (frames, bands) `EXCESS_DB` above the echo and the noise (`excess_db`
    at `gain` on the `aligned` reference) starts within `VOICE_RISE_FRAMES` after a frame the
    echo explains to `ONSET_EDGE_DB`, on a frame where the echo is heard (`echo_db` over the
    noise `floor` by `NOISE_MARGIN_DB` in some band).

    The echo's envelope still correlates with the microphone's there (a "Wait." whose onset
    fell on a loud reply syllable: 0.91-0.93, 20-36 % of the frames 6-10 dB over the held
    echo, tester F1), so `FOLLOWED_CORRELATION` alone took it for the echo. An echo does not
    rise 6 dB over its own path within 50 ms where it sounds: an auto gain lifts it over
    hundreds of ms, and an echo heard while the page's playback stalled (the case behind
    `FOLLOWED_CORRELATION`) rises where the reference as played is silent."""
    excess = excess_db(mic, aligned, gain, floor)
    heard = np.any(echo_db(aligned, gain) > floor + NOISE_MARGIN_DB, axis=1)
    for start in run_starts(excess >= EXCESS_DB, ONSET_RUN_FRAMES):
        before = excess[max(start - VOICE_RISE_FRAMES, 0):start]
        if heard[start] and before.size and before.min() <= ONSET_EDGE_DB:
            return True
    return False


def echo_db(aligned: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """The echo's levels (frames, bands; dB, -inf: none) predicted from the `aligned`
    reference levels and the echo's `gain` per band: each frame the loudest reference level
    within `EXCESS_SLACK_FRAMES` of it (the playing position is an estimate), plus the gain."""
    return _slack_window(aligned).max(axis=2) + gain


def _slack_window(levels: np.ndarray) -> np.ndarray:
    """(frames, bands, 2 `EXCESS_SLACK_FRAMES` + 1): each frame's levels (frames, bands; dB)
    and those within `EXCESS_SLACK_FRAMES` of it, the edges repeated."""
    slack = EXCESS_SLACK_FRAMES
    padded = np.pad(levels, ((slack, slack), (0, 0)), mode="edge")
    return np.lib.stride_tricks.sliding_window_view(padded, 2 * slack + 1, axis=0)


def run_starts(flags: np.ndarray, length: int) -> np.ndarray:
    """The indices (ascending, int) where `length` consecutive True values of `flags`
    (1-D bool, one per frame) begin; empty when there are none or `flags` is shorter."""
    if flags.size < length:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.lib.stride_tricks.sliding_window_view(flags, length).all(axis=1))
