"""Echo benchmarks: the assistant's own voice coming back through the microphone of a room with
a noise floor never becomes a user turn, and a person talking over that echo is transcribed as
well as without it.

Starts a real `server.app.DemoServer` (Piper, deterministic, `calibration=auto`, in-process
faster-whisper) on 127.0.0.1 and drives it with `tests.echo_room.RoomPage` clients: each plays
the demo page with server VAD in real time, its microphone hearing the reply's audio through a
`tests.echo_room.Room` (echo gain, lag, reverberation, pink noise floor), from before the reply
starts until 2.5 s after its final ACK (the echo's tail). Sessions run `--concurrency` at a time
(default 1: the clients share the server's process and event loop, and a starved loop falls
behind real time). Neither the clients nor the server ping, and the server's send timeout is
long (a loop busy for seconds would close the sessions: runs on a loaded machine died so).
`--only echo` / `--only person` runs one measurement; `--more` adds ten utterances to the second
(`MORE_UTTERANCES`, 20 in all); `--stall-seed N` runs both with the event loop blocked 50-400 ms
every 100-800 ms (`tests.stalled_loop`, seeded: a busy machine; the server reads appends and
ACKs late and in bursts), the tables' titles then say so. Prints the command, machine facts and one
table per measurement with its target and PASS/FAIL; exit status 1 when a target fails. About
4 minutes on 2 cores (10 rooms, 20 person runs), and 4 more for table 3 (16 runs).

1. Echo alone: per room, speech starts, user turns and responses to them (target: 0 turns).
2. A person over the echo: each utterance (espeak-ng voices and Piper, -12 dBFS peak) spoken
   1.5 s into a reply, once with the reply's echo at -30 dB over a -60 dBFS floor and once
   without echo over the same floor; the word error rate of the person's transcript against
   the sentence (target: with echo at most 5 points above without), and where the turn's audio
   started relative to the person's voice onset.
3. A room under the echo (`--only rooms`): a talk radio, a TV talker or babble
   (`tests/room_sounds.py`, `ROOM_SOUNDS`) from the microphone's first sample, so the room is
   heard almost only under the reply's echo (`ROOMS_ECHO`: -14 dB, 100 ms, the issue 24
   tester's loudspeaker); a person's "Wait." or "Stop." at `ROOM_PERSON_DBFS` RMS 4.1 or 6.1 s
   into the reply pauses it, the room talks on -> the person's turn found (as the tests find it:
   from `EARLIEST_START_MS` before the voice to `FIRST_WORD_MS` after it), other turns
   (target: every person found, no other turn); `--repeat N` runs each case N times.

Run from the project root: `.venv/bin/python -m benchmarks.bench_echo` (it imports the `tests`
helpers, so it must run as a module).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Sequence
from typing import TypeVar

import numpy as np

from benchmarks.measuring import print_run_header, verdict
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services, server_options
from server.speech.resampling import resample
from tests import room_sounds as rs
from tests import speech_fixtures as fx
from tests.echo_room import RATE_HZ, Room, RoomPage, RoomResult, word_errors, words
from tests.realtime_client import RealtimeClient
from tests.stalled_loop import BETWEEN_MS, STALL_MS, stalled_loop
from tests.test_rooms import EARLIEST_START_MS
from tests.test_rooms_talk_radio import FIRST_WORD_MS, MUSEUM_REPLY

ECHO_PROMPT = "say: From a cursed kanji to a full chibi chorus line in a single evening."
"""The issue's reply: its last word's echo came back after the final ACK and was answered."""

ECHO_ROOMS = (
    [Room(gain, lag, noise) for gain in (-30.0, -20.0) for noise in (-60.0, -50.0)
     for lag in (150, 400)]
    + [Room(-20.0, 150, -60.0, rt60_ms=400.0), Room(-30.0, 400, -60.0, rt60_ms=400.0)]
)
"""The target's rooms: echo at -30 / -20 dB, 150 and 400 ms late (the ends of the target's
range), over -60 / -50 dBFS RMS pink noise; and two with a 400 ms reverberant tail."""

PERSON_PROMPT = f"say: {MUSEUM_REPLY}"
"""A reply long enough to be playing when the person speaks."""

PERSON_UTTERANCES = (
    ("Hold on a second.", "espeak", "en-us"),
    ("Wait, what time does it open?", "espeak", "en"),
    ("Stop, that is not what I asked.", "espeak", "en-gb-x-rp"),
    ("Can you slow down a little?", "espeak", "en-us+f3"),
    ("Excuse me, how much does it cost?", "espeak", "en-us"),
    ("Actually, I need the weekend hours.", "espeak", "en-gb-x-rp"),
    ("Hang on, is it open on Sunday?", "piper", None),
    ("Tell me about the weather instead.", "piper", None),
    ("What was the name of that street?", "piper", None),
    ("Could you tell me about the planets?", "piper", None),
)
"""The target's ten utterances: six espeak-ng speakers (four voices), four Piper."""

