"""What ASR reads of a short interruption said over the reply's echo (issue 24: the person is
heard; a tester's F6 / N4: a "Stop." heard in time but transcribed as the echo's words, "That
was a good one.", and answered as said).

Five interruptions ("Stop.", "Wait.", "No.", "Hold on.", "Wait, stop.") in four voices (Piper,
espeak-ng en-us, en-gb-scotland, en-gb-x-rp) at -6 dBFS peak, 2.5 / 5.1 s into the Piper reply
of tests/echo_microphone.py, over its echo 20 dB down (150 ms late), 10 dB down (90 ms late),
and 10 dB down with a 400 ms RT60 tail (tests/echo_room.py `Room`), over a -60 dBFS pink floor.
Each goes through `server.listening.input_speech.InputSpeechDetector` in 40 ms appends with the
page pausing the reply 100 ms after `speech_started` (tests/echo_turns.py
`paused_turn`, as the server's sessions do), and the audio the server hands to ASR for the
committed turn (`InputSpeechDetector.without_echo`) is read by tiny.en as the server reads a
person's turn (`calibration.local_asr.person_transcriber`: one greedy decode, so that the same
audio reads the same in every run).

A run is exact when the transcript's words are the interruption's words; empty when tiny.en
wrote nothing (over a paused reply, the sound then decides: a real interruption may resume it).
Prints a table per room and the transcripts that are not exact. Target (the product's): every
interruption exact. Offline and deterministic; about 6 minutes on 2 loaded cores (120 runs).

Run from the project root: `.venv/bin/python -m benchmarks.bench_echo_transcripts`.
"""

from __future__ import annotations

import itertools

from benchmarks.measuring import print_run_header, verdict
from benchmarks.tables import print_table
from tests import speech_fixtures
from tests.echo_microphone import LEAD_MS
from tests.echo_room import Room, words
from tests.echo_turns import paused_turn, transcript

INTERRUPTIONS = ("Stop.", "Wait.", "No.", "Hold on.", "Wait, stop.")
VOICES = (("piper", None), ("espeak", "en-us"), ("espeak", "en-gb-scotland"),
          ("espeak", "en-gb-x-rp"))
PERSON_DBFS = -6.0
POSITIONS_MS = (2500, 5100)
"""Where the person starts, ms into the reply."""

ROOMS = {
    "-20 dB, 150 ms": Room(-20.0, 150, -60.0),
    "-10 dB, 90 ms": Room(-10.0, 90, -60.0),
    "-10 dB, 90 ms, RT60 400": Room(-10.0, 90, -60.0, rt60_ms=400.0),
}


def main() -> int:
    print_run_header()
    rows, wrong = [], []
    total_exact = total_runs = 0
    for name, room in ROOMS.items():
        exact = empty = unheard = runs = 0
        for text, (engine, voice), position in itertools.product(INTERRUPTIONS, VOICES,
                                                                 POSITIONS_MS):
            person = speech_fixtures.at_peak_dbfs(speech_fixtures.speech(text, engine, voice),
                                                  PERSON_DBFS)
            runs += 1
            try:
                _, _, for_asr = paused_turn(person, LEAD_MS + position, room)
            except AssertionError:
                unheard += 1
                wrong.append((name, text, voice or engine, position, "(no turn)"))
                continue
            said = transcript(for_asr)
            exact += said == words(text)
            empty += not said
            if said != words(text):
                wrong.append((name, text, voice or engine, position, " ".join(said) or "(empty)"))
        rows.append((name, runs, exact, empty, unheard))
        total_exact += exact
        total_runs += runs
    print_table(f"Interruptions over the echo, transcripts: exact {total_exact} of {total_runs} "
                f"(target all: {verdict(total_exact == total_runs)})",
                ("room", "runs", "exact", "empty", "no turn"), rows)
    print_table("Not exact", ("room", "said", "voice", "at ms", "transcript"), wrong)
    return 0 if total_exact == total_runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
