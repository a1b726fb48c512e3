"""Server VAD and turn detection over the protocol: microphone audio in, turns and cuts out.

A plain `websockets` client plays the part of a page without a VAD of its own: it streams
microphone audio (generated speech or noise) with `input_audio_buffer.append` in real time,
ACKs the assistant's audio as a real-time player would, and stops playing when the server
interrupts it (`output_audio_buffer.cleared` / cancelled `response.done`), sending its final ACK.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import numpy as np

from calibration.local_asr import person_transcriber
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import (
    DECISION_TAIL_MS,
    UTTERANCE_TAIL_MS,
    TurnDetection,
)
from server.listening.silero_vad import WINDOW_MS
from server.listening.turn_events import (
    SpeechGap,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    SpeechStopped,
    TurnEvent,
)
from server.listening.vad import TurnDetectionConfig, TurnDetector
from server.speech.resampling import resample
from tests import speech_fixtures
from tests.realtime_client import RealtimeClient

FRAME_MS = 40
INPUT_RATE_HZ = 24000
SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
              "silence_duration_ms": 500, "create_response": True, "interrupt_response": True}
LONG_REPLY = ("say: one two three four five six seven eight nine ten eleven twelve thirteen "
              "fourteen fifteen sixteen seventeen eighteen nineteen twenty.")


def mic_pcm16(pcm_16k: np.ndarray) -> bytes:
    """Generated 16 kHz test audio as the page would send it: PCM16 at 24 kHz."""
    return speech_fixtures.to_pcm16(resample(pcm_16k, speech_fixtures.RATE_HZ, INPUT_RATE_HZ))


class SimulatedPage:
    """Plays one response in real time (ACK every 100 ms) until the server interrupts it."""

    def __init__(self, client: RealtimeClient, response_id: str) -> None:
        self.client = client
        self.response_id = response_id
        self.started = asyncio.get_running_loop().time()
        self.stopped_at_ms: int | None = None

    def played_ms(self) -> int:
        if self.stopped_at_ms is not None:
            return self.stopped_at_ms
        sent = [e["audio_end_ms"] for e in self.client.of_type(
            "response.output_audio.delta", response_id=self.response_id)]
        elapsed = (asyncio.get_running_loop().time() - self.started) * 1000 - 100
        return int(max(0, min(elapsed, max(sent, default=0))))

    def interrupted(self) -> bool:
        cleared = self.client.of_type("output_audio_buffer.cleared",
                                      response_id=self.response_id)
        cancelled = [e for e in self.client.of_type("response.done")
                     if e["response"]["id"] == self.response_id
                     and e["response"]["status"] == "cancelled"]
        return bool(cleared or cancelled)

    async def run(self) -> None:
        while self.stopped_at_ms is None:
            await asyncio.sleep(0.1)
            if self.interrupted():
                self.stopped_at_ms = self.played_ms()
            await self.client.ack(self.response_id, self.played_ms())


async def stream_mic(client: RealtimeClient, pcm16: bytes) -> None:
    """Append microphone audio in 40 ms frames, in real time."""
    frame = INPUT_RATE_HZ * 2 * FRAME_MS // 1000
    for start in range(0, len(pcm16), frame):
        await client.send({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(pcm16[start:start + frame]).decode()})
        await asyncio.sleep(FRAME_MS / 1000)


async def receive_while(client: RealtimeClient, task: asyncio.Task[Any]) -> None:
    """Keep reading server events until `task` is done."""
    while not task.done():
        await client.drain(0.05)
    await task


async def test_speech_during_playback_interrupts_calibrates_and_becomes_the_next_turn(
    start_server,
) -> None:
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    utterance = speech_fixtures.speech("What time does the museum open tomorrow?")
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=1500, tail_ms=1500))
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        await client.wait_for("session.updated")
        response_id, item_id = await client.prompt(LONG_REPLY)
        await client.wait_for("response.output_audio.delta")
        page = SimulatedPage(client, response_id)
        playing = asyncio.create_task(page.run())
        await receive_while(client, asyncio.create_task(stream_mic(client, mic)))
        started = await client.wait_for("input_audio_buffer.speech_started")
        onset_ms = 1500 + speech_fixtures.active_span_ms(utterance)[0]
        assert onset_ms - 300 - 100 <= started["audio_start_ms"] <= onset_ms
        done = await client.wait_for("response.done",
                                     lambda e: e["response"]["id"] == response_id)
        assert done["response"]["status"] == "cancelled"
        transcript = await client.wait_for(
            "conversation.item.input_audio_transcription.completed", timeout=30)
        assert "museum" in transcript["transcript"].lower()
        heard = await client.heard(item_id, lambda e: e["method"] == "marks")
        await playing
        words = LONG_REPLY.removeprefix("say: ").split()
        assert heard["text"] == " ".join(words[: page.stopped_at_ms // 400])
        next_response = await client.wait_for("response.created",
                                              lambda e: e["response"]["id"] != response_id)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == next_response["response"]["id"])
        turns = [(t.role, t.text, t.interrupted) for t in server.responder.prompts[-1].turns]
        assert turns[-2:] == [("assistant", heard["text"], True),
                              ("user", transcript["transcript"], False)]


async def test_noise_during_playback_does_not_interrupt(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    bursts = speech_fixtures.short_bursts(seed=7, count=8, max_ms=150)
    gaps = [speech_fixtures.silence(300) for _ in bursts]
    noise = np.concatenate([part for pair in zip(gaps, bursts, strict=True) for part in pair])
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        response_id, item_id = await client.prompt("say: one two three four five six seven.")
        await client.wait_for("response.output_audio.delta")
        page = SimulatedPage(client, response_id)
        playing = asyncio.create_task(page.run())
        await receive_while(client, asyncio.create_task(stream_mic(client, mic_pcm16(noise))))
        done = await client.wait_for("response.done",
                                     lambda e: e["response"]["id"] == response_id)
        assert done["response"]["status"] == "completed"
        await asyncio.sleep(0.2)
        page.stopped_at_ms = 2800
        await client.ack(response_id, 2800)
        heard = await client.heard(item_id)
        playing.cancel()
        assert (heard["text"], heard["method"]) == ("one two three four five six seven.", "full")
        assert not client.of_type("input_audio_buffer.speech_started")


async def test_spoken_prompt_is_transcribed_and_answered(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    utterance = speech_fixtures.speech("Tell me about the planets.")
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=800, tail_ms=1200))
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        await receive_while(client, asyncio.create_task(stream_mic(client, mic)))
        await client.wait_for("input_audio_buffer.speech_started")
        stopped = await client.wait_for("input_audio_buffer.speech_stopped")
        committed = await client.wait_for("input_audio_buffer.committed")
        assert committed["item_id"] == stopped["item_id"]
        transcript = await client.wait_for(
            "conversation.item.input_audio_transcription.completed", timeout=30)
        assert "planet" in transcript["transcript"].lower()
        created = await client.wait_for("response.created")
        reply = await client.wait_for(
            "response.output_audio_transcript.delta",
            lambda e: e["response_id"] == created["response"]["id"])
        assert "planet" in reply["delta"].lower()
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == created["response"]["id"])
        turns = [(t.role, t.text) for t in server.responder.prompts[-1].turns]
        assert turns == [("user", transcript["transcript"])]


def detector_events(config: TurnDetectionConfig,
                    probabilities: list[float]) -> list[tuple[int, TurnEvent]]:
    """(window end ms, event) for consecutive 32 ms windows of these probabilities."""
    detector = TurnDetector(config)
    events = []
    for index, probability in enumerate(probabilities, start=1):
        event = detector.process(index * WINDOW_MS, probability)
        if event is not None:
            events.append((index * WINDOW_MS, event))
    return events


PAUSING = TurnDetectionConfig(pause_ms=UTTERANCE_TAIL_MS)
PAUSE_WINDOWS = -(-UTTERANCE_TAIL_MS // WINDOW_MS)
"""Silent windows until the pause: the first window ending >= pause_ms after the speech."""


def test_a_turn_pauses_once_when_its_silence_reaches_the_utterance_tail() -> None:
    events = detector_events(PAUSING, [0.0] * 20 + [0.9] * 15 + [0.0] * 30)
    speech_end = 35 * WINDOW_MS
    assert [type(e) for _, e in events] == [SpeechStarted, SpeechPaused, SpeechStopped]
    assert events[1] == (speech_end + PAUSE_WINDOWS * WINDOW_MS, SpeechPaused(speech_end))
    stop_windows = -(-PAUSING.silence_duration_ms // WINDOW_MS)
    assert events[2] == (speech_end + stop_windows * WINDOW_MS, SpeechStopped(speech_end))
    assert events[1][0] - speech_end >= UTTERANCE_TAIL_MS > events[1][0] - speech_end - WINDOW_MS


def test_speech_resumed_after_a_pause_pauses_again() -> None:
    gap = [0.0] * (PAUSE_WINDOWS + 2)
    events = detector_events(PAUSING, [0.0] * 20 + [0.9] * 15 + gap + [0.6] * 10 + [0.0] * 30)
    first_end = 35 * WINDOW_MS
    second_end = (35 + len(gap) + 10) * WINDOW_MS
    resumed_end = (35 + len(gap) + 1) * WINDOW_MS
    assert [e for _, e in events[1:]] == [SpeechPaused(first_end), SpeechResumed(resumed_end),
                                          SpeechPaused(second_end), SpeechStopped(second_end)]


def test_a_gap_comes_at_the_decision_tail_before_the_pause_and_speech_resumes_it() -> None:
    """With `gap_ms` (the server's `DECISION_TAIL_MS`), a turn's silence reports `SpeechGap`
    at the first window ending >= gap_ms after the speech, then the pause; a silence shorter
    than the pause reports the gap and, on the next speech window, `SpeechResumed`."""
    config = TurnDetectionConfig(pause_ms=UTTERANCE_TAIL_MS, gap_ms=DECISION_TAIL_MS)
    gap_windows = -(-DECISION_TAIL_MS // WINDOW_MS)
    short = [0.0] * gap_windows
    events = detector_events(config, [0.0] * 20 + [0.9] * 15 + short + [0.9] * 10 + [0.0] * 30)
    first_end = 35 * WINDOW_MS
    second_end = (35 + gap_windows + 10) * WINDOW_MS
    assert events[1:] == [
        (first_end + gap_windows * WINDOW_MS, SpeechGap(first_end)),
        (first_end + (gap_windows + 1) * WINDOW_MS, SpeechResumed(first_end + (gap_windows + 1)
                                                                  * WINDOW_MS)),
        (second_end + gap_windows * WINDOW_MS, SpeechGap(second_end)),
        (second_end + PAUSE_WINDOWS * WINDOW_MS, SpeechPaused(second_end)),
        (second_end + -(-config.silence_duration_ms // WINDOW_MS) * WINDOW_MS,
         SpeechStopped(second_end)),
    ]


def test_no_pause_without_a_turn_or_without_pause_ms() -> None:
    silence_and_a_click = [0.0] * 20 + [0.9] * 3 + [0.0] * 30
    assert detector_events(PAUSING, silence_and_a_click) == []
    assert detector_events(PAUSING, [0.0] * 40) == []
    turn = [0.0] * 20 + [0.9] * 15 + [0.0] * 30
    assert [type(e) for _, e in detector_events(TurnDetectionConfig(), turn)] == [
        SpeechStarted, SpeechStopped]
    at_the_stop = TurnDetectionConfig(pause_ms=500, silence_duration_ms=500)
    assert [type(e) for _, e in detector_events(at_the_stop, turn)] == [
        SpeechStarted, SpeechStopped]


class CountingTranscriber:
    """The in-process ASR of the person's turns, keeping the duration (ms) of every audio it
    was given."""

    def __init__(self) -> None:
        self.inner = person_transcriber()
        self.calls: list[int] = []

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        self.calls.append(pcm_f32.size * 1000 // sample_rate_hz)
        return await self.inner.transcribe(pcm_f32, sample_rate_hz)


async def test_a_turn_is_transcribed_once_at_its_pause_and_events_keep_their_order(
    start_server,
) -> None:
    """The utterance is streamed up to a point past its pause but before its stop (found by
    the same server VAD offline: same frames, same events): the transcription has started
    and nothing was announced; after the rest, the events are today's and the committed
    audio was transcribed once."""
    transcriber = CountingTranscriber()
    await asyncio.to_thread(transcriber.inner.load)
    server = await start_server(tts="uniform", calibration="marks",
                                input_transcriber=transcriber)
    utterance = speech_fixtures.speech("What time does the museum open tomorrow?")
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=800, tail_ms=1500))
    frame = INPUT_RATE_HZ * 2 * FRAME_MS // 1000
    settings = TurnDetection(**{k: v for k, v in SERVER_VAD.items() if k != "type"})
    offline = InputSpeechDetector(settings, INPUT_RATE_HZ, 0)
    pause = next(e for start in range(0, len(mic), frame)
                 for e in offline.feed(mic[start:start + frame], False)
                 if isinstance(e, SpeechPaused))
    split_ms = -(-(pause.audio_end_ms + UTTERANCE_TAIL_MS + FRAME_MS) // FRAME_MS) * FRAME_MS
    assert split_ms < pause.audio_end_ms + SERVER_VAD["silence_duration_ms"]
    split = split_ms * INPUT_RATE_HZ * 2 // 1000
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        await receive_while(client, asyncio.create_task(stream_mic(client, mic[:split])))
        await client.drain(0.3)
        assert len(transcriber.calls) == 1, "transcription started at the pause"
        assert not client.of_type("input_audio_buffer.speech_stopped")
        await receive_while(client, asyncio.create_task(stream_mic(client, mic[split:])))
        created = await client.wait_for("response.created", timeout=30)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == created["response"]["id"])
    kinds = [e["type"] for e in client.events if not e["type"].endswith(".delta")]
    assert kinds[:9] == [
        "session.created", "session.updated", "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
        "conversation.item.added", "conversation.item.input_audio_transcription.completed",
        "conversation.item.done", "response.created"]
    started = client.of_type("input_audio_buffer.speech_started")[0]
    stopped = client.of_type("input_audio_buffer.speech_stopped")[0]
    assert stopped["audio_end_ms"] == pause.audio_end_ms
    transcript = client.of_type("conversation.item.input_audio_transcription.completed")[0]
    assert "museum" in transcript["transcript"].lower()
    committed_ms = stopped["audio_end_ms"] + UTTERANCE_TAIL_MS - started["audio_start_ms"]
    assert len(transcriber.calls) == 1, "the pause's transcription was reused, not redone"
    assert abs(transcriber.calls[0] - committed_ms) <= 1