MORE_UTTERANCES = (
    ("Hold on, I have a question.", "espeak", "en-us+f3"),
    ("Hey, can you repeat that?", "espeak", "en"),
    ("How long is the guided tour?", "espeak", "en-gb-x-rp"),
    ("Hello, are you still there?", "espeak", "en-us"),
    ("Sorry, I did not catch that.", "espeak", "en-us+f3"),
    ("Please say that again more slowly.", "espeak", "en-gb-x-rp"),
    ("Is the cafe open in the morning?", "espeak", "en"),
    ("Where can I buy the tickets?", "piper", None),
    ("Hold on, what about Saturday?", "piper", None),
    ("How much is a ticket for students?", "piper", None),
)
"""Ten more for `--more` (six of them start with an /h/, the breath the issue's "Hold on a
second." lost to the echo before it): seven espeak-ng speakers (four voices), three Piper."""

PERSON_AT_MS = 1500.0
"""When the person starts, ms after the reply started playing."""
PERSON_DBFS = -12.0
"""The person's peak level."""
PERSON_ROOMS = {"echo": Room(-30.0, 150, -60.0), "no echo": Room(None, 150, -60.0)}
"""The person's two rooms: the reply's echo at -30 dB, or none, over the same floor."""
PERSON_AFTER_MS = 500.0
"""Listening after a person's run ended (the reply was interrupted: no echo tail to wait for;
the page still waits for the person's transcript)."""
WER_MARGIN_POINTS = 5.0
"""Target: the word error rate over the echo at most this many points above without it."""

ROOMS_ECHO = Room(-14.0, 100, -60.0)
"""Table 3's loudspeaker: the reply's echo at -14 dB, 100 ms late, over a -60 dBFS floor."""
ROOM_SOUNDS = {"talk radio -40": (rs.radio, -40.0), "talk radio -36": (rs.radio, -36.0),
               "TV talker -40": (rs.tv_talker, -40.0), "babble -40": (rs.babble, -40.0)}
"""Table 3's rooms: (sound, its RMS level dBFS)."""
ROOM_PERSONS = (("Wait.", "piper", None), ("Stop.", "espeak", "en-us+f3"))
ROOM_PERSON_DBFS = -22.0
"""Table 3's person: RMS dBFS, 14-18 dB over the room (issue 24's tester: -22 over -40)."""
ROOM_PERSON_AT_MS = (4100.0, 6100.0)
ROOM_SOUND_MS = 25_000

SEND_TIMEOUT_MS = 120_000
"""The server's `--send-timeout-ms` here: the clients read in the server's own event loop, and
on a loaded machine a starved loop left a client's data unread past the default 10 s (the
server then aborted the connection and the run died)."""

MAX_EVENTS_PER_S = 10_000
"""The server's `--max-events-per-s` here: a client starved for seconds catches up with its
appends in one burst (a run at load 17 was closed for exceeding the default 200)."""

T = TypeVar("T")


async def bounded(concurrency: int, jobs: Sequence[Awaitable[T]]) -> list[T]:
    """Await `jobs`, at most `concurrency` at a time; results in order."""
    slots = asyncio.Semaphore(concurrency)

    async def run(job: Awaitable[T]) -> T:
        async with slots:
            return await job

    return list(await asyncio.gather(*(run(job) for job in jobs)))


