"""Microphone benchmarks: barge-in speed and reliability of the page's client VAD in Chromium,
false and missed barge-ins (client and server VAD), spoken-turn reply latency, VAD / ASR CPU.

Browser part: Chromium takes one fake-microphone file per launch, so each run is one launch fed
one long WAV: a marker burst (its VAD onset tells where the file started on the page clock),
then the recordings separated by silences, while the assistant plays a long reply; events are
counted per segment. Protocol part: a plain `websockets` client in a child process
(`--role client`) streams generated microphone audio in real time to a real `DemoServer` in this
process, so `time.process_time()` of this process is the server's CPU. Prints the command,
machine facts and one table per measurement with its target and PASS/FAIL; exit status 1 when a
target fails. About 8 minutes on 2 cores. Method and caveats: benchmarks/README.md.

Run from the project root: `.venv/bin/python -m benchmarks.bench_microphone` (it imports the
`tests` helpers, so it must run as a module). `--grid all|people|false` runs only the page's
barge-in grids of issue 24 instead (benchmarks/page_grid.py: 66 real interruptions in three
voices at 11 positions with and without an echo, the page's own echo alone, babble and TV with
nobody speaking; one Chromium launch each, about 20 minutes on a loaded machine).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from benchmarks import page_grid
from benchmarks.bench_server import (
    cpu_snapshot,
    other_load,
    percentile,
    print_run_header,
    verdict,
)
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services
from server.speech.resampling import resample
from tests import speech_fixtures
from tests.browser import DemoPage, chromium, open_demo
from tests.realtime_client import fetch_reply_audio
from tests.test_browser_microphone import CLICK_MIC

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]

INPUT_RATE_HZ = 24_000
"""Microphone rate on the wire (the session's input format)."""
FRAME_MS = 40
"""Microphone audio per `input_audio_buffer.append` (as the page sends it)."""
SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
              "silence_duration_ms": 500, "create_response": True, "interrupt_response": True}
"""The turn detection the page asks for (web/mic-control.js, SERVER_VAD)."""

SILENCE_EXTRA_MS = 50.0
"""Target: VAD onset -> local silence <= the VAD's minimum speech duration + this."""
REPLY_EXTRA_MS = 700.0
"""Target: utterance end -> first reply audio <= silence_duration_ms + this."""

LONG_PROMPT = "Tell me about the history of radio"
"""A typed prompt the demo responder answers with about a minute of speech."""
MARKER_AT_MS = 500.0
MARKER_MS = 60.0
"""A 60 ms white-noise burst at -6 dBFS peak, 500 ms into each browser WAV: below the VAD's
minimum duration, its onset event puts WAV time 0 on the page clock (+-10 ms frames)."""
LEAD_MS = 1500.0
"""Silence after the marker, before the first recording."""
SPEECH_GAP_MS = 4000.0
"""Silence after each utterance: server VAD end (500 ms), transcription and the reply's first
audio must fit in it, so that the next utterance comes while the reply plays."""
NOISE_GAP_MS = 1500.0
"""Silence after each noise / echo recording."""
PRE_CHECK_MS = 1500.0
"""This long before each recording the driver types LONG_PROMPT if nothing plays."""
TAIL_MS = 2500.0
"""Wait after the last recording before the page state is read."""
ECHO_LEVELS_DBFS = (-36.0, -30.0, -12.0)
"""Levels of the assistant's echo: its reply scaled so that the reply's peak is at this dBFS
(-36: a loudspeaker's residual after echo cancellation, as in tests/test_browser_microphone.py;
-30: the client's level guard holds it; -12: only its envelope guard and the server's echo
detector can tell it from the person)."""
ECHO_RECORDING_MS = 12_000.0
"""Length of each browser echo recording: one browser run each, the microphone hearing the
reply from the moment it is switched on (an echo never starts in the middle of a reply)."""
BROWSER_ECHO_DELAY_MS = 100.0
"""Browser echo recordings: at WAV time t they carry the reply's audio at t - this. The reply
has rendered a few tens of ms when the page's WAV time 0 passes, so the echo lags what plays
by that much more (table 2 shows the measured lag): output + input latency and the room, as
a loudspeaker's echo (it can never lead the playback)."""
MIC_ON_AFTER_WAV0_MS = 15.0
"""Runs without a marker burst (echo): the page's microphone is on (`state.mic.enabled`) this
long after the fake microphone's WAV time 0 (measured with the marker: 14-17 ms)."""
ECHO_DELAY_MS = 150
"""Protocol echo run: the microphone hears the reply this long after the simulated playback
(output + input latency and the room)."""
ECHO_STREAM_S = 10.0
"""Protocol echo run: seconds of echo streamed at each of ECHO_LEVELS_DBFS."""
ECHO_PLAYBACK_MS = 100
"""Protocol echo run: the simulated client plays the reply this long after its first delta
arrived (its jitter buffer), and ACKs that position."""
NOISE_BURSTS = 18
"""Noise bursts / coughs per run (speech_fixtures.short_bursts, 50-180 ms, below both VADs'
minimum speech durations)."""
PROTOCOL_UTTERANCES = 12
"""Utterances streamed in each protocol run (the first 12 of SPEECH_SENTENCES: 6 Piper,
6 espeak-ng)."""

