"""Echo over the protocol: a page whose microphone hears its own loudspeaker.

A real server (Piper voice, `calibration="auto"`) on loopback and a plain `websockets` client
playing the part of a page with server VAD: it plays the reply in real time (starting after a
100 ms jitter buffer, ACKing every 100 ms) and streams its microphone in real time, which hears
the loudspeaker 150 ms late at an AGC-like level (the loudest 10 ms at -35..-25 dBFS, as
measured in Chromium with autoGainControl) over a faint noise floor; optionally a person speaks
too. It stops playing when the server interrupts the reply.
"""

from __future__ import annotations

import asyncio
import base64

import numpy as np

from server.speech.resampling import resample
from tests import speech_fixtures as fx
from tests.realtime_client import RealtimeClient
from tests.test_server_vad import INPUT_RATE_HZ, SERVER_VAD, receive_while

REPLY = ("The museum opens at nine in the morning and closes at six in the evening. On Mondays "
         "it stays closed all day, and on Sundays the guided tours start at eleven.")
ECHO_DELAY_MS = 150
ECHO_GAIN_DB = -25.0
TICK_S = 0.02
JITTER_BUFFER_MS = 100
ACK_EVERY_MS = 100


class EchoingPage:
    """Plays one response and streams a microphone that hears it (plus `person`, 24 kHz float,
    starting `person_at_ms` after the first audio arrived)."""

    def __init__(self, client: RealtimeClient, response_id: str,
                 person: np.ndarray | None = None, person_at_ms: int = 0) -> None:
        self.client = client
        self.response_id = response_id
        self.person = person
        self.person_at = person_at_ms * INPUT_RATE_HZ // 1000
        self.audio = np.zeros(0, dtype=np.float32)
        self.played = 0
        self.speaker: list[np.ndarray] = []
        self.microphone: list[np.ndarray] = []
        self.stopped = False
        self._scanned = 0
        self._rng = np.random.default_rng(9)

    def played_ms(self) -> int:
        return self.played * 1000 // INPUT_RATE_HZ

    def _receive_audio(self) -> None:
        events = self.client.events
        for event in events[self._scanned:]:
            if (event["type"] == "response.output_audio.delta"
                    and event["response_id"] == self.response_id):
                pcm = np.frombuffer(base64.b64decode(event["delta"]), dtype="<i2")
                self.audio = np.concatenate((self.audio, pcm.astype(np.float32) / 32768.0))
            interrupted = (event["type"] == "output_audio_buffer.cleared"
                           or (event["type"] == "response.done"
                               and event["response"]["status"] == "cancelled"))
            if interrupted and event.get("response_id", event.get("response", {}).get("id")) \
                    == self.response_id:
                self.stopped = True
        self._scanned = len(events)

    def _play(self, samples: int, started: bool) -> np.ndarray:
        """The loudspeaker's next `samples`: the reply while it plays, else silence."""
        out = np.zeros(samples, dtype=np.float32)
        if started and not self.stopped:
            take = min(samples, self.audio.size - self.played)
            out[:take] = self.audio[self.played : self.played + take]
            self.played += take
        return out

    def _hear(self, start: int, samples: int) -> np.ndarray:
        """Microphone samples [start, start + samples): the loudspeaker `ECHO_DELAY_MS` late at
        `ECHO_GAIN_DB`, the person, a -70 dBFS noise floor."""
        speaker = np.concatenate(self.speaker) if self.speaker else np.zeros(0, np.float32)
        delay = ECHO_DELAY_MS * INPUT_RATE_HZ // 1000
        echo = np.zeros(samples, dtype=np.float32)
        lo, hi = max(start - delay, 0), max(start + samples - delay, 0)
        part = speaker[lo:hi]
        echo[samples - part.size :] = part * 10.0 ** (ECHO_GAIN_DB / 20.0)
        if self.person is not None:
            lo, hi = max(start - self.person_at, 0), max(start + samples - self.person_at, 0)
            part = self.person[lo:hi]
            echo[samples - part.size : samples - part.size + part.size] += part
        return echo + self._rng.normal(0.0, 10.0 ** (-80 / 20), samples).astype(np.float32)

    async def run(self, until: asyncio.Event) -> None:
        """Play, listen and ACK in real time until `until` is set."""
        loop = asyncio.get_running_loop()
        while not self.client.of_type("response.output_audio.delta",
                                      response_id=self.response_id):
            await asyncio.sleep(TICK_S)
        first_audio = loop.time()
        sent = 0
        last_ack = 0.0
        while not until.is_set():
            await asyncio.sleep(TICK_S)
            self._receive_audio()
            now = loop.time()
            samples = round((now - first_audio) * INPUT_RATE_HZ) - sent
            started = (now - first_audio) * 1000 >= JITTER_BUFFER_MS
            self.speaker.append(self._play(samples, started))
            mic = self._hear(sent, samples)
            self.microphone.append(mic)
            sent += samples
            await self.client.send({"type": "input_audio_buffer.append",
                                    "audio": base64.b64encode(fx.to_pcm16(mic)).decode()})
            if (now - last_ack) * 1000 >= ACK_EVERY_MS or self.stopped:
                last_ack = now
                await self.client.ack(self.response_id, self.played_ms())

    def loudest_10ms_dbfs(self) -> float:
        """Level of the loudest 10 ms frame the microphone sent (dBFS RMS)."""
        mic = np.concatenate(self.microphone)
        frames = mic[: mic.size // 240 * 240].reshape(-1, 240)
        return float(10.0 * np.log10(np.max(np.mean(frames ** 2, axis=1))))


async def start_reply(client: RealtimeClient) -> tuple[str, str]:
    await client.send({"type": "session.update",
                       "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
    await client.wait_for("session.updated")
    return await client.prompt(f"say: {REPLY}")


async def test_the_reply_heard_back_through_the_microphone_is_not_a_turn(start_server) -> None:
    server = await start_server(tts="piper", calibration="auto")
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await start_reply(client)
        page = EchoingPage(client, response_id)
        done = asyncio.Event()
        playing = asyncio.create_task(page.run(done))

        async def until_played() -> None:
            while not client.of_type("response.done") or page.played < page.audio.size:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # the echo tail and a silence
            done.set()

        await receive_while(client, asyncio.create_task(until_played()))
        await playing
        await client.ack(response_id, page.played_ms())
        heard = await client.heard(item_id, lambda e: e["text"] == REPLY, timeout=30)
    assert not client.of_type("input_audio_buffer.speech_started")
    response_done = client.of_type("response.done")[0]
    assert response_done["response"]["status"] == "completed"
    assert page.played_ms() >= 8000
    assert -35.0 <= page.loudest_10ms_dbfs() <= -25.0
    assert heard["text"] == REPLY


async def test_a_person_talking_over_the_echo_interrupts_the_reply(start_server) -> None:
    server = await start_server(tts="piper", calibration="auto")
    person = fx.at_peak_dbfs(fx.speech("Stop, tell me about the planets instead.", "espeak",
                                       "en-us"), -6.0)
    person_24k = resample(person, fx.RATE_HZ, INPUT_RATE_HZ)
    person_at_ms = 2500
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await start_reply(client)
        page = EchoingPage(client, response_id, person_24k, person_at_ms)
        done = asyncio.Event()
        playing = asyncio.create_task(page.run(done))

        async def until_transcribed() -> None:
            while not client.of_type("conversation.item.input_audio_transcription.completed"):
                await asyncio.sleep(0.05)
            done.set()

        await receive_while(client, asyncio.create_task(until_transcribed()))
        await playing
    started = client.of_type("input_audio_buffer.speech_started")
    assert len(started) == 1
    onset_ms = person_at_ms + fx.active_span_ms(person)[0]
    assert onset_ms - 600 <= started[0]["audio_start_ms"] <= onset_ms + 100
    cancelled = client.of_type("response.done")[0]
    assert cancelled["response"]["id"] == response_id
    assert cancelled["response"]["status"] == "cancelled"
    assert client.of_type("output_audio_buffer.cleared", response_id=response_id)
    assert page.played_ms() < 5000
    transcript = client.of_type("conversation.item.input_audio_transcription.completed")[0]
    assert "planet" in transcript["transcript"].lower()
