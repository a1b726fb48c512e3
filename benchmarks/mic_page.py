"""The browser part of `bench_microphone`: the page in Chromium, fed one fake-microphone WAV while
the assistant plays a long reply, and the barge-ins and false barge-ins it recorded (tables 1,
1b and 2).

Chromium takes one fake-microphone file per launch, so each run is one launch fed one long WAV:
a marker burst (its VAD onset tells where the file started on the page clock), then the
recordings separated by silences; events are counted per segment.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.measuring import percentile, verdict
from benchmarks.mic_recordings import (
    BROWSER_ECHO_DELAY_MS,
    LEAD_MS,
    MARKER_AT_MS,
    Recording,
    Segment,
    fill_echoes,
    mic_track,
)
from benchmarks.tables import print_table
from tests import speech_fixtures
from tests.browser import DemoPage, chromium, open_demo
from tests.test_browser_microphone import CLICK_MIC

SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
              "silence_duration_ms": 500, "create_response": True, "interrupt_response": True}
"""The turn detection the page asks for (web/mic-control.js, SERVER_VAD)."""
SILENCE_EXTRA_MS = 50.0
"""Target: VAD onset -> local silence <= the VAD's minimum speech duration + this."""
LONG_PROMPT = "Tell me about the history of radio"
"""A typed prompt the demo responder answers with about a minute of speech."""
PRE_CHECK_MS = 1500.0
"""This long before each recording the driver types LONG_PROMPT if nothing plays."""
TAIL_MS = 2500.0
"""Wait after the last recording before the page state is read."""
MIC_ON_AFTER_WAV0_MS = 15.0
"""Runs without a marker burst (echo): the page's microphone is on (`state.mic.enabled`) this
long after the fake microphone's WAV time 0 (measured with the marker: 14-17 ms)."""
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


def dump(run: PageRun, path: Path) -> None:
    """Write a page run's raw data as JSON (recordings as kind, text and WAV span)."""
    segments = [{"kind": s.recording.kind, "text": s.recording.text, "onset_ms": s.onset_ms,
                 "offset_ms": s.offset_ms} for s in run.segments]
    path.write_text(json.dumps({"segments": segments, "wav0": run.wav0, "input0": run.input0,
                                "min_speech_ms": run.min_speech_ms, "state": run.state,
                                "log": run.log, "typed": run.typed}))
