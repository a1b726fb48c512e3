"""Real-browser microphone tests: the demo page in headless Debian Chromium with a fake
microphone that plays a WAV file generated at test time, against a real demo server.

Chromium plays `--use-file-for-fake-audio-capture=FILE.wav%noloop` once from the moment capture
starts (the first test checks that this build honours `%noloop`). Capture starts inside the
page's `getUserMedia` call, i.e. between the Mic click and the moment the page reports the
microphone on (`state.mic.enabled`); both instants are read on the page's clock
(`performance.now()`), so the WAV's timeline maps onto the page clock with an uncertainty of
that start-up time (measured here: 25-90 ms; WAV time 0 about 25 ms after the click).

Clocks, for the barge-in test: the page's VAD events (`state.vadEvents[].t`) and the Stop /
silence times are `performance.now()` values. The playback timeline (`state.renderedMs(id)`,
ms of reply audio rendered) is sampled every 5 ms on the page clock while the reply plays;
`rendered_at` turns a page time into a rendered position. The barge-in's `audio_end_ms` is the
rendered position at the stop minus the output latency, so a distance on the playback timeline
between two instants is the difference of their rendered positions (less than their distance
on the page clock when the reply starved in between).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from server.realtime.session import SessionConfig
from server.responders.prompt import ConversationTurn
from server.speech.resampling import resample
from tests import speech_fixtures
from tests.browser import DemoPage, chromium, open_demo
from tests.cached_tts import SEND_AHEAD_MS, CachedSynthesizer
from tests.conftest import RunningServer
from tests.realtime_client import fetch_reply_audio
from tests.test_browser import RADIO, heard_from_marks, js, wait_prompts

OUTPUT_RATE_HZ = SessionConfig().sample_rate_hz
"""Rate of the assistant's audio on the wire (Hz)."""

pytestmark = pytest.mark.timeout(90)
"""Hard bound; each test takes 10-30 s here (the brief's budget is 40 s)."""

QUESTIONS = ("Sorry, what time does it open?",)
"""What the person says over the assistant's long reply (Piper voice)."""

QUESTION_LEAD_MS = 4000
"""Silence on the fake microphone before the question (the reply plays meanwhile)."""

ECHO_DBFS = -36.0
"""Peak level of the assistant's echo on the fake microphone in the no-interruption test: 35 dB
below the reply's peak, a loudspeaker's residue after an echo canceller (typically 40-60 dB
down). Chromium's auto gain lifts it by about 10 dB; the page's level guard holds it. At -30
dBFS the lifted echo passes the level guard and the envelope guard, which must also let the
person through, holds it back in only about half the runs (measured; benchmarks/README.md)."""

ECHO_UNDER_QUESTION_DBFS = -40.0
"""Peak level of the reply's own echo on the fake microphone under the question (from the
start of the file, so the question is spoken over it, as through a laptop's loudspeaker)."""

PLANETS = "Tell me about the planets."
"""A spoken prompt the demo responder answers with its planets topic."""

SHORT_REPLY = "The library opens at nine and closes at six on weekdays."
"""A `say:` reply of about 3.5 s with the Piper voice (stored in full when not interrupted)."""

LAG_ATTEMPTS = 3
"""Pages tried for a fake mic lag within the client echo guard's range (`short_reply_with_mic`)."""

LAG_MARGIN_MS = 50
"""The fake mic's echo lags the playback by at least this much less than the longest lag the
client echo guard searches (web/vad.js echoMaxLagMs): the playing position the guard pairs with
the microphone jitters by the 50 ms of a progress report."""

CUT_SLACK_MS = 150
"""The barge-in cut may lie this far past the VAD's minimum speech duration after the mic
speech onset (the brief's bound: capture, 10 ms frames, messages, the playback quantum)."""

EARLY_MS = 30
"""How much earlier than `speech_fixtures.active_span_ms` (-40 dBFS) the client VAD may count
the onset: its threshold over digital silence is -55 dBFS (web/vad.js, minOnsetDb)."""

BURST_GAP_MS = 400
"""Silence between noise bursts: more than the client VAD's 200 ms hangover, so that two bursts
never add up to one candidate."""

