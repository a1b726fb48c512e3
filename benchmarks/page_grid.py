"""The page's barge-in over grids (issue 24), the `--grid` part of benchmarks/bench_microphone.py:
real interruptions ("Stop.", "Wait.", "No.", "Hold on.") in three voices at 11 positions in a
Piper reply, with and without the reply's echo 30 dB down; the page's own echo alone at several
levels and lags; a room's babble and TV with nobody speaking. Each case is one headless
Chromium launch with a fake microphone (tests/page_barge_in.py), against a real demo server
with the Piper voice. The page's server VAD never stops nor answers the reply there
(`SERVER_VAD_OBSERVES`): the page's VAD alone decides, so a case is heard only when the page's
VAD stopped the reply, every barge-in the page makes is seen ("server VAD turns" counts what
the server's VAD heard of the same audio, for comparison), and a miss is never hidden behind a
server stop.

Counts carry over to a quiet machine; times are inflated by the load, which each table names.
"plays": a case with the reply's echo in the file is played again when the page's playback
stalled (the file's echo then no longer follows it) or the echo lagged beyond the page's
longest echo lag (tests/page_barge_in.py); the column counts the plays, void ones included.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.measuring import cpu_snapshot, other_load, percentile, verdict
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services
from tests import room_sounds, speech_fixtures
from tests.cached_tts import SEND_AHEAD_MS, CachedSynthesizer
from tests.conftest import loaded_synthesizer
from tests.page_barge_in import (
    PERSON_PEAK_DBFS,
    Case,
    Outcome,
    reply_audio,
    run_case,
)

VOICES = (("piper", None), ("espeak", "en-us"), ("espeak", "en-us+f3"))
"""The person's voices (engine, voice)."""

WORDS = ("Stop.", "Wait.", "No.", "Hold on.")
"""Short interruptions; position i says WORDS[i % 4]."""

POSITIONS_MS = tuple(range(1000, 6500, 500))
"""Where the person starts, ms of the fake microphone's file (the reply had rendered about
50-350 ms more when the file started): 11 positions."""

ECHO_DB = -30.0
"""The reply's echo under the person: 30 dB below the reply."""

ECHO_LAG_MS = 0.0
"""Extra lag of that echo in the file (see tests/page_barge_in.py): none, the reply has
rendered 50-350 ms when the file starts, so the echo lags it by that much and the capture's
start-up."""

ECHO_ALONE = ((-36.0, 0.0), (-30.0, 0.0), (-30.0, 100.0), (-24.0, 50.0), (-18.0, 0.0),
              (-18.0, 100.0), (-12.0, 50.0))
"""The page's own echo alone: (peak dBFS, extra lag ms)."""

ECHO_ALONE_MS = 7000.0
"""File length of an echo-alone case (ms of the reply heard)."""

ROOMS = (("babble", -45.0), ("babble", -55.0), ("TV", -45.0))
"""Backgrounds with nobody speaking: (kind, RMS dBFS)."""

ROOM_MS = 16_000.0
"""File length of a room case: ROOM_LEAD_MS of the room alone, then the whole reply (10.6 s,
rendering from about 4.4 s) and its echo guard's tail: every fire while it plays is on the
case's audio (after the file's end, Chromium's fake device restarts it; at 14 s the reply's
last second went unheard, and that hid a false barge-in over babble at 9.8 s into the reply,
web/room-background.js)."""

LONG_LAGS_MS = (500.0, 700.0, 900.0)
"""Extra lags of the long-latency grid's echo (`--grid long`): with the 50-350 ms the reply had
rendered when the file started and the capture's start-up, the echo lags the playback by about
600-1250 ms, a Bluetooth headset's or a USB/HDMI output's latency (issue 24)."""

LONG_ECHO_DBFS = (-18.0, -12.0)
"""Peak levels of the long-latency grid's echo (the levels of `ECHO_ALONE` that pass the
page's level guard)."""

LONG_MAX_LAG_MS = 1250.0
"""A long-latency case whose echo lags the playback by more than this is void (played
again): past the 1.2 s the page searches (and past any latency measured)."""

SILENCE_P95_MS = 250.0
"""Target: VAD onset -> local silence p95 (issue 24)."""


def person_cases() -> list[Case]:
    """VOICES x POSITIONS_MS, without and with the echo."""
    cases = []
    for engine, voice in VOICES:
        for index, position in enumerate(POSITIONS_MS):
            word = WORDS[index % len(WORDS)]
            pcm = speech_fixtures.at_peak_dbfs(speech_fixtures.speech(word, engine, voice),
                                               PERSON_PEAK_DBFS)
            name = f"{engine} {voice or ''}".strip()
            for echo in (None, ECHO_DB):
                label = f"{name} | {word} | {position} | {'-30 dB' if echo else 'none'}"
                cases.append(Case(label, pcm, float(position), echo, ECHO_LAG_MS))
    return cases


