"""Short interruptions over a Piper reply, and the reply's echo alone, through the server's VAD
(issue 24: a real "Stop" is never taken for the echo, and the echo never interrupts).

Table 1, interruptions: "Stop.", "Wait.", "No.", "Hold on." in three voices (Piper, espeak-ng
en-us and en-us+f3) at -6 dBFS peak, at `POSITIONS_MS` into the reply of tests/echo_microphone.py
(6.5 s, Piper), over a -60 dBFS RMS pink floor, once with no echo in the microphone and once
with the reply's echo 30 dB down, 150 ms late (tests/echo_room.py `Room`). The microphone from
`HISTORY_MS` before the person (the echo path is learned there) to `AFTER_MS` after is appended
in 40 ms pieces to `server.listening.input_speech.InputSpeechDetector` with the playing
position the session would estimate (+-20 ms), as tests/echo_microphone.py `turn_starts` does. A run
is heard when a turn starts whose audio begins from 350 ms before the voice onset (-40 dBFS) to
600 ms after it; a turn starting earlier is a false barge-in (the echo or the floor).

Table 2, the first 1.5 s of the session's first reply, before any echo path is learned: the
same words and voices at `EARLY_POSITIONS_MS` into the reply, the microphone streamed from the
session's start (the reply starts 1 s into it), with no echo over a pink or a digitally silent
floor, and over the reply's echo 30 dB down (150 ms late) and 10 dB down in a reverberant room
(250 ms late, 400 ms RT60).

Table 3, the echo alone: the whole reply heard back through rooms (-30 / -20 / -10 / -6 dB,
150 / 400 ms, dry and with a 400 ms RT60 tail, over -60 / -50 dBFS pink noise or a digitally
silent floor; and -10 dB 0-300 ms late with a 400 ms RT60 with the microphone on only 300 ms
before the reply, `EARLY_ECHO_ROOMS`) and through a simulated automatic gain control
(tests/echo_microphone.py `microphone`: the echo's gain rising 10 dB over its first second):
every turn started is a false barge-in.

Table 4, room sounds over the echo with nobody speaking: every sound of tests/room_sounds.py
(a cough, a clap, knocks, a dropped cup, a car horn, typing, a dog barking) at -10 and -6 dBFS
peak, 2.0 / 3.5 / 5.0 s into the reply, over its echo -30..-6 dB down, dry and with a 400 ms
RT60 tail (`SOUND_ROOMS`): every turn started is a false barge-in (issue 24, a tester's T1).
`--only-sounds` runs this table alone.

Table 5, words over loud echoes (a laptop's speakerphone with no echo cancellation): the words
and voices of table 1 at -6 dBFS peak, `LOUD_ECHO_POSITIONS_MS` into the reply, over its echo 10
and 6 dB down (150 ms late), dry and with a 400 ms RT60 tail (`LOUD_ECHO_ROOMS`): missed and
false barge-ins as in table 1. `--only-loud-echoes` runs this table alone.

Then the fast-word tables (`benchmarks.fast_word_tables`): short words said quickly, with no
reply and over the reply.

Prints the tables and the missed positions; exit status 1 when any interruption is missed or
any false barge-in happens. Offline and deterministic: counts do not depend on the machine's
load. About 14 minutes on 2 loaded cores (264 + 240 + 32 + 336 + 96 runs); `--quick` runs
Piper at 4 and 3 positions.

Run from the project root: `.venv/bin/python -m benchmarks.bench_interruptions`.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from benchmarks import fast_word_tables
from benchmarks.tables import print_table
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import TurnDetection
from server.listening.turn_events import SpeechStarted
from server.speech.resampling import resample
from tests import speech_fixtures as fx
from tests.echo_microphone import (
    APPEND_MS,
    LEAD_MS,
    OUTPUT_RATE_HZ,
    microphone,
    playing_position,
    reference,
    reply_ms,
    room_microphone,
)
from tests.echo_room import Room
from tests.room_sounds import ROOM_SOUNDS

WORDS = ("Stop.", "Wait.", "No.", "Hold on.")
VOICES = (("piper", None), ("espeak", "en-us"), ("espeak", "en-us+f3"))
POSITIONS_MS = tuple(range(1500, 7000, 500))
"""Where the person starts, ms after the reply started playing (11 positions)."""
HISTORY_MS = 3000
"""Microphone audio fed before the person starts (ms): the page's microphone was on that long."""
AFTER_MS = 1500
"""Microphone audio fed after the person starts (ms): a turn starts within 600 ms of the onset."""
INTERRUPTION_ROOMS = (Room(None, 150, -60.0), Room(-30.0, 150, -60.0))
EARLY_POSITIONS_MS = tuple(range(0, 1500, 300))
"""Where the person starts in the first 1.5 s of the session's first reply (ms after it started
playing, 5 positions), before the echo path's first learning window (`LEARN_WINDOW_MS`)."""
EARLY_ROOMS = (Room(None, 150, -60.0), Room(None, 150, None), Room(-30.0, 150, -60.0),
               Room(-10.0, 250, -60.0, rt60_ms=400.0))