async def in_room(url: str, room: Room, prompt: str, person: np.ndarray | None = None,
                  person_at_ms: float = 0.0, sound: np.ndarray | None = None,
                  after_ms: float | None = None) -> RoomResult:
    """One session at `url`: the page in `room` plays the reply to `prompt` (with `person`
    speaking `person_at_ms` into it and the room's `sound`, 24 kHz, from the first sample;
    then it listens `after_ms`, by default `PERSON_AFTER_MS` after the reply stopped when a
    person spoke, else 2.5 s: the echo's tail). Progress goes to stderr."""
    if after_ms is None:
        after_ms = 2500.0 if person is None else PERSON_AFTER_MS
    async with RealtimeClient.connect(url, ping_interval=None) as client:
        result = await RoomPage(client, room, person, person_at_ms, sound=sound
                                ).run(prompt, after_ms)
    print(f"{room.describe()}: speech starts {result.speech_started}, transcripts "
          f"{result.transcripts}", file=sys.stderr, flush=True)
    return result


def person_audio(text: str, engine: str, voice: str | None) -> np.ndarray:
    """The utterance at `PERSON_DBFS` peak, at the page's rate."""
    pcm = fx.at_peak_dbfs(fx.speech(text, engine, voice), PERSON_DBFS)
    return resample(pcm, fx.RATE_HZ, RATE_HZ)


async def report_echo(url: str, concurrency: int, stalled: str = "") -> bool:
    """Table 1; True when no room created a user turn."""
    results = await bounded(concurrency, [in_room(url, room, ECHO_PROMPT)
                                          for room in ECHO_ROOMS])
    rows = [(room.describe(), len(result.speech_started), len(result.transcripts),
             len(result.responses), result.played_ms,
             "; ".join(result.transcripts) or "-")
            for room, result in zip(ECHO_ROOMS, results, strict=True)]
    turns = sum(len(result.transcripts) for result in results)
    rows.append(("total", sum(row[1] for row in rows), turns,
                 sum(row[3] for row in rows), "", verdict(turns == 0)))
    print_table(f"Echo alone, incl. 2.5 s after the final ACK{stalled} (target: 0 user turns)",
                ("room (echo gain, lag, noise RMS)", "speech starts", "user turns",
                 "responses", "played ms", "transcripts"), rows)
    return turns == 0


async def report_person(url: str, concurrency: int, more: bool, stalled: str = "") -> bool:
    """Table 2 (with `MORE_UTTERANCES` when `more`); True when the word error rate over the
    echo is within the margin."""
    utterances = PERSON_UTTERANCES + (MORE_UTTERANCES if more else ())
    jobs = []
    for text, engine, voice in utterances:
        audio = person_audio(text, engine, voice)
        jobs += [in_room(url, room, PERSON_PROMPT, audio, PERSON_AT_MS)
                 for room in PERSON_ROOMS.values()]
    results = await bounded(concurrency, jobs)
    rows, errors, total = [], {name: 0 for name in PERSON_ROOMS}, 0
    for index, (text, engine, voice) in enumerate(utterances):
        pair = dict(zip(PERSON_ROOMS, results[2 * index:2 * index + 2], strict=True))
        total += len(words(text))
        cells = []
        for name, result in pair.items():
            heard = result.transcripts[0] if result.transcripts else ""
            errors[name] += word_errors(text, heard)
            cells.append(heard or "-")
        echo = pair["echo"]
        lead = ("-" if not echo.speech_started or echo.person_onset_ms is None
                else round(echo.person_onset_ms - echo.speech_started[0]))
        rows.append((text, f"{engine} {voice or ''}".strip(), *cells, lead))
    rates = {name: 100.0 * count / total for name, count in errors.items()}
    ok = rates["echo"] - rates["no echo"] <= WER_MARGIN_POINTS
    rows.append(("word error rate %", "", rates["echo"], rates["no echo"], verdict(ok)))
    print_table(f"A person over the reply's echo (-30 dB, 150 ms, -60 dBFS), {PERSON_DBFS:.0f} "
                f"dBFS peak at {PERSON_AT_MS:.0f} ms{stalled} (target: WER with echo <= without + "
                f"{WER_MARGIN_POINTS:.0f} points)",
                ("utterance", "voice", "transcript (echo)", "transcript (no echo)",
                 "turn audio before onset ms"), rows)
    return ok


