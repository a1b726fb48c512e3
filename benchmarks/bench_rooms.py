"""Rooms benchmark: the room's chatter is never a turn, the person over it always is.

Runs the server's own listening classes offline on the audio a page would append (PCM16 at
24 kHz in 40 ms appends): `server.listening.input_speech.InputSpeechDetector` (streaming Silero,
`TurnDetector`, the echo detector, `RoomBackground` as the room gate, `max_turn_ms` 30 s) and,
for the person's turns, the server's ASR of them (`calibration.local_asr.person_transcriber`,
tiny.en) on exactly the audio a commit takes (speech start - padding .. speech stop + the utterance
tail).

Backgrounds (`tests/room_sounds.py`): five-talker babble (espeak-ng and Piper voices) and one
TV talker, at RMS levels over a -70 dBFS RMS pink floor, from the session's first sample.

1. Nobody speaking: `--room-s` seconds of each background (two seeds) -> turns started, with the
   room gate and, side by side, without it (Silero and the `server_vad` state machine alone:
   the behaviour before the gate).
2. The person over it: each of `SENTENCES` (Piper and espeak-ng en-us) at `--person-dbfs` RMS,
   4 s into 10 s of background -> turns started (1 is right), the person's turn found (a turn
   starting at most 650 ms before their voice), and the word error rate of its transcript
   against the text, next to the same sentences over the floor alone ("clean").

Targets (issue 24): at -45 dBFS and below, nobody speaking: 0 turns; the person at -20 dBFS
over it: every turn found, WER <= clean + 10 points. Exit status 1 when a target fails.

Run from the project root: `.venv/bin/python -m benchmarks.bench_rooms` (about 3 minutes on a
loaded 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import numpy as np

from benchmarks.measuring import print_run_header, verdict
from benchmarks.tables import print_table
from calibration.local_asr import LocalWhisperTranscriber, person_transcriber
from server.listening.input_speech import InputSpeechDetector
from server.listening.pcm16 import pcm16_to_float
from server.listening.server_vad_settings import UTTERANCE_TAIL_MS, TurnDetection
from server.listening.silero_vad import SileroStreamingVad, resample_to_16k
from server.listening.turn_events import SpeechStarted, SpeechStopped, TurnEvent
from server.listening.vad import TurnDetector
from server.speech.resampling import resample
from tests import room_sounds as rs
from tests import speech_fixtures as fx
from tests.echo_room import word_errors, words

INPUT_RATE_HZ = 24_000
APPEND_MS = 40
FLOOR_DBFS = -70.0
PERSON_AT_MS = 4000
SCENE_MS = 10_000
TARGET_DBFS = -45.0
"""Backgrounds at or below this level must start no turn and keep the person's WER."""
TARGET_PERSON_DBFS = -20.0
EARLIEST_START_MS = 650
"""A turn starting at most this long before the person's voice is theirs (the prefix padding,
the room's speech since the room gate last rejected the candidate, two windows)."""
SENTENCES = (
    "Hold on, what was the second step?",
    "Can you say that again more slowly?",
    "What time does the museum open tomorrow?",
    "Tell me about the planets instead.",
    "Actually, I need a table for four people.",
)
VOICES = (("piper", None), ("espeak", "en-us"))
BACKGROUNDS = {"babble": rs.babble, "tv": rs.tv_talker}


def floor(duration_ms: float, seed: int) -> np.ndarray:
    return rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(seed + 100), duration_ms),
                          FLOOR_DBFS)


def scene(kind: str | None, dbfs: float, duration_ms: float, seed: int) -> np.ndarray:
    """16 kHz: `kind` background at RMS `dbfs` (None: none) over the pink floor."""
    pcm = floor(duration_ms, seed)
    if kind is not None:
        background = BACKGROUNDS[kind](duration_ms, dbfs, seed=seed)
        pcm = pcm[:background.size] + background
    return pcm.astype(np.float32)


def appends(pcm_16k: np.ndarray) -> list[bytes]:
    pcm16 = fx.to_pcm16(resample(pcm_16k, fx.RATE_HZ, INPUT_RATE_HZ))
    step = INPUT_RATE_HZ * 2 * APPEND_MS // 1000
    return [pcm16[start:start + step] for start in range(0, len(pcm16), step)]


def server_events(pcm_16k: np.ndarray) -> list[TurnEvent]:
    """The server's VAD with the room gate (`InputSpeechDetector`, `max_turn_ms` 30 s)."""
    detector = InputSpeechDetector(TurnDetection(), INPUT_RATE_HZ, 0, 30_000)
    return [event for chunk in appends(pcm_16k) for event in detector.feed(chunk, False)]


def ungated_starts(pcm_16k: np.ndarray) -> int:
    """Turns Silero and the `server_vad` state machine alone start (no room gate)."""
    vad, turns = SileroStreamingVad(), TurnDetector()
    count = 0
    for chunk in appends(pcm_16k):
        for window in vad.feed_windows(resample_to_16k(chunk, INPUT_RATE_HZ)):
            event = turns.process(window.end_ms, window.probability, window.level_dbfs)
            count += isinstance(event, SpeechStarted)
    return count