"""Rooms of the first reply's interruptions: no echo over a pink floor and a silent one, a
-30 dB echo, and a loud reverberant one (issue 24: one like it started a turn 308 ms in)."""
ECHO_ROOMS = (*(Room(gain, lag, noise, rt60_ms=rt60)
                for gain in (-30.0, -20.0, -10.0, -6.0) for lag in (150, 400)
                for noise, rt60 in ((-60.0, 0.0), (-50.0, 400.0))),
              Room(-30.0, 250, None), Room(-20.0, 250, None, rt60_ms=400.0))
"""Echo-only rooms (18): every gain and lag dry over -60 dBFS and reverberant over -50 dBFS,
and two over a digitally silent floor."""
EARLY_ECHO_ROOMS = tuple(Room(-10.0, lag, noise, rt60_ms=400.0)
                         for lag in (0, 100, 200, 300) for noise in (-60.0, -50.0, None))
"""Echo-only rooms heard with the microphone on only `EARLY_MIC_MS` before the reply (12): the
loudest echo the detector must explain before it learned the path (-10 dB), reverberant, 0-300 ms
late, over pink floors and a silent one."""
EARLY_MIC_MS = 300
"""How long the microphone was on before the first reply started, in `EARLY_ECHO_ROOMS` (ms):
the page streams it from the session's start, and a typed prompt's reply may start this soon."""
AGC_CASES = ((150, -30.0), (400, -20.0))
"""(lag ms, gain dB) of the echo whose gain an automatic gain control lifts by 10 dB."""
SOUND_ROOMS = tuple(Room(gain, 150, -60.0, rt60_ms=rt60) for gain in (-30.0, -20.0, -10.0, -6.0)
                    for rt60 in (0.0, 400.0))
"""Echo rooms of the room-sound table (8): -30..-6 dB, dry and with a 400 ms RT60 tail."""
SOUND_POSITIONS_MS = (2000, 3500, 5000)
"""Where a room sound starts, ms after the reply started playing."""
SOUND_PEAKS_DBFS = (-10.0, -6.0)
"""Peak levels of the room sounds (dBFS)."""
LOUD_ECHO_ROOMS = tuple(Room(gain, 150, -60.0, rt60_ms=rt60) for gain in (-10.0, -6.0)
                        for rt60 in (0.0, 400.0))
"""Rooms of the loud-echo table (4): a speakerphone's echo 10 and 6 dB down, dry and with a
400 ms RT60 tail (issue 24: as loud as the person, whose -6 dBFS peak it nearly reaches)."""
LOUD_ECHO_POSITIONS_MS = (2000, 4000)
"""Where the person starts over a loud echo, ms after the reply started playing."""