async def report_rooms(url: str, concurrency: int, repeat: int, stalled: str = "") -> bool:
    """Table 3, each case `repeat` times (the server's timing differs from run to run); True
    when every person's turn was found and the room started none."""
    cases = [(name, text, engine, voice, at_ms) for name in ROOM_SOUNDS
             for text, engine, voice in ROOM_PERSONS for at_ms in ROOM_PERSON_AT_MS
             for _ in range(repeat)]
    sounds = {name: resample(make(ROOM_SOUND_MS, dbfs), fx.RATE_HZ, RATE_HZ)
              for name, (make, dbfs) in ROOM_SOUNDS.items()}
    persons = {text: resample(rs.at_rms_dbfs(fx.speech(text, engine, voice), ROOM_PERSON_DBFS),
                              fx.RATE_HZ, RATE_HZ) for text, engine, voice in ROOM_PERSONS}
    results = await bounded(concurrency, [
        in_room(url, ROOMS_ECHO, PERSON_PROMPT, persons[text], at_ms, sounds[name], 2500.0)
        for name, text, _, _, at_ms in cases])
    rows, missed, others = [], 0, 0
    for (name, text, engine, voice, at_ms), result in zip(cases, results, strict=True):
        onset = result.person_onset_ms
        found = [start for start in result.speech_started if onset is not None
                 and onset - EARLIEST_START_MS <= start <= onset + FIRST_WORD_MS]
        missed += not found
        others += len(result.speech_started) - len(found[:1])
        rows.append((name, f"{text} ({' '.join(filter(None, (engine, voice)))})", round(at_ms),
                     "yes" if found else "MISSED",
                     ", ".join(str(start) for start in result.speech_started) or "-",
                     "-" if onset is None else round(onset)))
    ok = missed == 0 and others == 0
    rows.append(("total", "", "", f"{missed} missed", f"{others} other turns", verdict(ok)))
    print_table(f"A room under the reply's echo ({ROOMS_ECHO.describe()}), the person at "
                f"{ROOM_PERSON_DBFS:.0f} dBFS RMS pausing the reply{stalled} (target: every "
                "person found, no other turn)",
                ("room (RMS dBFS)", "person", "ms into the reply", "found", "speech starts ms",
                 "voice onset ms"), rows)
    return ok


async def bench(args: argparse.Namespace) -> bool:
    config = ServerConfig(port=0, tts="piper", calibration="auto", deterministic=True,
                          ping_interval_s=0, send_timeout_ms=SEND_TIMEOUT_MS,
                          max_events_per_s=MAX_EVENTS_PER_S)
    services = await asyncio.to_thread(build_services, config)
    demo = DemoServer(services, config.allow_origin, server_options(config))
    await demo.start("127.0.0.1", 0)
    url = f"ws://127.0.0.1:{demo.port()}/v1/realtime"
    stalled = "" if args.stall_seed is None else (
        f", the event loop blocked {STALL_MS[0]}-{STALL_MS[1]} ms every "
        f"{BETWEEN_MS[0]}-{BETWEEN_MS[1]} ms (seed {args.stall_seed})")
    try:
        async with contextlib.AsyncExitStack() as stack:
            if args.stall_seed is not None:
                await stack.enter_async_context(stalled_loop(args.stall_seed))
            passed = []
            if args.only in (None, "echo"):
                passed.append(await report_echo(url, args.concurrency, stalled))
            if args.only in (None, "person"):
                passed.append(await report_person(url, args.concurrency, args.more, stalled))
            if args.only in (None, "rooms"):
                passed.append(await report_rooms(url, args.concurrency, args.repeat, stalled))
    finally:
        assert demo.server is not None
        demo.server.close()
        await demo.server.wait_closed()
    return all(passed)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=1,
                        help="sessions at a time (default 1)")
    parser.add_argument("--only", choices=("echo", "person", "rooms"),
                        help="run one of the three measurements")
    parser.add_argument("--more", action="store_true",
                        help="table 2 with ten more utterances (20 in all)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="table 3: run each case this many times (default 1)")
    parser.add_argument("--stall-seed", type=int,
                        help="block the event loop 50-400 ms every 100-800 ms (this seed)")
    args = parser.parse_args(argv)
    print_run_header()
    sys.exit(0 if asyncio.run(bench(args)) else 1)


if __name__ == "__main__":
    main()
