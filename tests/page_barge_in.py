"""Barge-in on the real page: one headless Chromium launch per case, its fake microphone fed a
generated WAV while the page plays a Piper reply (issue 24, the page's VAD). Shared by
tests/test_browser_barge_in.py and benchmarks/bench_microphone.py (`--grid`).

A case's WAV starts when the page's microphone is switched on, which `CLICK_MIC` does as the
reply's first audio renders (as tests/test_browser_microphone.py does), so WAV time t hears
the reply's position t + the rendered ms at the click + the capture start-up (25-90 ms): the
reply's own echo written at WAV time t + `echo_lag_ms` with the reply's audio of time t lags
the playback by `echo_lag_ms` plus that. The person ("Stop.", "Wait.", ...) is placed at WAV
time `position_ms`. A room case (babble, a TV) switches the microphone on `ROOM_LEAD_MS`
before the reply is asked for, so the page hears the room alone first, as a person who opens
the page in a noisy room does.

The fake microphone cannot follow the page's playback: when the page's output starves (the
reply's audio came late), the echo in the file runs on while the reply stands still, and is no
longer the echo of what played. The server's voice is therefore wrapped in
`CachedSynthesizer` (tests/cached_tts.py: the reply is synthesized once, then sent at once),
the server sends
`SEND_AHEAD_MS` ahead of playback, and an echo case whose playback still fell more than
`STALL_MS` behind real time before it was decided is void, and so is
an echo case whose echo lags the playback by more than the page's longest echo lag
(`echoMaxLagMs`) less `LAG_MARGIN_MS` (the harness cannot set the rendered ms at the click):
`run_case` plays it again, up to `ATTEMPTS` times.

The page asks for server VAD as it always does, but with `SERVER_VAD_OBSERVES`: the server's
VAD hears the same audio and reports its turns (the page's room rules use its
`speech_started`), but it never stops nor answers the reply. What is measured is the page's VAD
alone: the reply plays on until the page's VAD stops it, so every barge-in the page makes is
seen, at the time it makes it, and a miss is a miss. (With the page's default settings the
server's VAD may stop the reply first; the page's VAD, deciding after that stop, hears the
file's echo go on with no output to explain it, as in a stall: its later fire measures nothing.)

Outcomes are read from the page's state: `bargeInTimings` (source 'vad': the page's VAD
stopped the reply; 'server_vad': the server's did, which `SERVER_VAD_OBSERVES` rules out) and
`vadEvents`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from server.speech.resampling import resample
from tests import speech_fixtures
from tests.browser import chromium, open_demo
from tests.realtime_client import fetch_reply_audio
from tests.test_browser_microphone import CLICK_MIC, LAG_MARGIN_MS, OUTPUT_RATE_HZ

REPLY_TEXT = ("The museum opens at ten in the morning and closes at six, and on Sundays the "
              "galleries on the second floor stay open until eight in the evening, while the "
              "cafe on the ground floor serves lunch from noon.")
"""What the assistant says (`say:` prompt, Piper voice): about 9 s, so that a person can
start up to 7 s into it."""

PERSON_PEAK_DBFS = -6.0
"""The person's peak level on the fake microphone (issue 24: Piper "Stop." at -6 dBFS)."""

NOISE_FLOOR_DBFS = -60.0
"""Pink noise floor under every case (dBFS RMS; issue 24's -60 dBFS pink floor)."""

AFTER_MS = 1500.0
"""WAV audio after the person's start (or the echo's last position) before the page is read."""

ROOM_LEAD_MS = 4000.0
"""Room cases: the room heard alone before the reply is asked for."""

FIRED_WITHIN_MS = 800.0
"""A barge-in counts for the person when the VAD fired within this of their onset."""

STALL_MS = 80.0
"""A case whose reply fell this far behind real time (rendered ms vs page clock since the
microphone was switched on) before its end is void."""

ATTEMPTS = 4
"""Times a void case is played (`run_case`)."""

SERVER_VAD_OBSERVES = {"interrupt_response": False, "create_response": False}
"""Set over the page's `server_vad` request (`window.duplexDemo.serverVad`, web/mic-control.js):
the server's VAD never stops nor answers the reply (OpenAI's `turn_detection` booleans), so the
page's VAD alone decides every barge-in (see the module docstring)."""

PLAYBACK_LOG = """(responseId) => {
  const state = window.duplexDemo.state;
  const log = [];
  window.playbackLog = log;
  setInterval(() => log.push([performance.now(), state.renderedMs(responseId)]), 20);
}"""
"""Log [performance.now(), renderedMs(responseId)] every 20 ms on the page (test
instrumentation kept on `window.playbackLog`)."""


