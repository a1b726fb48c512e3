"""Where a person's voice begins over the reply's echo, on the excess of the microphone over the
echo the echo detector predicts (`server.listening.echo.EchoDetector.voice_onset_ms`: dB per
10 ms frame, `server.listening.held_echo.EchoMatch.excess_db`): the first run loud enough to be
no echo, moved back over its rising edge and, with a held echo path, over a stop consonant's
closure to the sound before it ("s" in "Stop."). Sans-I/O: numpy only.
"""

from __future__ import annotations

import numpy as np

from server.listening.echo_path import EXCESS_DB, ONSET_EDGE_DB, ONSET_RUN_FRAMES, run_starts

ONSET_EXCESS_DB = 10.0
"""Excess (dB) that marks a voice onset, higher than `EXCESS_DB`: the echo's gain measured
before the candidate (`EchoDetector.voice_onset_ms`) may be a few dB off later on (measured
over loopback: echo-only frames up to 9 dB, a person at -12 dBFS peak 11-30 dB)."""


CUT_RUN_FRAMES = 2
"""Frames (20 ms) reaching `EXCESS_DB` at the end of the audio searched that mark a voice onset
when no run of `ONSET_RUN_FRAMES` was found (`EchoDetector.voice_onset_ms`): a loud person
triggers the VAD within a window of their first word, and the turn asks for its onset then,
before such a run could be complete. Measured over
loopback (tests/test_echo_server.py, Piper "What was the name of that street?" at -12 dBFS
peak over a -30 dB echo): the window ended 40 ms after the onset with only its last two frames
10 dB over the echo (9.8, 13.0, 15.3 dB), no run was found, and the turn's audio began with the
300 ms prefix padding of echo in 4 of 6 runs."""


CLOSURE_FRAMES = 12
"""The longest gap (10 ms frames) between a consonant and the vowel after it that
`before_closure` looks back over: a voiceless stop's closure lasts 50-120 ms (the "t" of
"stop"; Piper's "Stop." at -10 dB: "s" 3510-3580 ms, closure 3590-3640, vowel from 3650)."""

CONSONANT_MAX_FRAMES = 15
"""The longest consonant (10 ms frames) `before_closure` takes: an "s" or "sh" lasts 60-150
ms (Piper's "s" of "Stop." 70 ms); a longer run is someone else talking in the room."""

CONSONANT_PEAK_DB = 4.0
"""The excess (dB) a run before a closure must reach to be the person's consonant: over a held
echo path, echo-only frames stay under 0.5 dB (`EXCESS_DB`'s measure); Piper's "s" of "Stop."
over a -10 dB echo reached 2.7-7.0 dB over 70 ms."""


def onset_run_start(excess: np.ndarray, thresholds: tuple[float, ...]) -> int | None:
    """Where `EchoDetector.voice_onset_ms`'s run begins in `excess` (dB per 10 ms frame over
    the echo and the noise): the first run of `ONSET_RUN_FRAMES` frames reaching the first
    of `thresholds` (dB) that has one; else `CUT_RUN_FRAMES` frames at the end of `excess`,
    cut off by the end of the audio, that reach `EXCESS_DB` (a voice's first 20-30 ms rise
    through it: offline, with no path held, Piper "What was the name of that street?" at -12 dBFS
    had 7.9, 10.6 and 8.3, 11.0 dB 40 ms after its onset, and the stretch before it 0-1.5 dB);
    None when neither is there."""
    for threshold in thresholds:
        found = run_starts(excess >= threshold, ONSET_RUN_FRAMES)
        if found.size:
            return int(found[0])
    if excess.size >= CUT_RUN_FRAMES and bool((excess[-CUT_RUN_FRAMES:] >= EXCESS_DB).all()):
        return excess.size - CUT_RUN_FRAMES
    return None


def before_closure(excess: np.ndarray, first: int, index: int) -> int:
    """`index` (a frame of `excess`, dB per 10 ms frame, where a voice's run begins) moved back
    over one gap of at most `CLOSURE_FRAMES` frames under `ONSET_EDGE_DB` before it to a
    consonant: a run of `ONSET_RUN_FRAMES` to `CONSONANT_MAX_FRAMES` frames at or over
    `ONSET_EDGE_DB` that reaches `CONSONANT_PEAK_DB`, with a frame under `ONSET_EDGE_DB` before
    it at or after `first` (a run reaching back to `first`, or a longer one, is a talker in the
    room, not a consonant: a talk radio under the echo was taken into a "Wait."'s turn). A
    short word opening on a consonant before a stop ("Stop.", "Sky", "Spot") began at its vowel
    without it: the turn's audio started 100-140 ms into "Stop." over a -10 dB echo and tiny.en
    read the echo's words ("that's close"). Measured offline
    (`benchmarks/bench_echo_transcripts.py`, 120 runs, with the echo suppressed under the whole
    turn, tiny.en greedy as the server reads a turn): exact transcripts 54 -> 68 of 120, empty
    2 -> 0."""
    gap_end = index - 1
    while gap_end >= max(first, index - CLOSURE_FRAMES) and excess[gap_end] < ONSET_EDGE_DB:
        gap_end -= 1
    if gap_end < first or excess[gap_end] < ONSET_EDGE_DB:
        return index
    start = gap_end
    while start > first and excess[start - 1] >= ONSET_EDGE_DB:
        start -= 1
    length = gap_end - start + 1
    if (start == first or not ONSET_RUN_FRAMES <= length <= CONSONANT_MAX_FRAMES
            or excess[start:gap_end + 1].max() < CONSONANT_PEAK_DB):
        return index
    return start


def onset_index(excess: np.ndarray, first: int, held: bool) -> int | None:
    """The frame of `excess` (dB per 10 ms frame over the echo and the noise) at or after
    `first` where the person's voice begins: `onset_run_start` (over `ONSET_EXCESS_DB`, and
    with a held echo path (`held`) over `EXCESS_DB` when there is no such run), moved back over
    the frames right before it whose excess rises toward it from `ONSET_EDGE_DB` (a soft
    onset), and with a held path over a stop's closure (`before_closure`; a lead-in's guess of
    the echo leaves echo-only frames up to 9 dB, too loud to tell a consonant). None when no
    run is found."""
    thresholds = (ONSET_EXCESS_DB, EXCESS_DB) if held else (ONSET_EXCESS_DB,)
    start = onset_run_start(excess[first:], thresholds)
    if start is None:
        return None
    index = first + start
    while index > first and ONSET_EDGE_DB <= excess[index - 1] < excess[index]:
        index -= 1
    return before_closure(excess, first, index) if held else index