SPEECH_SENTENCES = (
    "Wait, what time does it open?",
    "Sorry, what time does it open?",
    "Hold on, I have a quick question.",
    "Stop, that is not what I asked.",
    "Can you slow down a little?",
    "Actually, I need the weekend hours.",
    "Excuse me, how much does it cost?",
    "No, I meant the other museum.",
    "Hang on, is it open on Sunday?",
    "Okay, but where do I park the car?",
    "Just a second, let me grab a pen.",
    "Tell me about the weather instead.",
    "Really? I thought it was closed today.",
    "Never mind, what about the train?",
    "Wait a moment, which floor is it on?",
    "Could you tell me about the planets?",
    "Hmm, that sounds too expensive for me.",
    "Please skip ahead to the opening hours.",
    "Sorry to interrupt, but I am in a hurry.",
    "What was the name of that street?",
    "Okay, thanks, that is enough for now.",
    "Is there a discount for students?",
    "Tell me how bread rises.",
    "Wait, wait, what was the address?",
)
"""Things people say over an assistant: even indices in the Piper voice, odd ones in the
espeak-ng voices of speech_fixtures.ESPEAK_VOICES in turn."""

BURST_KINDS = ("white noise", "pink noise", "cough")
"""The order in which speech_fixtures.short_bursts cycles its makers."""


# ---------------------------------------------------------------------------------- recordings


@dataclass(frozen=True, slots=True)
class Recording:
    """One generated microphone recording: `kind` ("piper", "espeak en-us", "cough", "echo
    -30 dBFS", ...), the sentence it says ("" for noise) and 16 kHz float32 PCM. An echo
    recording (`echo_dbfs` set) is silence until `page_run` fills it with the part of the
    reply that plays BROWSER_ECHO_DELAY_MS before its place in the track, scaled to
    `echo_dbfs` peak."""

    kind: str
    text: str
    pcm: np.ndarray
    echo_dbfs: float | None = None


@dataclass(frozen=True, slots=True)
class Segment:
    """A recording placed in a microphone track: first and last sample at -40 dBFS or louder,
    ms on the track's timeline (speech_fixtures.active_span_ms)."""

    recording: Recording
    onset_ms: float
    offset_ms: float