def room_alone(kinds: list[str], levels: list[float], room_s: float) -> list[list[object]]:
    rows = []
    for kind in kinds:
        for dbfs in levels:
            gated = ungated = 0
            for seed in (0, 1):
                pcm = scene(kind, dbfs, room_s * 1000, seed)
                gated += sum(isinstance(e, SpeechStarted) for e in server_events(pcm))
                ungated += ungated_starts(pcm)
            rows.append([kind, f"{dbfs:.0f}", f"{2 * room_s:.0f}", gated, ungated])
    return rows


async def person_over(kind: str | None, dbfs: float, person_dbfs: float,
                      transcriber: LocalWhisperTranscriber) -> tuple[int, int, int, int, int]:
    """(utterances, turns started, person's turns found, word errors, reference words)."""
    utterances = started = found = errors = total = 0
    for index, (text, (engine, voice)) in enumerate(
            (t, v) for t in SENTENCES for v in VOICES):
        person = rs.at_rms_dbfs(fx.speech(text, engine, voice), person_dbfs)
        pcm = scene(kind, dbfs, SCENE_MS, seed=index)
        first = PERSON_AT_MS * fx.RATE_HZ // 1000
        pcm[first:first + person.size] += person
        onset_ms = PERSON_AT_MS + fx.active_span_ms(person)[0]
        events = server_events(pcm)
        utterances += 1
        total += len(words(text))
        turn_starts = [e.audio_start_ms for e in events if isinstance(e, SpeechStarted)]
        stops = [e.audio_end_ms for e in events if isinstance(e, SpeechStopped)]
        started += len(turn_starts)
        mine = [i for i, start in enumerate(turn_starts)
                if onset_ms - EARLIEST_START_MS <= start <= onset_ms and i < len(stops)]
        if not mine:
            errors += len(words(text))
            continue
        found += 1
        start_ms, end_ms = turn_starts[mine[0]], stops[mine[0]] + UTTERANCE_TAIL_MS
        pcm16 = b"".join(appends(pcm))
        bytes_per_ms = INPUT_RATE_HZ * 2 // 1000
        turn = pcm16_to_float(pcm16[start_ms * bytes_per_ms:end_ms * bytes_per_ms])
        errors += word_errors(text, await transcriber.transcribe(turn, INPUT_RATE_HZ))
    return utterances, started, found, errors, total


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", type=float, nargs="+", default=[-35.0, -45.0, -55.0, -65.0],
                        help="background RMS levels (dBFS)")
    parser.add_argument("--person-dbfs", type=float, nargs="+", default=[-20.0, -30.0],
                        help="the person's RMS levels (dBFS)")
    parser.add_argument("--room-s", type=float, default=60.0,
                        help="seconds of each background alone, per seed (two seeds)")
    args = parser.parse_args()
    print_run_header()
    kinds = sorted(BACKGROUNDS)
    began = time.monotonic()
    alone = room_alone(kinds, args.levels, args.room_s)
    print_table("Nobody speaking: turns started (server VAD with the room gate; without it)",
                ["background", "dBFS RMS", "seconds", "turns", "turns, no gate"], alone)
    transcriber = person_transcriber()
    await asyncio.to_thread(transcriber.load)
    rows, failures = [], []
    for person_dbfs in args.person_dbfs:
        clean = await person_over(None, 0.0, person_dbfs, transcriber)
        clean_wer = 100.0 * clean[3] / clean[4]
        rows.append([f"person {person_dbfs:.0f}", "clean", clean[0], clean[1], clean[2],
                     clean_wer, 0.0])
        for kind in kinds:
            for dbfs in args.levels:
                n, started, found, errors, total = await person_over(
                    kind, dbfs, person_dbfs, transcriber)
                wer = 100.0 * errors / total
                rows.append([f"person {person_dbfs:.0f}", f"{kind} {dbfs:.0f}", n, started,
                             found, wer, wer - clean_wer])
                if dbfs <= TARGET_DBFS and person_dbfs == TARGET_PERSON_DBFS and (
                        found < n or wer > clean_wer + 10.0):
                    failures.append(f"person {person_dbfs:.0f} over {kind} {dbfs:.0f}")
    print_table("The person over the room: turns started, the person's turn found, WER (%) "
                "of its transcript (tiny.en) and its difference from clean (points)",
                ["person dBFS RMS", "background", "utterances", "turns", "found", "WER",
                 "vs clean"], rows)
    for row in alone:
        if float(str(row[1])) <= TARGET_DBFS and row[3]:
            failures.append(f"{row[0]} {row[1]} alone started {row[3]} turns")
    print(f"\n{time.monotonic() - began:.0f} s")
    print(f"{verdict(not failures)}: at <= -45 dBFS the room alone starts no turn; the person "
          "at -20 dBFS over it: every turn found, WER <= clean + 10 points")
    for failure in failures:
        print(f"  FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