def turn_starts(mic: np.ndarray, from_ms: float = 0.0,
                until_ms: float | None = None) -> list[int]:
    """`audio_start_ms` (ms on `mic`) of every turn the server VAD starts on `mic` (16 kHz)
    from `from_ms` to `until_ms`, the reply playing from `LEAD_MS` (tests/echo_microphone.py)."""
    detector = InputSpeechDetector(TurnDetection(), OUTPUT_RATE_HZ, round(from_ms))
    recorded, rng = reference(), np.random.default_rng(2)
    first = round(from_ms * fx.RATE_HZ / 1000)
    last = mic.size if until_ms is None else round(until_ms * fx.RATE_HZ / 1000)
    pcm16 = fx.to_pcm16(resample(mic[first:last], fx.RATE_HZ, OUTPUT_RATE_HZ))
    step = OUTPUT_RATE_HZ * 2 * APPEND_MS // 1000
    started = []
    for start in range(0, len(pcm16), step):
        end_ms = from_ms + (start + step) * 1000 / (OUTPUT_RATE_HZ * 2)
        position = playing_position(end_ms, rng)
        playing = position is not None and end_ms - LEAD_MS <= reply_ms()
        started += [event.audio_start_ms for event in detector.feed(
            pcm16[start:start + step], playing, position, recorded)
            if isinstance(event, SpeechStarted)]
    return started


def interruption(text: str, engine: str, voice: str | None, played_ms: int,
                 room: Room, peak_dbfs: float = -6.0) -> tuple[bool, int]:
    """(heard, false barge-ins) for a person saying `text` at `peak_dbfs` (dBFS peak)
    `played_ms` into the reply, the microphone from `HISTORY_MS` before (from the session's
    start, `LEAD_MS` before the reply, when that is sooner)."""
    return person_interruption(fx.at_peak_dbfs(fx.speech(text, engine, voice), peak_dbfs),
                               played_ms, room)


def person_interruption(person: np.ndarray, played_ms: int, room: Room) -> tuple[bool, int]:
    """(heard, false barge-ins) for `person` (16 kHz) starting `played_ms` into the reply in
    `room`, judged as `interruption` judges a word."""
    at_ms = LEAD_MS + played_ms
    onset_ms = at_ms + fx.active_span_ms(person)[0]
    started = turn_starts(room_microphone(room, person, at_ms), max(at_ms - HISTORY_MS, 0.0),
                          at_ms + AFTER_MS)
    heard = any(onset_ms - 350 <= start <= onset_ms + 600 for start in started)
    return heard, sum(start < onset_ms - 350 for start in started)


def interruption_table(title: str, voices: tuple[tuple[str, str | None], ...],
                       positions: tuple[int, ...], rooms: tuple[Room, ...]) -> tuple[int, int]:
    """Run every word and voice at every position in every room; print the table (missed and
    false barge-ins per room) and the missed runs; return (missed, false barge-ins)."""
    rows, missed, total_missed, total_false = [], [], 0, 0
    for text in WORDS:
        for engine, voice in voices:
            row: list[object] = [text, f"{engine} {voice or ''}".strip(), len(positions)]
            for room in rooms:
                misses, false = 0, 0
                for played_ms in positions:
                    heard, early = interruption(text, engine, voice, played_ms, room)
                    false += early
                    if not heard:
                        misses += 1
                        missed.append(f"{text} {engine} {voice or ''} @{played_ms} "
                                      f"({room.describe()})")
                row += [misses, false]
                total_missed += misses
                total_false += false
            rows.append(tuple(row))
    runs = len(rows) * len(positions) * len(rooms)
    print_table(f"{title}: missed {total_missed} of {runs} (target 0), false barge-ins before "
                f"the voice {total_false} (target 0)",
                ("word", "voice", "positions",
                 *(f"{kind}, {room.describe()}" for room in rooms for kind in ("missed", "false"))),
                rows)
    if missed:
        print("missed:", "; ".join(missed))
    return total_missed, total_false


def room_sound_table(positions: tuple[int, ...]) -> int:
    """Every room sound of tests/room_sounds.py (seeded by level) at `SOUND_PEAKS_DBFS` and
    `positions` into the reply, over every `SOUND_ROOMS` echo, nobody speaking: print the
    turns started per sound and room; return how many runs started one (false barge-ins)."""
    rows, total = [], 0
    for name, make in ROOM_SOUNDS.items():
        row: list[object] = [name]
        for room in SOUND_ROOMS:
            count = 0
            for seed, peak in enumerate(SOUND_PEAKS_DBFS, start=1):
                for played_ms in positions:
                    at_ms = LEAD_MS + played_ms
                    sound = make(np.random.default_rng(seed), peak)
                    count += bool(turn_starts(room_microphone(room, sound, at_ms),
                                              max(at_ms - HISTORY_MS, 0.0), at_ms + 2500))
            row.append(count)
            total += count
        rows.append(tuple(row))
    runs = len(rows) * len(SOUND_ROOMS) * len(SOUND_PEAKS_DBFS) * len(positions)
    print_table(f"Room sounds over the echo, nobody speaking: false barge-ins {total} of {runs} "
                f"(target 0; {len(SOUND_PEAKS_DBFS) * len(positions)} runs a cell: "
                f"{', '.join(f'{p:.0f}' for p in SOUND_PEAKS_DBFS)} dBFS peak at "
                f"{', '.join(str(p) for p in positions)} ms)",
                ("sound", *(room.describe() for room in SOUND_ROOMS)), rows)
    return total