CLICK_MIC = """async (responseId) => {
  const state = window.duplexDemo.state;
  const asked = performance.now();
  while (responseId && !(state.renderedMs(responseId) > 0)) {
    if (performance.now() - asked > 15000) throw new Error('the reply never rendered');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  const clicked = performance.now();
  document.querySelector('[data-testid="mic"]').click();
  while (!state.mic.enabled) {
    if (performance.now() - clicked > 5000 || state.mic.error) {
      throw new Error(`microphone did not start: ${state.mic.error}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return {clicked, enabled: performance.now(), rendered: state.renderedMs(state.currentResponseId)};
}"""
"""Click the Mic toggle, with a response id as soon as that reply's first audio renders (polled
on the page every 1 ms: a poll from the test process could come hundreds of ms late and make
the fake mic's echo lag the playback by more than the guards' lag range); returns the page time
of the click, of the microphone being on (capture started in between) and the current reply's
rendered ms at the click."""

SAMPLE_RENDERED = """(responseId) => {
  const state = window.duplexDemo.state;
  const samples = [];
  const sample = () => samples.push([performance.now(), state.renderedMs(responseId)]);
  const timer = setInterval(sample, 5);
  window.renderedSamples = {samples, stop: () => clearInterval(timer)};
}"""
"""Start sampling [performance.now(), renderedMs(responseId)] every 5 ms on the page (test
instrumentation kept on `window.renderedSamples`)."""


def rendered_at(samples: list[list[float]], page_ms: float) -> float:
    """Rendered position (ms of reply audio) at page time `page_ms`, from page-side samples.

    The page learns the rendered frame count from the playback worklet's reports (one per
    50 ms of output, also while the reply starves), so the samples form a staircase whose steps
    are the reports' arrivals (within the 5 ms sampling); the position is interpolated linearly
    between the steps around `page_ms`. No real-time rendering is assumed: a CPU-starved audio
    thread or a late server shows as a flatter slope.
    """
    steps = [(t, r) for (t, r), (_, previous) in zip(samples[1:], samples, strict=False)
             if r != previous]
    assert steps and steps[0][0] <= page_ms <= steps[-1][0], f"no samples at {page_ms:.0f} ms"
    return float(np.interp(page_ms, [t for t, _ in steps], [r for _, r in steps]))


async def start_piper(start_server: Any, lead_ms: int | None = None) -> RunningServer:
    """A demo server with the Piper voice and the default `auto` calibration; each reply is
    synthesized once (tests/cached_tts.py), and with `lead_ms` (SEND_AHEAD_MS) sent that far
    ahead of playback, so that the fake microphone's echo follows the page's playback on a
    loaded machine too. (With SEND_AHEAD_MS, the reply's heard cut came out 800 ms before the
    barge-in's `audio_end_ms` in test_speech_over_a_reply_cuts_it_at_the_onset_and_is_answered:
    that test keeps the default send-ahead.)"""
    options = {} if lead_ms is None else {"lead_ms": lead_ms}
    return await start_server(tts="piper", calibration="auto", wrap_tts=CachedSynthesizer,
                              **options)


