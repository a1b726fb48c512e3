"""Where a voice begins over the echo (server/listening/voice_onset.py), on excess arrays (dB
per 10 ms frame over the echo the held path predicts) shaped as measured."""

from __future__ import annotations

import numpy as np

from server.listening.voice_onset import (
    CLOSURE_FRAMES,
    CONSONANT_MAX_FRAMES,
    before_closure,
    onset_index,
)

ECHO_ONLY = [0.0, 0.1, 0.0, 0.3, 0.0]
"""Echo-only frames over a held path: under 0.5 dB."""

S_OF_STOP = [0.4, 2.7, 4.6, 5.5, 5.9, 7.0, 6.8, 5.5, 2.4]
"""Piper's "s" of "Stop." over a -10 dB echo (offline, 3500-3580 ms)."""

CLOSURE = [0.0, 0.0, 0.0, 0.1, 0.9]
VOWEL = [4.8, 10.5, 11.7, 12.8, 14.2, 14.7, 15.1]


def test_the_onset_of_a_stop_is_its_s_before_the_closure() -> None:
    excess = np.array(ECHO_ONLY + S_OF_STOP + CLOSURE + VOWEL)
    vowel = len(ECHO_ONLY) + len(S_OF_STOP) + len(CLOSURE)
    s_run = len(ECHO_ONLY) + 1  # its 0.4 dB frame is under ONSET_EDGE_DB
    assert onset_index(excess, 0, held=False) == vowel
    assert onset_index(excess, 0, held=True) == s_run


def test_echo_ripples_and_faint_runs_before_a_vowel_are_not_a_consonant() -> None:
    faint = [1.6, 2.0, 3.1, 1.7]  # never CONSONANT_PEAK_DB
    short = [0.0, 6.0, 7.0, 0.0]  # under ONSET_RUN_FRAMES frames
    for before in (ECHO_ONLY, faint, short):
        excess = np.array(ECHO_ONLY + before + CLOSURE + VOWEL)
        vowel = len(ECHO_ONLY) + len(before) + len(CLOSURE)
        assert onset_index(excess, 0, held=True) == vowel, before


def test_a_consonant_further_back_than_a_closure_is_not_taken() -> None:
    gap = [0.0] * (CLOSURE_FRAMES + 1)
    excess = np.array(ECHO_ONLY + S_OF_STOP + gap + VOWEL)
    vowel = len(ECHO_ONLY) + len(S_OF_STOP) + len(gap)
    assert before_closure(excess, 0, vowel) == vowel


def test_a_run_reaching_back_to_the_search_start_or_longer_than_a_consonant_is_a_talker(
        ) -> None:
    """A talk radio under the echo: its speech before the person's vowel is no consonant."""
    excess = np.array(S_OF_STOP + CLOSURE + VOWEL)
    vowel = len(S_OF_STOP) + len(CLOSURE)
    assert before_closure(excess, 4, vowel) == vowel  # the run goes on before frame 4
    assert before_closure(excess, 0, vowel) == 1  # a quiet frame (0.4 dB) before the "s"
    talker = [0.0] + [5.0] * (CONSONANT_MAX_FRAMES + 1)
    excess = np.array(ECHO_ONLY + talker + CLOSURE + VOWEL)
    assert before_closure(excess, 0, len(ECHO_ONLY) + len(talker) + len(CLOSURE)) == (
        len(ECHO_ONLY) + len(talker) + len(CLOSURE))


def test_only_one_closure_is_looked_back_over() -> None:
    excess = np.array(ECHO_ONLY + S_OF_STOP + CLOSURE + S_OF_STOP + CLOSURE + VOWEL)
    second_s = len(ECHO_ONLY) + len(S_OF_STOP) + len(CLOSURE) + 1
    vowel = second_s - 1 + len(S_OF_STOP) + len(CLOSURE)
    assert before_closure(excess, 0, vowel) == second_s