def loud_echo_table(voices: tuple[tuple[str, str | None], ...] = VOICES) -> tuple[int, int]:
    """Table 5: the words in `voices` over the `LOUD_ECHO_ROOMS` echoes at
    `LOUD_ECHO_POSITIONS_MS`; print it; return (missed, false barge-ins)."""
    return interruption_table("Words over loud echoes (a speakerphone, no echo cancellation)",
                              voices, LOUD_ECHO_POSITIONS_MS, LOUD_ECHO_ROOMS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="Piper only, 4 positions, 4 echo rooms (a smoke run)")
    parser.add_argument("--only-sounds", action="store_true",
                        help="the room-sound table alone")
    parser.add_argument("--only-loud-echoes", action="store_true",
                        help="the table of words over loud echoes alone")
    args = parser.parse_args()
    if args.only_sounds:
        print("command: python -m benchmarks.bench_interruptions --only-sounds")
        return 1 if room_sound_table(SOUND_POSITIONS_MS) else 0
    if args.only_loud_echoes:
        print("command: python -m benchmarks.bench_interruptions --only-loud-echoes")
        return 1 if any(loud_echo_table()) else 0
    voices, positions = (VOICES[:1], POSITIONS_MS[::3]) if args.quick else (VOICES, POSITIONS_MS)
    echo_rooms = ECHO_ROOMS[::5] if args.quick else ECHO_ROOMS
    print("command: python -m benchmarks.bench_interruptions" + (" --quick" if args.quick else ""))
    began = time.monotonic()
    total_missed, total_false = interruption_table(
        "Short interruptions, server VAD", voices, positions, INTERRUPTION_ROOMS)
    early_missed, early_false = interruption_table(
        "The first 1.5 s of the first reply, before an echo path is learned", voices,
        EARLY_POSITIONS_MS[::2] if args.quick else EARLY_POSITIONS_MS, EARLY_ROOMS)
    total_missed += early_missed
    total_false += early_false
    for missed, false in (fast_word_tables.idle_table(), fast_word_tables.over_reply_table(
            person_interruption, positions, INTERRUPTION_ROOMS)):
        total_missed += missed
        total_false += false
    echo_rows = [(room.describe(), len(turn_starts(room_microphone(room))))
                 for room in echo_rooms]
    echo_rows += [(f"{room.describe()}, mic on {EARLY_MIC_MS} ms before the reply",
                   len(turn_starts(room_microphone(room), LEAD_MS - EARLY_MIC_MS)))
                  for room in (EARLY_ECHO_ROOMS[::4] if args.quick else EARLY_ECHO_ROOMS)]
    echo_rows += [(f"{gain:.0f} dB, {lag} ms, AGC +10 dB over 1 s, -70 dBFS peak",
                   len(turn_starts(microphone(lag, gain, boost_db=10.0))))
                  for lag, gain in AGC_CASES]
    echo_false = sum(count for _, count in echo_rows)
    print_table(f"The reply's echo alone, server VAD: false barge-ins {echo_false} in "
                f"{len(echo_rows)} rooms (target 0)", ("room", "turns started"), echo_rows)
    sound_false = room_sound_table(SOUND_POSITIONS_MS[:1] if args.quick else SOUND_POSITIONS_MS)
    loud_missed, loud_false = loud_echo_table(voices)
    total_missed += loud_missed
    total_false += loud_false
    print(f"elapsed: {time.monotonic() - began:.0f} s")
    return 1 if total_missed or total_false or echo_false or sound_false else 0


if __name__ == "__main__":
    sys.exit(main())