@dataclass(frozen=True, slots=True)
class Case:
    """One run: `label`; the person's 16 kHz float recording (None: nobody speaks) at WAV time
    `position_ms`; the reply's own echo at `echo_db` below the reply's peak (None: none),
    `echo_lag_ms` late; a room recording (16 kHz, any length: looped over the WAV; None: the
    noise floor only) and the room case's WAV length `room_ms`; `until_ms`: WAV length of a
    case without a person (None: the whole reply); `max_lag_ms`: the longest lag behind the
    playback its echo may have, or it is void (None: the page's `echoMaxLagMs` less
    `LAG_MARGIN_MS`; a long-latency case names its own, to measure a page searching less)."""

    label: str
    person: np.ndarray | None = None
    position_ms: float = 0.0
    echo_db: float | None = None
    echo_lag_ms: float = 100.0
    room: np.ndarray | None = field(default=None, repr=False)
    room_ms: float = 0.0
    until_ms: float | None = None
    max_lag_ms: float | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a case did on the page: `page_barge_in` (the page's VAD stopped the reply: a
    bargeInTimings entry with source 'vad'; without a person, only a VAD `fired` before the
    file's end counts: Chromium's fake device restarts the file there while the reply plays
    on, and that is no case), `server_barge_in` (the server's VAD did,
    which `SERVER_VAD_OBSERVES` rules out: a case it stopped is never `heard`),
    `server_turns` (the server's VAD's `speech_started` events, waited for up to the file's
    end when a person speaks: it heard the case too),
    `onset_to_silence_ms` (bargeInTimings.onsetToSilenceMs of the page's barge-in),
    `fired_ms` (the first VAD `fired` while the reply played, ms after the person's onset on
    the WAV timeline, None: none), `vad_onset_ms` (where the candidate that fired then
    started, the VAD's onset: ms after the person's onset, None: no such fire),
    `fired_early_ms` (a person case's first VAD `fired` while the reply played before their
    onset, ms after it (negative): the page stopped the reply on something else first;
    None: none),
    `rendered_at_click_ms` (reply ms rendered when the mic was
    switched on), `behind_ms` (how far the playback fell behind real time until the case was
    decided: `behind_ms`), the page's VAD events (times made ms on the WAV timeline), how
    many plays it took (`run_case`: the void ones included) and whether it is `void` (see the
    module docstring: it measured nothing)."""

    case: Case
    page_barge_in: bool
    server_barge_in: bool
    server_turns: int
    onset_to_silence_ms: float | None
    fired_ms: float | None
    vad_onset_ms: float | None
    fired_early_ms: float | None
    rendered_at_click_ms: float
    behind_ms: float
    events: list[dict[str, Any]]
    plays: int = 1
    void: bool = False

    @property
    def heard(self) -> bool:
        """The person's interruption stopped the reply through the page's VAD, which fired
        at their onset (not before it, on something else), and nothing else had stopped it."""
        return (self.page_barge_in and self.fired_ms is not None and self.fired_early_ms is None
                and not self.server_barge_in)


async def reply_audio(ws_url: str) -> np.ndarray:
    """The whole reply to `say: REPLY_TEXT` at 16 kHz (the server is deterministic, so every
    session gets this audio)."""
    pcm16 = await fetch_reply_audio(ws_url, f"say: {REPLY_TEXT}")
    return resample(np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0,
                    OUTPUT_RATE_HZ, speech_fixtures.RATE_HZ)


def person_onset_ms(case: Case) -> float:
    """The person's onset on the WAV timeline (first sample at -40 dBFS)."""
    assert case.person is not None
    return case.position_ms + speech_fixtures.active_span_ms(case.person)[0]


def case_wav(case: Case, reply: np.ndarray, path: Path, seed: int = 0) -> Path:
    """Write the case's fake-microphone WAV (16 kHz) to `path`."""
    rate = speech_fixtures.RATE_HZ
    if case.person is not None:
        length_ms = case.position_ms + case.person.size * 1000 / rate + AFTER_MS
    elif case.room is not None:
        length_ms = case.room_ms
    else:
        length_ms = case.until_ms or reply.size * 1000 / rate + AFTER_MS
    mic = np.zeros(round(length_ms * rate / 1000), np.float32)
    if case.echo_db is not None:
        lag = round(case.echo_lag_ms * rate / 1000)
        echo = reply[:max(0, mic.size - lag)] * 10 ** (case.echo_db / 20)
        mic[lag:lag + echo.size] += echo
    if case.room is not None:
        reps = -(-mic.size // case.room.size)
        mic += np.tile(case.room, reps)[:mic.size]
    if case.person is not None:
        at = round(case.position_ms * rate / 1000)
        part = case.person[:mic.size - at]
        mic[at:at + part.size] += part
    mic = speech_fixtures.with_noise_floor(mic, np.random.default_rng(seed), NOISE_FLOOR_DBFS)
    return speech_fixtures.write_wav(path, mic)


def behind_ms(log: list[list[float]], since: float, until: float) -> float:
    """How far (ms) the reply's playback fell behind real time between page times `since`
    and `until` (ms), from the page's playback log ([page ms, rendered ms] rows; the rendered
    count advances in 50 ms reports, so up to about 70 ms is no stall)."""
    rows = [(t, r) for t, r in log if since <= t <= until]
    return max((t - rows[0][0] - (r - rows[0][1]) for t, r in rows), default=0.0)


async def run_case(http_url: str, case: Case, reply: np.ndarray, workdir: Path,
                   vad_config: dict[str, float] | None = None, seed: int = 0) -> Outcome:
    """Play `case` into a fresh Chromium page over the reply; see the module docstring.
    `vad_config` overrides web/vad.js DEFAULT_VAD_CONFIG values (numbers) for this page.

    A case void in every one of `ATTEMPTS` plays returns its last play with `void` set.
    """
    wav = case_wav(case, reply, workdir / "case.wav", seed)
    for attempt in range(1, ATTEMPTS + 1):
        outcome = await _play(http_url, case, reply, wav, vad_config)
        if not outcome.void:
            return dataclasses.replace(outcome, plays=attempt)
    return dataclasses.replace(outcome, plays=ATTEMPTS)


async def _play(http_url: str, case: Case, reply: np.ndarray, wav: Path,
                vad_config: dict[str, float] | None) -> Outcome:
    """One play of `run_case` (`void`: see the module docstring)."""
    async with chromium(fake_mic=wav) as browser, open_demo(browser, http_url) as demo:
        if vad_config:
            await demo.page.evaluate("(c) => Object.assign(window.duplexDemo.vadConfig, c)",
                                     vad_config)
        await demo.page.evaluate("(c) => Object.assign(window.duplexDemo.serverVad, c)",
                                 SERVER_VAD_OBSERVES)
        if case.room is not None:
            mic = await demo.page.evaluate(CLICK_MIC, None)
            too_late = False
            await asyncio.sleep(ROOM_LEAD_MS / 1000)
            response_id = await demo.prompt(f"say: {REPLY_TEXT}")
            await demo.page.evaluate(PLAYBACK_LOG, response_id)
            end_ms = case.room_ms
        else:
            response_id = await demo.prompt(f"say: {REPLY_TEXT}")
            await demo.page.evaluate(PLAYBACK_LOG, response_id)
            mic = await demo.page.evaluate(CLICK_MIC, response_id)
            end_ms = (case.position_ms + AFTER_MS if case.person is not None
                      else case.until_ms or reply.size * 1000 / speech_fixtures.RATE_HZ)
            max_lag = await demo.page.evaluate("window.duplexDemo.vadConfig.echoMaxLagMs")
            lag = mic["rendered"] + mic["enabled"] - mic["clicked"] + case.echo_lag_ms
            bound = max_lag - LAG_MARGIN_MS if case.max_lag_ms is None else case.max_lag_ms
            too_late = case.echo_db is not None and lag > bound
        clicked = mic["clicked"]
        stopped = (f"s.bargeInTimings.some((t) => t.responseId === '{response_id}') "
                   f"|| s.responseState === 'idle'")
        remaining_s = max(0.0, (clicked + end_ms - await demo.page.evaluate(
            "performance.now()")) / 1000)
        try:
            await demo.wait_state(stopped, timeout_s=remaining_s + 0.5)
            await asyncio.sleep(0.3)
        except TimeoutError:
            pass
        if case.person is not None:  # the server's VAD, slower, may still be hearing it
            left_s = (clicked + end_ms - await demo.page.evaluate("performance.now()")) / 1000
            with contextlib.suppress(TimeoutError):
                await demo.wait_state("s.speechStarted.length > 0", timeout_s=max(0.1, left_s))
        state = await demo.state("({timings: s.bargeInTimings, events: s.vadEvents, "
                                 "turns: s.speechStarted.length})")
        log = await demo.page.evaluate("window.playbackLog")
    timings = [t for t in state["timings"] if t["responseId"] == response_id]
    page = next((t for t in timings if t["source"] == "vad"), None)
    events = [{**e, "t": e["t"] - clicked,
               "onsetT": None if e.get("onsetT") is None else e["onsetT"] - clicked}
              for e in state["events"]]
    onset = person_onset_ms(case) if case.person is not None else 0.0
    fires = [e for e in events if e["type"] == "fired" and e["playing"]
             and (-50 <= e["t"] - onset <= FIRED_WITHIN_MS if case.person is not None
                  else e["t"] <= end_ms)]
    fired = [e["t"] - onset for e in fires]
    early = [e["t"] - onset for e in events if e["type"] == "fired" and e["playing"]
             and case.person is not None and e["t"] - onset < -50]
    vad_onset = None if not fires or fires[0]["onsetT"] is None else fires[0]["onsetT"] - onset
    if case.person is None and not fired:
        page = None  # stopped after the file ended (the fake device's end), or not at all
    decided = clicked + (fired[0] + onset if fired else end_ms)
    started = clicked if case.room is None else next((t for t, r in log if r > 0), decided)
    behind = behind_ms(log, started, decided)
    void = too_late or (case.echo_db is not None and behind > STALL_MS)
    return Outcome(case, page is not None, any(t["source"] == "server_vad" for t in timings),
                   state["turns"], None if page is None else page["onsetToSilenceMs"],
                   fired[0] if fired else None, vad_onset, early[0] if early else None,
                   float(mic["rendered"]), behind, events, void=void)
