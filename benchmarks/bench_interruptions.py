"""Short interruptions over a Piper reply, offline through the server's VAD (issue 24).

"Stop.", "Wait.", "No.", "Hold on." in three voices (Piper, espeak-ng en-us and en-us+f3) at
-6 dBFS peak, at `POSITIONS_MS` into the reply of tests/test_echo.py (6.5 s, Piper), over a
-60 dBFS pink floor, once with no echo in the microphone and once with the reply's echo 30 dB
down, 150 ms late (tests/echo_room.py `Room`). Each microphone is appended in 40 ms pieces to
`server.listening.input_speech.InputSpeechDetector` with the playing position the session
would estimate (+-20 ms), as tests/test_echo.py `turn_starts` does. A run is heard when a turn
starts whose audio begins from 350 ms before the voice onset (-40 dBFS) to 600 ms after it.

Prints one table per echo condition (misses per word and voice, target 0) and the missed
positions; exit status 1 when any is missed. About 10 minutes on 2 cores (288 runs).

Run from the project root: `.venv/bin/python -m benchmarks.bench_interruptions`.
"""

from __future__ import annotations

import sys

from benchmarks.tables import print_table
from tests import speech_fixtures as fx
from tests.echo_room import Room
from tests.test_echo import LEAD_MS, room_microphone, turn_starts

WORDS = ("Stop.", "Wait.", "No.", "Hold on.")
VOICES = (("piper", None), ("espeak", "en-us"), ("espeak", "en-us+f3"))
POSITIONS_MS = tuple(range(1000, 6600, 500))
"""Where the person starts, ms after the reply started playing (12 positions)."""


def heard(text: str, engine: str, voice: str | None, played_ms: int,
          echo_db: float | None) -> bool:
    """Whether the server VAD starts a turn on the person's voice (see the module doc)."""
    person = fx.at_peak_dbfs(fx.speech(text, engine, voice), -6.0)
    at_ms = LEAD_MS + played_ms
    onset_ms = at_ms + fx.active_span_ms(person)[0]
    started = turn_starts(room_microphone(Room(echo_db, 150, -60.0), person, at_ms))
    return any(onset_ms - 350 <= s.audio_start_ms <= onset_ms + 600 for s in started)


def main() -> int:
    print("command: python -m benchmarks.bench_interruptions")
    failed = False
    for echo_db in (None, -30.0):
        rows, missed = [], []
        for text in WORDS:
            for engine, voice in VOICES:
                misses = [ms for ms in POSITIONS_MS
                          if not heard(text, engine, voice, ms, echo_db)]
                missed += [f"{text} {engine} {voice or ''} @{ms}" for ms in misses]
                rows.append((text, f"{engine} {voice or ''}".strip(), len(POSITIONS_MS),
                             len(misses)))
        total = sum(row[3] for row in rows)
        failed |= total > 0
        label = "no echo" if echo_db is None else f"echo {echo_db:.0f} dB, 150 ms"
        verdict = "PASS" if total == 0 else "FAIL"
        print_table(f"Short interruptions, server VAD, {label}: missed {total} of "
                    f"{len(rows) * len(POSITIONS_MS)} (target 0: {verdict})",
                    ("word", "voice", "positions", "missed"), rows)
        if missed:
            print("missed:", "; ".join(missed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
