"""The fast-speech tables of `benchmarks.bench_interruptions` (issue 24: a quickly said "Stop."
or "No." was never heard, with a reply playing or with none): the short words of
tests/fast_speech.py `FAST_WORDS` (espeak-ng at 250-300 words/min, Piper at length scale
0.6-0.8: 120-330 ms of sound) through the server's VAD
(`server.listening.input_speech.InputSpeechDetector`, 40 ms appends).

- With no reply: each word at `IDLE_PEAKS_DBFS` peak, 1.5 s into a -60 dBFS RMS pink floor and
  a digitally silent one, at `IDLE_SHIFTS_MS` offsets (Silero's 32 ms windows fall on the word
  differently); heard when a turn starts whose audio begins from `IDLE_EARLY_MS` before the
  voice onset (-40 dBFS) to 600 ms after it, and any other turn is false.
- Over the reply: `over_reply_table` with the caller's `interruption` (bench_interruptions'
  judgement of one run) at -6 dBFS peak at every position, and at -16 dBFS at every third.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from benchmarks.tables import print_table
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import TurnDetection
from server.listening.turn_events import SpeechStarted
from tests import speech_fixtures as fx
from tests.echo_room import Room
from tests.fast_speech import FAST_WORDS, describe, fast_speech

IDLE_PEAKS_DBFS = (-3.0, -10.0, -16.0)
IDLE_SHIFTS_MS = (0, 11, 21)
IDLE_FLOORS_DBFS = (-60.0, None)
IDLE_EARLY_MS = 400
"""How far before the -40 dBFS onset a turn's audio may begin with no reply (ms): the prefix
padding (300) and up to 100 ms of Silero's first window and its lookback over a soft onset
(espeak-ng en-029 "Hey." over digital silence: its first window, at 0.50, began 54 ms before
it)."""
OVER_REPLY_PEAKS_DBFS = (-6.0, -16.0)
APPEND_MS = 40
INPUT_RATE_HZ = 16_000

Interruption = Callable[[np.ndarray, int, Room], tuple[bool, int]]
"""(person at 16 kHz, ms played when they start, room) -> (heard, false barge-ins)."""


def idle_starts(mic: np.ndarray) -> list[int]:
    """`audio_start_ms` of every turn the server VAD starts on `mic` (16 kHz), no reply playing."""
    detector = InputSpeechDetector(TurnDetection(), INPUT_RATE_HZ, 0)
    pcm16 = fx.to_pcm16(mic)
    step = INPUT_RATE_HZ * 2 * APPEND_MS // 1000
    return [event.audio_start_ms for start in range(0, len(pcm16), step)
            for event in detector.feed(pcm16[start:start + step], False)
            if isinstance(event, SpeechStarted)]


def idle_table() -> tuple[int, int]:
    """Print the no-reply table; return (missed, false turns)."""
    rows, missed_runs, missed, false = [], [], 0, 0
    for text, engine, voice, pace in FAST_WORDS:
        word = fast_speech(text, engine, voice, pace)
        row: list[object] = [text, describe(engine, voice, pace),
                             round(np.subtract(*fx.active_span_ms(word)[::-1]))]
        for peak in IDLE_PEAKS_DBFS:
            person = fx.at_peak_dbfs(word, peak)
            misses = 0
            for floor in IDLE_FLOORS_DBFS:
                for shift in IDLE_SHIFTS_MS:
                    at_ms = 1500 + shift
                    mic = fx.place(person, at_ms, 1500)
                    if floor is not None:
                        mic = fx.with_noise_floor(mic, np.random.default_rng(shift), floor)
                    onset_ms = at_ms + fx.active_span_ms(person)[0]
                    starts = idle_starts(mic)
                    heard = [s for s in starts
                             if onset_ms - IDLE_EARLY_MS <= s <= onset_ms + 600]
                    false += len(starts) - len(heard[:1])
                    if not heard:
                        misses += 1
                        missed_runs.append(f"{text} {describe(engine, voice, pace)} {peak:.0f} "
                                           f"dBFS +{shift} ms floor {floor} (onset "
                                           f"{onset_ms:.0f} ms, turns from {starts})")
            row.append(misses)
            missed += misses
        rows.append(tuple(row))
    runs = len(FAST_WORDS) * len(IDLE_PEAKS_DBFS) * len(IDLE_FLOORS_DBFS) * len(IDLE_SHIFTS_MS)
    print_table(f"Fast short words, no reply playing: missed {missed} of {runs} (target 0), "
                f"other turns {false} (target 0)",
                ("word", "voice", "sound ms",
                 *(f"missed at {peak:.0f} dBFS of {len(IDLE_FLOORS_DBFS) * len(IDLE_SHIFTS_MS)}"
                   for peak in IDLE_PEAKS_DBFS)), rows)
    if missed_runs:
        print("missed:", "; ".join(missed_runs))
    return missed, false


def over_reply_table(interruption: Interruption, positions: tuple[int, ...],
                     rooms: tuple[Room, ...]) -> tuple[int, int]:
    """Print the over-the-reply table (every word at `OVER_REPLY_PEAKS_DBFS[0]` at every
    position, at the others at every third, in every room); return (missed, false)."""
    rows, missed_runs, missed, false = [], [], 0, 0
    runs = 0
    for text, engine, voice, pace in FAST_WORDS:
        word = fast_speech(text, engine, voice, pace)
        row: list[object] = [text, describe(engine, voice, pace)]
        for index, peak in enumerate(OVER_REPLY_PEAKS_DBFS):
            person = fx.at_peak_dbfs(word, peak)
            at = positions if index == 0 else positions[::3]
            for room in rooms:
                misses = 0
                for played_ms in at:
                    heard, early = interruption(person, played_ms, room)
                    false += early
                    runs += 1
                    if not heard:
                        misses += 1
                        missed_runs.append(f"{text} {describe(engine, voice, pace)} {peak:.0f} "
                                           f"dBFS @{played_ms} ({room.describe()})")
                row.append(f"{misses}/{len(at)}")
                missed += misses
        rows.append(tuple(row))
    print_table(f"Fast short words over the reply: missed {missed} of {runs} (target 0), false "
                f"barge-ins before the voice {false} (target 0)",
                ("word", "voice", *(f"missed {peak:.0f} dBFS, {room.describe()}"
                                    for peak in OVER_REPLY_PEAKS_DBFS for room in rooms)), rows)
    if missed_runs:
        print("missed:", "; ".join(missed_runs))
    return missed, false