async def reply_echo(server: RunningServer, prompt: str, samples: int,
                     peak_dbfs: float) -> np.ndarray:
    """The first `samples` of the reply to `prompt` (16 kHz float, zero-padded), scaled so
    that this part's peak is at `peak_dbfs`: on a fake microphone switched on as the reply
    starts rendering, it is the reply's own echo (the server is deterministic, so the page's
    session gets the same audio)."""
    rate = speech_fixtures.RATE_HZ
    pcm16 = await fetch_reply_audio(server.ws_url, prompt, until_ms=samples * 1000 // rate)
    reply = resample(np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0,
                     OUTPUT_RATE_HZ, rate)[:samples]
    return np.pad(speech_fixtures.at_peak_dbfs(reply, peak_dbfs), (0, samples - reply.size))


async def wait_rendering(demo: DemoPage, response_id: str, rendered_ms: int,
                         timeout_s: float = 15.0) -> None:
    """Wait until the page rendered more than `rendered_ms` of a response."""
    await demo.wait_state(f"s.renderedMs({js(response_id)}) > {rendered_ms}", timeout_s=timeout_s)


async def test_fake_microphone_plays_its_file_once(start_server, tmp_path: Path) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    marker = speech_fixtures.white_noise_burst(np.random.default_rng(5), 60.0, -6.0)
    wav = speech_fixtures.write_wav(tmp_path / "marker.wav",
                                    speech_fixtures.place(marker, 300.0, 500.0))
    async with chromium(fake_mic=wav) as browser, open_demo(browser, server.http_url) as demo:
        mic = await demo.page.evaluate(CLICK_MIC, None)
        await asyncio.sleep(2.7)
        onsets = [e["t"] - mic["clicked"] for e in await demo.state("s.vadEvents")
                  if e["type"] == "onset"]
    assert len(onsets) == 1, f"a looping file would start again every 860 ms: {onsets}"
    assert 300 - EARLY_MS <= onsets[0] <= 300 + mic["enabled"] - mic["clicked"] + 60, onsets


@pytest.mark.timeout(240)
@pytest.mark.parametrize("question_text", QUESTIONS)
async def test_speech_over_a_reply_cuts_it_at_the_onset_and_is_answered(
    start_server, tmp_path: Path, question_text: str,
) -> None:
    """The person's question over a reply is the page's barge-in, cut where the reply fell
    silent, and answered; whichever VAD decides first: the page's usually fires before the
    server's `speech_started` pauses the reply; when the server's came first (the CI rehearsal
    of f4d8d10: no `barge_in` went, the test timed out), the page's barge-in names where that
    pause silenced the reply (each order on the worklet itself: tests/test_playback_worklet.py).
    A play whose reply's playback stalled is void (`speech_over_a_reply`) and played again, up
    to `tests.page_barge_in.ATTEMPTS` times."""
    question = speech_fixtures.speech(question_text)
    onset_ms = QUESTION_LEAD_MS + speech_fixtures.active_span_ms(question)[0]
    stalls = []
    for _ in range(page_barge_in().ATTEMPTS):
        server = await start_piper(start_server)
        behind = await speech_over_a_reply(server, tmp_path, question, onset_ms)
        if behind is None:
            return
        stalls.append(round(behind))
    raise AssertionError(f"the page's playback stalled in every play (ms behind): {stalls}")


async def speech_over_a_reply(server: RunningServer, tmp_path: Path, question: np.ndarray,
                              onset_ms: float) -> float | None:
    """One play of `test_speech_over_a_reply_cuts_it_at_the_onset_and_is_answered`: None when
    it passed; how far (ms) the page's playback fell behind real time when it is void (more
    than `tests.page_barge_in.STALL_MS` before the page's VAD decided: the file's echo was
    then no longer the echo of what played, a loaded machine's; tests/page_barge_in.py)."""
    mic = speech_fixtures.place(question, QUESTION_LEAD_MS, 1500.0)
    echo = await reply_echo(server, RADIO, mic.size, ECHO_UNDER_QUESTION_DBFS)
    wav = speech_fixtures.write_wav(tmp_path / "question.wav", mic + echo)
    async with chromium(fake_mic=wav) as browser, open_demo(browser, server.http_url) as demo:
        response_id = await demo.prompt(RADIO)
        item_id = await demo.item_of(response_id)
        await demo.page.evaluate(SAMPLE_RENDERED, response_id)
        mic = await demo.page.evaluate(CLICK_MIC, response_id)
        min_speech = await demo.page.evaluate("window.duplexDemo.vadConfig.minSpeechMs")
        try:
            await demo.wait_state("s.bargeIns.length > 0 && s.responseState === 'stopped'",
                                  timeout_s=QUESTION_LEAD_MS / 1000 + 5)
        except TimeoutError:
            samples = await demo.page.evaluate("window.renderedSamples.samples")
            behind = playback_behind_ms(samples, mic["clicked"], samples[-1][0])
            if behind > page_barge_in().STALL_MS:
                return behind
            seen = await demo.state("({response: s.responseState, vad: s.vadEvents, "
                                    "pauses: s.pauses, bargeIns: s.bargeIns})")
            raise AssertionError(f"no barge-in stopped the reply; mic {mic}; page {seen}") from None
        samples = await demo.page.evaluate(
            "(() => { window.renderedSamples.stop(); return window.renderedSamples.samples; })()")
        events = await demo.state("s.vadEvents")
        fired_index = next(i for i, e in enumerate(events) if e["type"] == "fired")
        behind = playback_behind_ms(samples, mic["clicked"], events[fired_index]["t"])
        if behind > page_barge_in().STALL_MS:
            return behind
        barge, = await demo.state("s.bargeIns")
        assert (barge["response_id"], barge["item_id"], barge["source"], barge["pause"]) == (
            response_id, item_id, "vad", True)
        cut = barge["audio_end_ms"]
        rendered_stop = await demo.state(f"s.renderedMs({js(response_id)})")
        onset = next(e for e in reversed(events[:fired_index]) if e["type"] == "onset")
        fired = events[fired_index]
        # The server's VAD paused the reply before the page's fired: its `response.paused` came
        # with reason speech_started (after the page's barge_in it would say barge_in, or none
        # would come: the reply was paused already).
        paused = (await demo.state("s.pauses"))[0]
        server_first = paused["reason"] == "speech_started"
        latency = rendered_stop - cut
        assert 0 <= latency <= 200, f"output latency {latency} ms"
        timing, = await demo.state("s.bargeInTimings")
        assert timing["source"] == "vad"
        if server_first:
            # The page's barge-in names where the server's pause silenced the reply (all it
            # rendered: at least the ACK the server paused at); none played after the page's
            # VAD fired, and the reply was silent before (the timing's onset -> silence, 0 when
            # it was silent before the onset of the candidate that fired).
            assert paused["audio_end_ms"] <= cut
            rendered_at_fired = max(r for t, r in samples if t <= fired["t"])
            assert rendered_at_fired == rendered_stop, (rendered_at_fired, rendered_stop)
            assert 0 <= timing["onsetToSilenceMs"] < min_speech
        else:
            after_onset = rendered_stop - rendered_at(samples, mic["clicked"] + onset_ms)
            after_fired = rendered_stop - rendered_at(samples, fired["t"])
            assert onset["playing"] and fired["playing"], "the echo guard knew the reply played"
            # On the page clock: the VAD held its minimum duration of speech before firing.
            assert fired["t"] - (mic["clicked"] + onset_ms) >= min_speech - EARLY_MS - 10
            # The VAD counted speech where the WAV has it: WAV time 0 is in [clicked, enabled].
            startup = mic["enabled"] - mic["clicked"]
            relative = [(e["type"], round(e["t"] - mic["clicked"] - onset_ms)) for e in events]
            assert -EARLY_MS <= onset["t"] - mic["clicked"] - onset_ms <= startup + 60, (
                f"the candidate that fired did not start at the speech onset; VAD events in ms "
                f"after the onset (+ capture start-up, {startup:.0f} ms at most): {relative}")
            # On the playback timeline: the cut comes the VAD's minimum duration after the mic
            # onset, plus at most CUT_SLACK_MS. The earliest possible onset instant (capture
            # began at the click) bounds that distance from above; the cut is never before the
            # onset.
            assert 0 <= after_onset <= min_speech + CUT_SLACK_MS, after_onset
            assert -10 <= after_fired <= CUT_SLACK_MS, after_fired
            assert min_speech - 10 <= timing["onsetToSilenceMs"] <= min_speech + CUT_SLACK_MS

        item = js(item_id)
        await demo.wait_state(f"['marks', 'asr'].includes(s.heard[{item}]?.method)")
        heard = await demo.state(f"s.heard[{item}]")
        assert heard["played_ms"] == cut and heard["interrupted"] is True
        full = heard["full_text"]
        assert full.startswith(heard["text"]) and len(heard["text"]) < len(full)
        from_marks = heard_from_marks(full, demo.marks(response_id), cut)
        if heard["method"] == "marks":
            assert heard["text"] == from_marks
        else:
            assert abs(len(heard["text"].split()) - len(from_marks.split())) <= 1

        await demo.wait_state("s.userTranscripts.length > 0", timeout_s=20)
        said, = await demo.state("s.userTranscripts")
        assert {"time", "open"} <= set(said["transcript"].lower().replace("?", " ").split())
        assert (await demo.state("s.speechStarted"))[0]["audio_start_ms"] >= 0

        await demo.wait_state(f"s.currentResponseId !== {js(response_id)}", timeout_s=20)
        answer_id = await demo.state("s.currentResponseId")
        await wait_rendering(demo, answer_id, 500)
        prompt = await wait_prompts(server, 3)  # the echo's session, the page's two
        assert prompt.turns == (
            ConversationTurn(role="user", text=RADIO),
            ConversationTurn(role="assistant", text=heard["text"], full_text=full,
                             interrupted=True),
            ConversationTurn(role="user", text=said["transcript"]),
        )
        assert len(await demo.state("s.bargeIns")) == 1
        assert [e["type"] for e in await demo.state("s.pauses")] == ["response.paused"]
        assert await demo.state("s.lastError") is None
    return None


def playback_behind_ms(samples: list[list[float]], clicked: float, until: float) -> float:
    """How far (ms) the reply's playback fell behind real time from the page time `clicked`
    until `until` or the last time it advanced, if earlier (a pause stops it on purpose), from
    the page-side samples ([page ms, rendered ms]; `tests.page_barge_in.behind_ms`)."""
    advanced = [t for (t, r), (_, previous) in zip(samples[1:], samples, strict=False)
                if r != previous]
    return page_barge_in().behind_ms(samples, clicked,
                                     min(until, advanced[-1]) if advanced else until)


def page_barge_in() -> Any:
    """`tests.page_barge_in` (its stall rule: `STALL_MS`, `ATTEMPTS`, `behind_ms`), imported
    when first used: it imports this module's page scripts."""
    import tests.page_barge_in

    return tests.page_barge_in


def noise_bursts_wav(path: Path) -> tuple[Path, int]:
    """Seven noise / cough bursts of 50-180 ms (below the client VAD's 200 ms and the server
    VAD's 250 ms minimum), BURST_GAP_MS apart, from 300 ms on; returns (file, burst count)."""
    bursts = speech_fixtures.short_bursts(seed=11, count=7, max_ms=180.0)
    parts = [speech_fixtures.silence(300.0)]
    for burst in bursts:
        parts += [burst, speech_fixtures.silence(BURST_GAP_MS)]
    return speech_fixtures.write_wav(path, np.concatenate(parts)), len(bursts)


@contextlib.asynccontextmanager
async def short_reply_with_mic(server: RunningServer,
                               wav: Path) -> AsyncIterator[tuple[DemoPage, str, str]]:
    """A page with `wav` as its fake microphone, playing the SHORT_REPLY, the microphone
    switched on as the reply's first audio renders; yields (page, response id, item id).

    The fake mic's file then lags the reply's playback by the rendered ms at the click plus
    the capture start-up, like the path from a loudspeaker to a microphone. That lag must lie
    within the client echo guard's lag range less `LAG_MARGIN_MS`; the harness cannot set it
    (measured here: Chromium's fake output device, starved while the server synthesizes, takes
    the first 50-280 ms of a reply at once, and capture starts 60-240 ms after the click), so a
    page whose lag came out longer is closed and the reply played in a new one, at most
    `LAG_ATTEMPTS` times. The reply is fetched once before (the server's voice keeps it:
    `start_piper`), so that the page's playback does not stall."""
    await fetch_reply_audio(server.ws_url, f"say: {SHORT_REPLY}")
    for _ in range(LAG_ATTEMPTS):
        async with chromium(fake_mic=wav) as browser, open_demo(browser,
                                                                server.http_url) as demo:
            response_id = await demo.prompt(f"say: {SHORT_REPLY}")
            item_id = await demo.item_of(response_id)
            mic = await demo.page.evaluate(CLICK_MIC, response_id)
            max_lag_ms = await demo.page.evaluate("window.duplexDemo.vadConfig.echoMaxLagMs")
            if mic["rendered"] + mic["enabled"] - mic["clicked"] <= max_lag_ms - LAG_MARGIN_MS:
                yield demo, response_id, item_id
                return
    raise AssertionError(f"the fake mic lagged the playback too far {LAG_ATTEMPTS} times: {mic}")


async def assert_played_to_the_end(demo: DemoPage, response_id: str, item_id: str) -> None:
    """The reply played to its end with the mic on: stored in full, no barge-in, no server
    turn, and the microphone audio reached the server."""
    item = js(item_id)
    await demo.wait_state(f"s.heard[{item}]?.method === 'full' && s.responseState === 'idle'",
                          timeout_s=15)
    await asyncio.sleep(0.5)  # the mic file's tail still reaches both VADs
    heard = await demo.state(f"s.heard[{item}]")
    assert (heard["text"], heard["full_text"], heard["interrupted"]) == (
        SHORT_REPLY, SHORT_REPLY, False)
    done = await demo.wait_received("response.done",
                                    lambda e: e["response"]["id"] == response_id)
    assert done["response"]["status"] == "completed"
    assert await demo.state("s.bargeIns") == []
    assert not [e for e in demo.sent if e["type"] == "barge_in"]
    assert await demo.state("s.speechStarted") == []
    assert await demo.state("s.userTranscripts") == []
    assert not demo.of_type("output_audio_buffer.cleared")
    assert await demo.state("s.mic.framesSent") > 50, "the microphone audio reached the server"
    assert await demo.state("s.lastError") is None


async def test_noise_bursts_do_not_interrupt(start_server, tmp_path: Path) -> None:
    wav, bursts = noise_bursts_wav(tmp_path / "bursts.wav")
    server = await start_piper(start_server, SEND_AHEAD_MS)
    async with short_reply_with_mic(server, wav) as (demo, response_id, item_id):
        await assert_played_to_the_end(demo, response_id, item_id)
        # A `fired` event while the reply is active is a barge-in (checked above); once it
        # ended, the idle thresholds apply and do not matter here.
        onsets = [e for e in await demo.state("s.vadEvents") if e["type"] == "onset"]
        assert len(onsets) == bursts, "every burst reached the client VAD"
        assert sum(e["playing"] for e in onsets) >= bursts - 2, "bursts came during the reply"


async def test_assistant_echo_does_not_interrupt(start_server, tmp_path: Path) -> None:
    """The reply's own Piper audio on the fake mic (at ECHO_DBFS peak, lagging the playback by
    up to 300 ms; the page asks for auto gain, which lifts it by about 10 dB, and Chromium's
    echo canceller does not know the fake mic's echo): neither VAD takes it for the person.
    (Louder echo: tests/test_client_vad.py and tests/test_echo_server.py.)"""
    echo = speech_fixtures.assistant_echo(SHORT_REPLY, ECHO_DBFS)
    wav = speech_fixtures.write_wav(tmp_path / "echo.wav", speech_fixtures.place(echo, 0.0))
    server = await start_piper(start_server, SEND_AHEAD_MS)
    async with short_reply_with_mic(server, wav) as (demo, response_id, item_id):
        await assert_played_to_the_end(demo, response_id, item_id)
        events = await demo.state("s.vadEvents")
        share = await demo.page.evaluate("window.duplexDemo.vadConfig.echoUnexplainedShare")
        held = [e for e in events if e["type"] == "echo"]
        assert all(e["unexplained"] < share for e in held), held
        assert not [e for e in events if e["type"] == "fired" and e["playing"]], events


async def test_spoken_prompt_is_transcribed_and_answered_aloud(start_server,
                                                               tmp_path: Path) -> None:
    utterance = speech_fixtures.speech(PLANETS)
    wav = speech_fixtures.write_wav(tmp_path / "planets.wav",
                                    speech_fixtures.place(utterance, 1000.0, 2000.0))
    server = await start_piper(start_server)
    async with chromium(fake_mic=wav) as browser, open_demo(browser, server.http_url) as demo:
        await demo.page.evaluate(CLICK_MIC, None)
        assert await demo.page.get_by_test_id("mic").get_attribute("aria-pressed") == "true"
        await demo.wait_state("s.mic.serverVad === 'on'")
        await demo.wait_state("s.userTranscripts.length > 0", timeout_s=20)
        said, = await demo.state("s.userTranscripts")
        assert "planet" in said["transcript"].lower()
        spoken = demo.page.locator(
            f'[data-testid="user-speech"][data-item-id="{said["item_id"]}"]')
        assert (await spoken.text_content() or "").endswith(said["transcript"])

        await demo.wait_state("s.currentResponseId !== null", timeout_s=20)
        response_id = await demo.state("s.currentResponseId")
        await wait_rendering(demo, response_id, 1000)
        reply = await demo.wait_received("response.output_audio_transcript.delta",
                                         lambda e: e["response_id"] == response_id)
        assert "planet" in reply["delta"].lower()
        assert [a for a in await demo.state("s.acks") if a["response_id"] == response_id]
        assert await demo.state("s.responseState") == "speaking"

        assert len(await demo.state("s.speechStarted")) == 1
        assert await demo.state("s.bargeIns") == []
        fired = [e for e in await demo.state("s.vadEvents") if e["type"] == "fired"]
        assert fired and not fired[0]["playing"], "the VAD heard the prompt, nothing played"
        prompt = await wait_prompts(server, 1)
        assert prompt.turns == (ConversationTurn(role="user", text=said["transcript"]),)
        assert await demo.state("s.lastError") is None