def echo_cases(reply_peak_dbfs: float) -> list[Case]:
    """The reply's own echo alone at ECHO_ALONE's levels and lags."""
    return [Case(f"echo {dbfs:.0f} dBFS peak, +{lag:.0f} ms", None, 0.0,
                 dbfs - reply_peak_dbfs, lag, until_ms=ECHO_ALONE_MS)
            for dbfs, lag in ECHO_ALONE]


def long_cases(reply_peak_dbfs: float) -> tuple[list[Case], list[Case]]:
    """The long-latency grid: (the echo alone at LONG_ECHO_DBFS x LONG_LAGS_MS, a person
    over it: WORDS in two voices, one per lag and level in turn, 2.5 s or 4 s into the file)."""
    alone = [Case(f"echo {dbfs:.0f} dBFS peak, +{lag:.0f} ms", None, 0.0, dbfs - reply_peak_dbfs,
                  lag, until_ms=ECHO_ALONE_MS, max_lag_ms=LONG_MAX_LAG_MS)
             for dbfs in LONG_ECHO_DBFS for lag in LONG_LAGS_MS]
    people = []
    for index, (word, (engine, voice)) in enumerate(
            (w, v) for v in VOICES[:2] for w in WORDS):
        dbfs = LONG_ECHO_DBFS[index % 2]
        lag = LONG_LAGS_MS[index % len(LONG_LAGS_MS)]
        position = (2500.0, 4000.0)[index // 2 % 2]
        pcm = speech_fixtures.at_peak_dbfs(speech_fixtures.speech(word, engine, voice),
                                           PERSON_PEAK_DBFS)
        people.append(Case(f"{engine} {voice or ''} | {word} | {position:.0f} | echo "
                           f"{dbfs:.0f} dBFS +{lag:.0f} ms", pcm, position,
                           dbfs - reply_peak_dbfs, lag, max_lag_ms=LONG_MAX_LAG_MS))
    return alone, people


def report_long(alone: Sequence[Outcome], people: Sequence[Outcome], load: str) -> list[bool]:
    """Table G4 (the long-latency grid); returns the verdict (no false barge-in, none
    missed)."""
    rows = []
    for outcome in [*alone, *people]:
        lags = {e["echoLagMs"] for e in outcome.events if e.get("echoLagMs") is not None}
        person = outcome.case.person is not None
        result = ("void" if outcome.void else
                  ("heard" if outcome.heard else "MISSED") if person else
                  "FALSE barge-in" if outcome.page_barge_in else "no barge-in")
        rows.append((outcome.case.label, round(outcome.rendered_at_click_ms), outcome.plays,
                     result, fmt(outcome.fired_early_ms) if person else "-",
                     fmt(outcome.fired_ms) if person else "-",
                     fmt(outcome.onset_to_silence_ms),
                     "-" if not lags else f"{min(lags)}-{max(lags)}"))
    false = sum(o.page_barge_in for o in alone if not o.void)
    missed = sum(not o.heard for o in people if not o.void)
    void = sum(o.void for o in [*alone, *people])
    print_table(f"G4. A loudspeaker 600-1250 ms late ({load}); false barge-ins by the page "
                f"VAD on the echo alone {false} of {len(alone)}, people missed {missed} of "
                f"{len(people)}, {void} void (target 0 / 0: {verdict(false == missed == 0)})",
                ["case", "rendered at mic on ms", "plays", "result",
                 "fired before the person ms", "fired - true onset ms",
                 "VAD onset -> silence ms", "echo path lag ms"], rows)
    return [false == 0, missed == 0]


def room_cases() -> list[Case]:
    """ROOMS, each ROOM_MS long."""
    cases = []
    for kind, dbfs in ROOMS:
        pcm = (room_sounds.babble(ROOM_MS, dbfs) if kind == "babble"
               else room_sounds.tv_talker(ROOM_MS, dbfs))
        cases.append(Case(f"{kind} {dbfs:.0f} dBFS", room=pcm, room_ms=ROOM_MS))
    return cases


def fmt(value: float | None) -> str:
    """A ms value for a table cell ("-" for none)."""
    return "-" if value is None else f"{value:.0f}"


def report_people(outcomes: Sequence[Outcome], load: str) -> list[bool]:
    """Tables G1-G2; returns the verdicts (missed, onset -> silence)."""
    rows = []
    for outcome in outcomes:
        rows.append((*outcome.case.label.split(" | "), round(outcome.rendered_at_click_ms),
                     outcome.plays, outcome.server_turns,
                     "void (stalled)" if outcome.void else "page VAD" if outcome.heard else
                     "MISSED: the server stopped it" if outcome.server_barge_in else
                     "MISSED: the page fired before the person, at "
                     f"{outcome.fired_early_ms:.0f} ms" if outcome.fired_early_ms is not None
                     else "MISSED",
                     fmt(outcome.vad_onset_ms), fmt(outcome.fired_ms),
                     fmt(outcome.onset_to_silence_ms)))
    print_table(f"G1. Real interruptions over a Piper reply, page VAD in Chromium ({load})",
                ["voice", "word", "file ms", "echo", "rendered at mic on ms", "plays",
                 "server VAD turns", "stopped by", "VAD onset - true onset ms",
                 "fired - true onset ms", "VAD onset -> silence ms"], rows)
    summary = []
    verdicts = []
    for echo in ("none", "-30 dB"):
        group = [o for o in outcomes if o.case.label.endswith(echo) and not o.void]
        missed = sum(not o.heard for o in group)
        silences = [o.onset_to_silence_ms for o in group if o.heard
                    and o.onset_to_silence_ms is not None]
        summary.append((f"echo {echo}", len(group), missed, "0", verdict(missed == 0),
                        percentile(silences, 50), percentile(silences, 95),
                        max(silences, default=float("nan"))))
        verdicts.append(missed == 0)
    valid = [o for o in outcomes if not o.void]
    every = [o.onset_to_silence_ms for o in valid if o.heard
             and o.onset_to_silence_ms is not None]
    silence_ok = bool(every) and percentile(every, 95) <= SILENCE_P95_MS
    summary.append((f"all ({len(outcomes) - len(valid)} void: the playback stalled in every "
                    "play)", len(valid), sum(not o.heard for o in valid), "0",
                    verdict(all(verdicts)), percentile(every, 50), percentile(every, 95),
                    max(every, default=float("nan"))))
    print_table("G2. Summary: missed by the page VAD; VAD onset -> local silence "
                f"(target p95 <= {SILENCE_P95_MS:.0f} ms: {verdict(silence_ok)})",
                ["cases", "n", "missed", "target", "verdict", "p50 ms", "p95 ms", "max ms"],
                summary)
    return [*verdicts, silence_ok]


def report_false(echoes: Sequence[Outcome], rooms: Sequence[Outcome], load: str) -> list[bool]:
    """Table G3; returns the verdict (no false barge-in by the page's VAD)."""
    rows = []
    for outcome in [*echoes, *rooms]:
        fired = [e for e in outcome.events if e["type"] == "fired" and e["playing"]]
        held = {kind: sum(e["type"] == kind for e in outcome.events) for kind in ("echo",
                                                                                  "room")}
        lags = {e["echoLagMs"] for e in outcome.events if e.get("echoLagMs") is not None}
        rows.append((outcome.case.label + (" (void)" if outcome.void else ""),
                     round(outcome.rendered_at_click_ms), outcome.plays,
                     len(fired), int(outcome.page_barge_in), outcome.server_turns,
                     held["echo"], held["room"],
                     "-" if not lags else f"{min(lags)}-{max(lags)}"))
    false = sum(o.page_barge_in for o in [*echoes, *rooms] if not o.void)
    print_table(f"G3. Nobody speaking: the page's own echo, the room ({load}); "
                f"false barge-ins by the page VAD {false} (target 0: {verdict(false == 0)})",
                ["case", "rendered at mic on ms", "plays",
                 "VAD fired while playing (until read)",
                 "page barge-in", "server VAD turns", "held as echo", "held as room",
                 "echo path lag ms"], rows)
    return [false == 0]


async def grid(seed: int, only: str | None = None) -> list[bool]:
    """Run the grids against a fresh Piper server; print tables G1-G3; return the verdicts.
    `only`: "people" | "false" to run one part; "long": the long-latency grid (G4) alone."""
    synthesizer = CachedSynthesizer(await asyncio.to_thread(loaded_synthesizer, "piper"))
    services = await asyncio.to_thread(
        build_services, ServerConfig(port=0, tts="piper", deterministic=True,
                                     lead_ms=SEND_AHEAD_MS),
        synthesizer=synthesizer)
    demo = DemoServer(services)
    server = await demo.start("127.0.0.1", 0)
    http_url = f"http://127.0.0.1:{demo.port()}"
    verdicts = []
    try:
        reply = await reply_audio(f"ws://127.0.0.1:{demo.port()}/v1/realtime")
        peak = 20 * float(np.log10(np.max(np.abs(reply))))
        with tempfile.TemporaryDirectory() as workdir:
            if only in (None, "people"):
                snapshot = cpu_snapshot()
                people = [await run_case(http_url, case, reply, Path(workdir), seed=seed)
                          for case in person_cases()]
                verdicts += report_people(people, other_load(snapshot))
            if only in (None, "false"):
                snapshot = cpu_snapshot()
                echoes = [await run_case(http_url, case, reply, Path(workdir), seed=seed)
                          for case in echo_cases(peak)]
                rooms = [await run_case(http_url, case, reply, Path(workdir), seed=seed)
                         for case in room_cases()]
                verdicts += report_false(echoes, rooms, other_load(snapshot))
            if only == "long":
                snapshot = cpu_snapshot()
                alone, people = long_cases(peak)
                alone = [await run_case(http_url, case, reply, Path(workdir), seed=seed)
                         for case in alone]
                people = [await run_case(http_url, case, reply, Path(workdir), seed=seed)
                          for case in people]
                verdicts += report_long(alone, people, other_load(snapshot))
    finally:
        server.close()
        await server.wait_closed()
    return verdicts