def speech_recordings(count: int = len(SPEECH_SENTENCES)) -> list[Recording]:
    """The first `count` SPEECH_SENTENCES, synthesized (Piper / espeak-ng voices in turn)."""
    voices = speech_fixtures.ESPEAK_VOICES
    recordings = []
    for index, text in enumerate(SPEECH_SENTENCES[:count]):
        if index % 2 == 0:
            recordings.append(Recording("piper", text, speech_fixtures.speech(text)))
        else:
            voice = voices[(index // 2) % len(voices)]
            recordings.append(Recording(f"espeak {voice}", text,
                                        speech_fixtures.speech(text, "espeak", voice)))
    return recordings


def noise_recordings(seed: int) -> list[Recording]:
    """NOISE_BURSTS seeded white / pink noise bursts and coughs of 50-180 ms."""
    bursts = speech_fixtures.short_bursts(seed, count=NOISE_BURSTS, max_ms=180.0)
    return [Recording(BURST_KINDS[i % len(BURST_KINDS)], "", pcm) for i, pcm in enumerate(bursts)]


def echo_recording(dbfs: float) -> Recording:
    """An echo placeholder of ECHO_RECORDING_MS at `dbfs` peak."""
    return Recording(f"echo {dbfs:.0f} dBFS", "", speech_fixtures.silence(ECHO_RECORDING_MS),
                     dbfs)


def fill_echoes(track: np.ndarray, segments: Sequence[Segment], reply: np.ndarray) -> None:
    """Write the reply's audio (16 kHz) into the echo segments of `track`, in place: at track
    position t the reply's position t - BROWSER_ECHO_DELAY_MS. Scaled so that the reply's peak
    is at the segment's `echo_dbfs`."""
    peak = float(np.max(np.abs(reply)))
    rate = speech_fixtures.RATE_HZ
    delay = round(BROWSER_ECHO_DELAY_MS * rate / 1000)
    for segment in segments:
        dbfs = segment.recording.echo_dbfs
        if dbfs is None:
            continue
        start, end = (round(ms * rate / 1000) for ms in (segment.onset_ms, segment.offset_ms))
        first = max(start, delay)  # before the delay, the reply had not reached the microphone
        part = reply[first - delay:min(end - delay, reply.size)] * (10.0 ** (dbfs / 20.0) / peak)
        track[first:first + part.size] = part


def mic_track(recordings: Sequence[Recording], lead_ms: float, gap_ms: float,
              marker: bool) -> tuple[np.ndarray, list[Segment]]:
    """One 16 kHz track: [marker at MARKER_AT_MS] lead silence, then each recording followed by
    `gap_ms` of silence; returns it with the recordings' segments on its timeline."""
    rate = speech_fixtures.RATE_HZ
    parts = [speech_fixtures.silence(lead_ms)]
    if marker:
        burst = speech_fixtures.white_noise_burst(np.random.default_rng(0), MARKER_MS, -6.0)
        parts = [speech_fixtures.silence(MARKER_AT_MS), burst, speech_fixtures.silence(lead_ms)]
    position = sum(part.size for part in parts)
    segments = []
    for recording in recordings:
        if recording.echo_dbfs is None:
            onset, offset = speech_fixtures.active_span_ms(recording.pcm)
        else:
            onset, offset = 0.0, recording.pcm.size * 1000.0 / rate
        start_ms = position * 1000.0 / rate
        segments.append(Segment(recording, start_ms + onset, start_ms + offset))
        gap = speech_fixtures.silence(gap_ms)
        parts += [recording.pcm, gap]
        position += recording.pcm.size + gap.size
    return np.concatenate(parts).astype(np.float32), segments


# ---------------------------------------------------------------------------------- browser part

PLAYBACK_LOG = """() => {
  const state = window.duplexDemo.state;
  const log = [];
  window.playbackLog = log;
  setInterval(() => {
    const id = state.currentResponseId;
    log.push([performance.now(), id, state.responseState, id ? state.renderedMs(id) : 0]);
  }, 20);
}"""
"""Log [performance.now(), currentResponseId, responseState, renderedMs] every 20 ms
(benchmark instrumentation kept on `window.playbackLog`)."""

PAGE_STATE = """({vadEvents: s.vadEvents, bargeInTimings: s.bargeInTimings,
  speechStarted: s.speechStarted, userTranscripts: s.userTranscripts})"""


@dataclass(slots=True)
class PageRun:
    """What one browser run recorded. Times are the page's performance.now() ms.

    Attributes:
        segments: the recordings on the WAV timeline.
        wav0: page time of WAV time 0 (marker onset event - MARKER_AT_MS).
        input0: page time of input-timeline 0 of the server (the mic was on).
        min_speech_ms: the client VAD's minimum speech duration.
        state: vadEvents, bargeInTimings, speechStarted, userTranscripts of the page state.
        log: PLAYBACK_LOG rows.
        typed: prompts the driver typed to keep a reply playing (the first one included).
    """

    segments: list[Segment]
    wav0: float
    input0: float
    min_speech_ms: float
    state: dict[str, Any]
    log: list[list[Any]]
    typed: int


async def type_prompt(demo: DemoPage) -> None:
    """Type LONG_PROMPT and press Send (without waiting for the response)."""
    await demo.page.get_by_test_id("prompt").fill(LONG_PROMPT)
    await demo.page.get_by_test_id("send").click()


async def keep_playing(demo: DemoPage, clicked: float, segments: Sequence[Segment],
                       end_ms: float, stop_reply_ms: float | None = None) -> int:
    """Until WAV time `end_ms` + TAIL_MS: PRE_CHECK_MS before each segment, type LONG_PROMPT
    when nothing plays; at WAV time `stop_reply_ms` (if given) press Stop. WAV time is taken as
    page time - `clicked`. Returns prompts typed."""
    offset = time.perf_counter() * 1000.0 - await demo.page.evaluate("performance.now()")

    async def until(page_ms: float) -> None:
        await asyncio.sleep(max(0.0, (offset + page_ms) / 1000.0 - time.perf_counter()))

    typed = 0
    for segment in segments:
        await until(clicked + segment.onset_ms - PRE_CHECK_MS)
        if await demo.state("s.responseState") != "speaking":
            await type_prompt(demo)
            typed += 1
    if stop_reply_ms is not None:
        await until(clicked + stop_reply_ms)
        await demo.page.get_by_test_id("stop").click()
    await until(clicked + end_ms + TAIL_MS)
    return typed


async def page_run(http_url: str, recordings: Sequence[Recording], gap_ms: float,
                   workdir: Path, reply: np.ndarray, marker: bool = True) -> PageRun:
    """Play `recordings` (after the marker, `gap_ms` apart) into the page over a long reply
    (`reply`: its audio at 16 kHz, for the echo recordings). Without `marker`, the recordings
    start at WAV time 0, WAV time 0 is placed MIC_ON_AFTER_WAV0_MS before the microphone was
    on, and the driver presses Stop BROWSER_ECHO_DELAY_MS before the WAV ends (an echo run: the
    reply stops where its echo ends, as a loudspeaker's would).

    Raises:
        RuntimeError: the marker burst was not seen by the client VAD.
    """
    track, segments = mic_track(recordings, LEAD_MS if marker else 0.0, gap_ms, marker)
    fill_echoes(track, segments, reply)
    wav = speech_fixtures.write_wav(workdir / "mic.wav", track)
    async with chromium(fake_mic=wav) as browser, open_demo(browser, http_url) as demo:
        await demo.page.evaluate(PLAYBACK_LOG)
        await type_prompt(demo)
        await demo.wait_state("s.currentResponseId && s.renderedMs(s.currentResponseId) > 0",
                              timeout_s=30)
        mic = await demo.page.evaluate(CLICK_MIC)
        track_ms = track.size * 1000.0 / speech_fixtures.RATE_HZ
        stop_ms = None if marker else track_ms - BROWSER_ECHO_DELAY_MS
        typed = 1 + await keep_playing(demo, mic["clicked"], segments, track_ms, stop_ms)
        state = await demo.state(PAGE_STATE)
        log = await demo.page.evaluate("window.playbackLog")
        min_speech = await demo.page.evaluate("window.duplexDemo.vadConfig.minSpeechMs")
    if not marker:
        return PageRun(segments, mic["enabled"] - MIC_ON_AFTER_WAV0_MS, mic["enabled"],
                       min_speech, state, log, typed)
    seen = next((e for e in state["vadEvents"] if e["type"] == "onset"
                 and e["t"] - mic["clicked"] < MARKER_AT_MS + 500), None)
    if seen is None:
        raise RuntimeError("the client VAD did not see the marker burst")
    return PageRun(segments, seen["t"] - MARKER_AT_MS, mic["enabled"], min_speech, state, log,
                   typed)


def playing_response(log: Sequence[Sequence[Any]], page_ms: float) -> str | None:
    """The response whose rendered position advanced over the 200 ms before `page_ms`."""
    rows = [row for row in log if page_ms - 200 <= row[0] <= page_ms]
    if len(rows) < 2 or not rows[-1][1] or rows[0][1] != rows[-1][1]:
        return None
    return rows[-1][1] if rows[-1][3] > rows[0][3] else None


def reply_active(log: Sequence[Sequence[Any]], page_ms: float) -> bool:
    """Whether the page's current reply was active at `page_ms` (responseState 'speaking':
    waiting for or rendering audio), so that a client VAD `fired` then is a barge-in."""
    rows = [row for row in log if row[0] <= page_ms]
    return bool(rows) and rows[-1][2] == "speaking"


def server_starts_wav_ms(run: PageRun) -> list[float]:
    """Server `speech_started` positions moved to the WAV timeline: audio_start_ms plus the
    prefix padding, plus the time between WAV 0 and the first audio the page sent."""
    shift = run.input0 - run.wav0 + SERVER_VAD["prefix_padding_ms"]
    return [event["audio_start_ms"] + shift for event in run.state["speechStarted"]]


@dataclass(frozen=True, slots=True)
class SpeechOutcome:
    """One utterance over the reply: `outcome` is "client VAD" | "server VAD" (the page's VAD
    did not stop the reply, the server's did) | "missed" | "not playing" (no reply played at
    its onset); `onset_delay_ms` = client VAD onset of the candidate that fired - true onset;
    `onset_to_silence_ms` = bargeInTimings.onsetToSilenceMs (from that VAD onset)."""

    segment: Segment
    outcome: str
    onset_delay_ms: float | None
    onset_to_silence_ms: float | None


def speech_outcomes(run: PageRun) -> list[SpeechOutcome]:
    """Classify each utterance of a speech run (see SpeechOutcome)."""
    events = run.state["vadEvents"]
    outcomes = []
    for segment in run.segments:
        onset_t = run.wav0 + segment.onset_ms
        end_t = run.wav0 + segment.offset_ms + 1000.0
        response = playing_response(run.log, onset_t)
        fired = next((i for i, e in enumerate(events)
                      if e["type"] == "fired" and onset_t - 50 <= e["t"] <= end_t), None)
        delay = None
        if fired is not None:
            vad_onset = next(e for e in reversed(events[:fired]) if e["type"] == "onset")
            delay = vad_onset["t"] - onset_t
        timing = next((t for t in run.state["bargeInTimings"]
                       if response is not None and t["responseId"] == response), None)
        if response is None:
            outcome = "not playing"
        elif timing is None:
            outcome = "missed"
        else:
            outcome = "client VAD" if timing["source"] == "vad" else "server VAD"
        silence = timing["onsetToSilenceMs"] if timing and outcome == "client VAD" else None
        outcomes.append(SpeechOutcome(segment, outcome, delay, silence))
    return outcomes


@dataclass(frozen=True, slots=True)
class FalseAlarm:
    """What one noise / echo recording set off: client VAD `fired` events and server
    `speech_started` events in its window, each split by whether a reply was active then
    (`reply_active`), and the replies stopped in its window by source (bargeInTimings: "vad" |
    "server_vad"); `playing`: a reply rendered at its onset."""

    segment: Segment
    playing: bool
    client_during: int
    client_idle: int
    server_during: int
    server_idle: int
    stopped_by_client: int
    stopped_by_server: int


def reply_stops(run: PageRun) -> list[tuple[float, str]]:
    """(page ms, source) of every reply stopped before its end: the first log row showing it
    'stopped', with the source of its bargeInTimings entry ("?" when none)."""
    first: dict[str, float] = {}
    for t, response_id, state, _ in run.log:
        if response_id and state == "stopped":
            first.setdefault(response_id, t)
    sources = {t["responseId"]: t["source"] for t in run.state["bargeInTimings"]}
    return [(t, sources.get(response_id, "?")) for response_id, t in first.items()]


def false_alarms(run: PageRun) -> tuple[list[FalseAlarm], int, int]:
    """Per-segment false alarms of a noise / echo run, plus the client `fired` and server
    `speech_started` events that fell outside every segment window."""
    fired = [e["t"] for e in run.state["vadEvents"] if e["type"] == "fired"]
    starts = [run.wav0 + ms for ms in server_starts_wav_ms(run)]
    stops = reply_stops(run)

    def split(times: Sequence[float]) -> tuple[int, int]:
        during = sum(reply_active(run.log, t) for t in times)
        return during, len(times) - during

    alarms, client_seen, server_seen = [], 0, 0
    for segment in run.segments:
        low, high = run.wav0 + segment.onset_ms - 300, run.wav0 + segment.offset_ms + 700
        client = [t for t in fired if low <= t <= high]
        server = [t for t in starts if low <= t <= high]
        sources = [source for t, source in stops if low <= t <= high]
        playing = playing_response(run.log, run.wav0 + segment.onset_ms) is not None
        alarms.append(FalseAlarm(segment, playing, *split(client), *split(server),
                                 sources.count("vad"), sources.count("server_vad")))
        client_seen += len(client)
        server_seen += len(server)
    return alarms, len(fired) - client_seen, len(starts) - server_seen


ECHO_LAG_PROBE_MS = 250.0
"""The lag of an echo recording is read this long after its onset (before a false barge-in
can have stopped the reply: the client VAD needs 200 ms)."""


def echo_lag_ms(run: PageRun, segment: Segment) -> float | None:
    """How far the echo recording `segment` lags what the page plays ECHO_LAG_PROBE_MS after
    its onset: the current reply's rendered position then (playback log, +-20 ms) minus the
    reply position the recording carries; None when no reply was rendering."""
    wav_ms = segment.onset_ms + ECHO_LAG_PROBE_MS
    page_ms = run.wav0 + wav_ms
    rows = [row for row in run.log if row[0] <= page_ms]
    if not rows or not rows[-1][1] or rows[-1][2] != "speaking":
        return None
    t, _, _, rendered = rows[-1]
    return rendered + (page_ms - t) - (wav_ms - BROWSER_ECHO_DELAY_MS)


def fmt(value: float | None) -> str:
    """A ms value for a table cell ("-" for none)."""
    return "-" if value is None else f"{value:.0f}"


def report_speech(run: PageRun, load: str) -> list[bool]:
    """Tables 1 and 1b; returns the verdicts (onset -> silence, missed barge-ins)."""
    outcomes = speech_outcomes(run)
    rows = [(o.segment.recording.kind, o.segment.recording.text[:36], o.outcome,
             fmt(o.onset_delay_ms), fmt(o.onset_to_silence_ms),
             fmt(None if o.onset_to_silence_ms is None or o.onset_delay_ms is None
                 else o.onset_to_silence_ms + o.onset_delay_ms)) for o in outcomes]
    print_table(f"1. Barge-in by voice in Chromium, per utterance ({load})",
                ["voice", "utterance", "stopped by", "VAD onset-true ms",
                 "VAD onset->silence ms", "true onset->silence ms"], rows)
    playing = [o for o in outcomes if o.outcome != "not playing"]
    client = [o for o in playing if o.outcome == "client VAD"]
    silences = [o.onset_to_silence_ms for o in client if o.onset_to_silence_ms is not None]
    delays = [o.onset_delay_ms for o in client if o.onset_delay_ms is not None]
    target = run.min_speech_ms + SILENCE_EXTRA_MS
    missed = sum(o.outcome == "missed" for o in playing)
    silence_ok = bool(silences) and percentile(silences, 95) <= target
    count_ok = len(playing) >= 20 and missed == 0
    headers = ["measure", "n", "p50", "p95", "max", "target", "verdict"]
    print_table("1b. Barge-in summary", headers, [
        ("VAD onset -> local silence ms", len(silences), percentile(silences, 50),
         percentile(silences, 95), max(silences, default=float("nan")),
         f"p95 <= {target:.0f}", verdict(silence_ok)),
        ("VAD onset - true onset ms", len(delays), percentile(delays, 50),
         percentile(delays, 95), max(delays, default=float("nan")), "report", ""),
        ("utterances during a reply", len(playing), "", "", "", ">= 20", ""),
        ("stopped by the client VAD", len(client), "", "", "", "report", ""),
        ("stopped by server VAD only", sum(o.outcome == "server VAD" for o in playing),
         "", "", "", "report", ""),
        ("missed barge-ins", missed, "", "", "", "0 (n >= 20)", verdict(count_ok)),
    ])
    print(f"   typed prompts to keep a reply playing: {run.typed}; utterances with no reply "
          f"playing at their onset: {len(outcomes) - len(playing)}")
    return [silence_ok, count_ok]


def report_false_alarms(runs: Sequence[PageRun], load: str) -> list[bool]:
    """Table 2 over the noise run and the echo runs; returns the verdicts (client VAD, server
    VAD)."""
    alarms: list[FalseAlarm] = []
    client_elsewhere = server_elsewhere = 0
    for run in runs:
        run_alarms, client_outside, server_outside = false_alarms(run)
        alarms += run_alarms
        client_elsewhere += client_outside
        server_elsewhere += server_outside
    fields = ("playing", "client_during", "client_idle", "stopped_by_client", "server_during",
              "server_idle", "stopped_by_server")
    rows: list[tuple[object, ...]] = []
    for kind in dict.fromkeys(a.segment.recording.kind for a in alarms):
        group = [a for a in alarms if a.segment.recording.kind == kind]
        rows.append((kind, len(group), *(sum(getattr(a, f) for a in group) for f in fields)))
    rows.append(("outside every recording", "", "", client_elsewhere, "", "", server_elsewhere,
                 "", ""))
    totals = [sum(getattr(a, f) for a in alarms) for f in fields]
    client_ok = totals[1] == 0 and len(alarms) >= 20
    server_ok = totals[4] + totals[5] + server_elsewhere == 0 and len(alarms) >= 20
    rows.append(("total", len(alarms), *totals))
    print_table(f"2. False barge-ins in Chromium: noise, coughs, echo ({load})",
                ["recording", "n", "reply playing", "client fired: reply active", "idle",
                 "stops by client", "server speech_started: reply active", "idle",
                 "stops by server"], rows)
    lags = [f"{segment.recording.kind}: {fmt(echo_lag_ms(run, segment))}" for run in runs
            for segment in run.segments if segment.recording.echo_dbfs is not None]
    print(f"   echo lag behind the playback {ECHO_LAG_PROBE_MS:.0f} ms into each echo "
          f"recording, ms: {', '.join(lags)}")
    print(f"   client VAD: fired while a reply was active = {totals[1]} (target 0, n >= 20) "
          f"{verdict(client_ok)}; server VAD: speech_started = "
          f"{totals[4] + totals[5] + server_elsewhere} (target 0) {verdict(server_ok)}")
    return [client_ok, server_ok]


# ---------------------------------------------------------------------------------- protocol part


class StreamClient:
    """A `websockets` client that records every server event with its arrival time
    (time.perf_counter() s) from a reader task."""

    def __init__(self, websocket: ClientConnection) -> None:
        self.websocket = websocket
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.on_event: Any = None
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for frame in self.websocket:
            event = json.loads(frame)
            self.events.append((time.perf_counter(), event))
            if self.on_event is not None:
                self.on_event(event)

    async def send(self, event: dict[str, Any]) -> None:
        """Send one client event."""
        await self.websocket.send(json.dumps(event))

    def of_type(self, event_type: str) -> list[tuple[float, dict[str, Any]]]:
        """(arrival s, event) of every received event of `event_type`, in order."""
        return [(t, e) for t, e in self.events if e["type"] == event_type]

    async def wait_until(self, predicate: Any, timeout_s: float) -> bool:
        """Poll `predicate()` every 10 ms; False when it stayed false for `timeout_s`."""
        deadline = time.perf_counter() + timeout_s
        while not predicate():
            if time.perf_counter() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    async def close(self) -> None:
        """Close the socket and stop the reader."""
        await self.websocket.close()
        self._reader.cancel()


def reply_16k(pcm16: bytes) -> np.ndarray:
    """A reply's PCM16 audio at INPUT_RATE_HZ (the session's output rate) as float32 at the
    16 kHz of the generated recordings."""
    pcm = np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0
    return resample(pcm, INPUT_RATE_HZ, speech_fixtures.RATE_HZ)


async def open_stream(url: str, detection: dict[str, Any]) -> StreamClient:
    """Connect, set `detection` as turn detection and wait for `session.updated`."""
    client = StreamClient(await connect(url, max_size=None))
    await client.send({"type": "session.update",
                       "session": {"audio": {"input": {"turn_detection": detection}}}})
    await client.wait_until(lambda: client.of_type("session.updated"), 10)
    return client


async def stream_track(client: StreamClient, track_16k: np.ndarray) -> float:
    """Send `track_16k` as PCM16 at 24 kHz in FRAME_MS appends, frame i when its last sample
    would have been captured (t0 + (i + 1) * FRAME_MS); returns t0 (perf_counter s)."""
    pcm16 = speech_fixtures.to_pcm16(resample(track_16k, speech_fixtures.RATE_HZ,
                                              INPUT_RATE_HZ))
    frame = INPUT_RATE_HZ * 2 * FRAME_MS // 1000
    t0 = time.perf_counter()
    for index, start in enumerate(range(0, len(pcm16), frame)):
        await asyncio.sleep(max(0.0, t0 + (index + 1) * FRAME_MS / 1000 - time.perf_counter()))
        await client.send({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(pcm16[start:start + frame]).decode()})
    return t0


def track_seconds(track: np.ndarray) -> float:
    """Duration of a 16 kHz track in s."""
    return track.size / speech_fixtures.RATE_HZ


def segment_spans(segments: Sequence[Segment]) -> list[list[float]]:
    """[[onset_ms, offset_ms], ...] for JSON."""
    return [[s.onset_ms, s.offset_ms] for s in segments]


async def client_noise(url: str, seed: int) -> dict[str, Any]:
    """Raw noise bursts and coughs, nothing playing: server VAD only (CPU + false starts)."""
    track, segments = mic_track(noise_recordings(seed), 500.0, NOISE_GAP_MS, marker=False)
    client = await open_stream(url, SERVER_VAD)
    print("start", flush=True)
    await stream_track(client, track)
    await asyncio.sleep(1.0)
    await client.close()
    return {"audio_s": track_seconds(track), "segments": len(segments),
            "speech_started": len(client.of_type("input_audio_buffer.speech_started"))}


async def client_echo(url: str, seed: int) -> dict[str, Any]:
    """The reply's own audio streamed back as the microphone while it plays (real-time ACKs
    every 150 ms, played = time since its first audio - ECHO_PLAYBACK_MS), heard ECHO_DELAY_MS
    after it played: one session per level of ECHO_LEVELS_DBFS, ECHO_STREAM_S each."""
    reply = reply_16k(await fetch_reply_audio(url, LONG_PROMPT))
    echo = reply[:round(ECHO_STREAM_S * speech_fixtures.RATE_HZ)] / float(np.max(np.abs(reply)))
    lead = speech_fixtures.silence(ECHO_PLAYBACK_MS + ECHO_DELAY_MS)
    print("start", flush=True)
    audio_s, started, interrupted = 0.0, 0, 0
    for dbfs in ECHO_LEVELS_DBFS:
        track = np.concatenate([lead, echo * 10.0 ** (dbfs / 20.0)])
        client = await open_stream(url, SERVER_VAD)
        await client.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": LONG_PROMPT}]}})
        await client.send({"type": "response.create"})
        await client.wait_until(lambda c=client: c.of_type("response.output_audio.delta"), 20)
        first_audio, delta = client.of_type("response.output_audio.delta")[0]
        player = asyncio.create_task(ack_in_real_time(client, delta["response_id"], first_audio))
        await stream_track(client, track)
        await asyncio.sleep(1.0)
        player.cancel()
        await client.close()
        audio_s += track_seconds(track)
        started += len(client.of_type("input_audio_buffer.speech_started"))
        interrupted += bool(client.of_type("output_audio_buffer.cleared"))
    return {"audio_s": audio_s, "segments": len(ECHO_LEVELS_DBFS), "speech_started": started,
            "interrupted": interrupted}


async def ack_in_real_time(client: StreamClient, response_id: str, first_audio: float) -> None:
    """ACK `response_id` every 150 ms as a player ECHO_PLAYBACK_MS behind its first delta
    (`first_audio`, perf_counter s) would, until the server clears its audio."""
    while not client.of_type("output_audio_buffer.cleared"):
        sent = max(e["audio_end_ms"] for _, e in client.of_type("response.output_audio.delta")
                   if e["response_id"] == response_id)
        played = min(sent, (time.perf_counter() - first_audio) * 1000 - ECHO_PLAYBACK_MS)
        await client.send({"type": "playback.ack", "response_id": response_id,
                           "played_ms": max(0, int(played))})
        await asyncio.sleep(0.15)


async def client_asr(url: str, seed: int) -> dict[str, Any]:
    """Utterances with turn detection but no responses: VAD + transcription CPU."""
    recordings = speech_recordings(PROTOCOL_UTTERANCES)
    track, _ = mic_track(recordings, 1000.0, 2500.0, marker=False)
    client = await open_stream(url, {**SERVER_VAD, "create_response": False})
    print("start", flush=True)
    await stream_track(client, track)

    def settled() -> bool:
        done = len(client.of_type("conversation.item.input_audio_transcription.completed"))
        deleted = len(client.of_type("conversation.item.deleted"))
        return done + deleted >= len(client.of_type("input_audio_buffer.committed"))

    await client.wait_until(settled, 30)
    starts = {e["item_id"]: e["audio_start_ms"]
              for _, e in client.of_type("input_audio_buffer.speech_started")}
    committed_ms = sum(e["audio_end_ms"] - starts.get(e["item_id"], e["audio_end_ms"])
                       for _, e in client.of_type("input_audio_buffer.speech_stopped"))
    await client.close()
    return {"audio_s": track_seconds(track), "utterances": len(recordings),
            "committed_s": committed_ms / 1000,
            "transcripts": len(client.of_type(
                "conversation.item.input_audio_transcription.completed"))}


async def client_reply(url: str, seed: int) -> dict[str, Any]:
    """Utterances with automatic responses: utterance end -> first reply audio. Each reply is
    stopped (`barge_in` at 0 ms) on its first audio so that the next utterance is a new turn."""
    recordings = speech_recordings(PROTOCOL_UTTERANCES)
    track, segments = mic_track(recordings, 1000.0, 3500.0, marker=False)
    client = await open_stream(url, SERVER_VAD)
    stopped: set[str] = set()
    sends: list[asyncio.Task[None]] = []

    def stop_reply(event: dict[str, Any]) -> None:
        if event["type"] == "response.output_audio.delta" and event["response_id"] not in stopped:
            stopped.add(event["response_id"])
            sends.append(asyncio.ensure_future(client.send({
                "type": "barge_in", "response_id": event["response_id"], "audio_end_ms": 0,
                "source": "button"})))

    client.on_event = stop_reply
    print("start", flush=True)
    t0 = await stream_track(client, track)
    await client.wait_until(lambda: len(stopped) >= len(segments), 15)
    await client.close()
    return {"turns": [turn_latency(client, t0, segment) for segment in segments]}


def turn_latency(client: StreamClient, t0: float, segment: Segment) -> dict[str, float | None]:
    """For one utterance: ms from its true end (t0 + offset) to the server's speech_stopped,
    the transcript and the reply's first audio delta (None when missing)."""
    end_s = t0 + segment.offset_ms / 1000

    def after(event_type: str, key: Any) -> tuple[float, dict[str, Any]] | None:
        return next(((t, e) for t, e in client.of_type(event_type) if key(t, e)), None)

    stop = after("input_audio_buffer.speech_stopped",
                 lambda _, e: abs(e["audio_end_ms"] - segment.offset_ms) <= 600)
    if stop is None:
        return {"stopped": None, "transcript": None, "audio": None}
    item = stop[1]["item_id"]
    text = after("conversation.item.input_audio_transcription.completed",
                 lambda _, e: e["item_id"] == item)
    created = after("response.created", lambda t, _: text is not None and t >= text[0])
    reply = None if created is None else created[1]["response"]["id"]
    audio = None if reply is None else after("response.output_audio.delta",
                                             lambda _, e: e["response_id"] == reply)
    return {"stopped": (stop[0] - end_s) * 1000,
            "transcript": None if text is None else (text[0] - end_s) * 1000,
            "audio": (audio[0] - end_s) * 1000 if audio else None}


CLIENT_MODES = {"noise": client_noise, "echo": client_echo, "asr": client_asr,
                "reply": client_reply}


async def protocol_run(url: str, mode: str, seed: int) -> tuple[dict[str, Any], float, str]:
    """Run client `mode` in a child process; returns (its JSON result, this process's CPU s
    from its "start" line to its result, the other-load note).

    Raises:
        RuntimeError: the child failed or did not start.
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.bench_microphone", "--role", "client", "--mode", mode,
        "--url", url, "--seed", str(seed), cwd=ROOT, stdout=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    async with asyncio.timeout(180):
        line = await process.stdout.readline()
    if line.strip() != b"start":
        raise RuntimeError(f"client {mode} did not start: {line!r}")
    snapshot, cpu = cpu_snapshot(), time.process_time()
    async with asyncio.timeout(300):
        output = await process.stdout.readline()
    cpu = time.process_time() - cpu
    if await process.wait() != 0 or not output:
        raise RuntimeError(f"client {mode} failed")
    return json.loads(output), cpu, other_load(snapshot)


async def report_protocol(url: str, seed: int) -> list[bool]:
    """Tables 3-5; returns the verdicts (raw noise, raw echo, reply latency)."""
    noise, noise_cpu, noise_load = await protocol_run(url, "noise", seed)
    echo, _, echo_load = await protocol_run(url, "echo", seed)
    noise_ok, echo_ok = noise["speech_started"] == 0, echo["speech_started"] == 0
    print_table(f"3. Server VAD on raw audio over the protocol (no browser processing; "
                f"{noise_load}; {echo_load})",
                ["recordings", "n", "speech_started", "reply interrupted", "target", "verdict"], [
        ("noise bursts + coughs, idle", noise["segments"], noise["speech_started"], "-", "0",
         verdict(noise_ok)),
        (f"the reply's own audio at {' / '.join(f'{d:.0f}' for d in ECHO_LEVELS_DBFS)} "
         f"dBFS peak (a session each), {ECHO_DELAY_MS} ms late", echo["segments"],
         echo["speech_started"], echo["interrupted"], "0", verdict(echo_ok)),
    ])

    reply, _, reply_load = await protocol_run(url, "reply", seed)
    turns = reply["turns"]
    totals = [t["audio"] for t in turns if t["audio"] is not None]
    target = SERVER_VAD["silence_duration_ms"] + REPLY_EXTRA_MS
    reply_ok = len(totals) == len(turns) and percentile(totals, 95) <= target

    def row(name: str, key: str) -> tuple[object, ...]:
        values = [t[key] for t in turns if t[key] is not None]
        return (name, len(values), percentile(values, 50), percentile(values, 95),
                max(values, default=float("nan")))

    print_table(f"4. Utterance end -> first reply audio, protocol client in real time "
                f"({len(turns)} utterances; {reply_load})",
                ["from the utterance's true end to", "n", "p50 ms", "p95 ms", "max ms"], [
        row("server speech_stopped received", "stopped"),
        row("transcript received", "transcript"),
        row(f"first reply audio (target p95 <= {target:.0f}) {verdict(reply_ok)}", "audio"),
    ])

    asr, asr_cpu, asr_load = await protocol_run(url, "asr", seed)
    vad_rate = noise_cpu / noise["audio_s"]
    transcribe_cpu = asr_cpu - vad_rate * asr["audio_s"]
    print_table(f"5. Server CPU per second of microphone audio ({noise_load}; {asr_load})",
                ["run", "audio s", "server CPU s", "CPU % of audio time", "per utterance s",
                 "per utterance-second s"], [
        ("VAD only (noise, no turns)", noise["audio_s"], f"{noise_cpu:.2f}",
         100 * vad_rate, "-", "-"),
        (f"VAD + ASR ({asr['utterances']} utterances, {asr['transcripts']} transcripts)",
         asr["audio_s"], f"{asr_cpu:.2f}", 100 * asr_cpu / asr["audio_s"], "-", "-"),
        ("ASR alone (difference; audio s = committed)", asr["committed_s"],
         f"{transcribe_cpu:.2f}", 100 * transcribe_cpu / asr["audio_s"],
         f"{transcribe_cpu / max(asr['utterances'], 1):.2f}",
         f"{transcribe_cpu / max(asr['committed_s'], 1e-9):.2f}"),
    ])
    return [noise_ok, echo_ok, reply_ok]


# ---------------------------------------------------------------------------------- main


def command_line() -> str:
    """The command that started this run, as typed from the project root."""
    python = Path(sys.executable)
    if python.is_relative_to(ROOT):
        python = python.relative_to(ROOT)
    return shlex.join([str(python), "-m", "benchmarks.bench_microphone", *sys.argv[1:]])


def dump(run: PageRun, path: Path) -> None:
    """Write a page run's raw data as JSON (recordings as kind, text and WAV span)."""
    segments = [{"kind": s.recording.kind, "text": s.recording.text, "onset_ms": s.onset_ms,
                 "offset_ms": s.offset_ms} for s in run.segments]
    path.write_text(json.dumps({"segments": segments, "wav0": run.wav0, "input0": run.input0,
                                "min_speech_ms": run.min_speech_ms, "state": run.state,
                                "log": run.log, "typed": run.typed}))


async def bench(args: argparse.Namespace) -> bool:
    """Run every measurement, printing each table when done; True when every target passed."""
    started = time.perf_counter()
    print_run_header()
    services = await asyncio.to_thread(
        build_services, ServerConfig(port=0, tts="piper", deterministic=True))
    speech = await asyncio.to_thread(speech_recordings)
    noise = await asyncio.to_thread(noise_recordings, args.seed)
    demo = DemoServer(services)
    server = await demo.start(HOST, 0)
    verdicts = []
    try:
        http_url = f"http://{HOST}:{demo.port()}"
        ws_url = f"ws://{HOST}:{demo.port()}/v1/realtime"
        reply = reply_16k(await fetch_reply_audio(ws_url, LONG_PROMPT))
        with tempfile.TemporaryDirectory() as workdir:
            snapshot = cpu_snapshot()
            speech_run = await page_run(http_url, speech, SPEECH_GAP_MS, Path(workdir), reply)
            verdicts += report_speech(speech_run, other_load(snapshot))
            snapshot = cpu_snapshot()
            alarm_runs = [await page_run(http_url, noise, NOISE_GAP_MS, Path(workdir), reply)]
            for dbfs in ECHO_LEVELS_DBFS:
                alarm_runs.append(await page_run(http_url, [echo_recording(dbfs)], 0.0,
                                                 Path(workdir), reply, marker=False))
            verdicts += report_false_alarms(alarm_runs, other_load(snapshot))
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            dump(speech_run, args.dump / "speech_run.json")
            for index, run in enumerate(alarm_runs):
                dump(run, args.dump / f"false_alarm_run_{index}.json")
        verdicts += await report_protocol(ws_url, args.seed)
    finally:
        server.close()
        await server.wait_closed()
    print(f"\ntotal wall time: {time.perf_counter() - started:.0f} s; "
          f"targets: {sum(verdicts)}/{len(verdicts)} PASS")
    return all(verdicts)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; see the module docstring. Exit status 1 when a target fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("main", "client"), default="main",
                        help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=sorted(CLIENT_MODES), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=23, help="seed of the noise bursts")
    parser.add_argument("--dump", type=Path, help="write the browser runs' raw page data "
                        "(JSON) into this directory")
    parser.add_argument("--grid", choices=("all", "people", "false"),
                        help="run only the page's barge-in grids (benchmarks/page_grid.py, "
                        "issue 24): real interruptions, the page's own echo, the room")
    args = parser.parse_args(argv)
    if args.grid:
        print_run_header()
        verdicts = asyncio.run(page_grid.grid(args.seed, None if args.grid == "all"
                                              else args.grid))
        print(f"\ntargets: {sum(verdicts)}/{len(verdicts)} PASS")
        sys.exit(0 if all(verdicts) else 1)
    if args.role == "client":
        result = asyncio.run(CLIENT_MODES[args.mode](args.url, args.seed))
        print(json.dumps(result), flush=True)
        return
    sys.exit(0 if asyncio.run(bench(args)) else 1)


if __name__ == "__main__":
    main()
