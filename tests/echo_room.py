"""A page in a room, for echo tests and benchmarks: its microphone hears its own loudspeaker.

`Room` is the acoustic path: the loudspeaker reaches the microphone `echo_lag_ms` late (output
and capture latency, the distance) at `echo_gain_db`, optionally with a reverberant tail, over a
seeded pink noise floor. `RoomPage` plays the demo page with server VAD over a plain
`websockets` client, in real time: it streams its microphone from the start of the session in
40 ms appends, plays the reply after a 100 ms jitter buffer, ACKs every 150 ms while playing
and once more when the reply ends or is interrupted (as web/playback.js does), and stops playing
when the server interrupts the reply. A person (`person`) can speak into the room too.

Everything here is 24 kHz float32 in [-1, 1] (the session's input and output rate).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from server.speech.resampling import resample
from tests import speech_fixtures as fx
from tests.realtime_client import RealtimeClient

RATE_HZ = 24_000
"""Rate of the page's microphone and loudspeaker (the session's input and output rate)."""
TICK_MS = 20
"""How often the page wakes up to play, listen and send."""
APPEND_MS = 40
"""Microphone audio per `input_audio_buffer.append` (as the page sends it)."""
JITTER_BUFFER_MS = 100
"""Audio the page holds before it starts playing a reply."""
ACK_INTERVAL_MS = 150
"""`playback.ack` period while a reply plays (web/playback.js, ACK_INTERVAL_MS)."""
SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
              "silence_duration_ms": 500, "create_response": True, "interrupt_response": True}
"""The turn detection the page asks for (web/mic-control.js)."""
TRANSCRIPT = "conversation.item.input_audio_transcription.completed"
SETTLE_S = 60.0
"""Longest wait for the person's turns to be transcribed after the reply ended (s)."""
RESPONSE_WAIT_S = 1.0
"""How long the page listens on for responses once every turn was transcribed (s)."""
RUN_LIMIT_S = 150.0
"""Longest `RoomPage.run` (s): a reply that never starts or never ends fails the run (its
events in the message) instead of holding the test until pytest's timeout."""
NOISE_MS = 60_000
"""Noise floor generated per page; a longer session hears it again from its start."""


@dataclass(frozen=True, slots=True)
class Room:
    """The echo path from the page's loudspeaker to its microphone.

    Attributes:
        echo_gain_db: level of the echo relative to the played audio (dB); None: no echo (a
            headset).
        echo_lag_ms: delay of the echo behind playback (ms): output + capture latency.
        noise_dbfs: RMS level of the pink noise floor (dBFS; None: digital silence).
        rt60_ms: reverberation time (ms) of an exponentially decaying noise tail added to the
            direct echo with equal energy (direct-to-reverberant ratio 0 dB); 0: direct only.
        seed: seed of the noise floor and the reverberant tail.
    """

    echo_gain_db: float | None = -30.0
    echo_lag_ms: int = 150
    noise_dbfs: float | None = -60.0
    rt60_ms: float = 0.0
    seed: int = 0

    def impulse_response(self) -> np.ndarray:
        """The echo path's impulse response at `RATE_HZ`, times the echo gain: a unit direct
        path, then (with `rt60_ms`) Gaussian noise decaying 60 dB over `rt60_ms`, scaled to the
        direct path's energy."""
        if self.echo_gain_db is None:
            return np.zeros(1, dtype=np.float32)
        gain = 10.0 ** (self.echo_gain_db / 20.0)
        if self.rt60_ms <= 0:
            return np.array([gain], dtype=np.float32)
        rng = np.random.default_rng(self.seed + 1)
        count = round(self.rt60_ms * RATE_HZ / 1000)
        decay = 10.0 ** (-3.0 * np.arange(count) / count)  # -60 dB in amplitude over rt60
        tail = rng.standard_normal(count) * decay
        tail *= 1.0 / np.sqrt(np.sum(tail ** 2))
        return (np.concatenate(([1.0], tail[1:])) * gain).astype(np.float32)

    def noise(self, duration_ms: float) -> np.ndarray:
        """`duration_ms` of the room's noise floor (zeros without one)."""
        samples = round(duration_ms * RATE_HZ / 1000)
        if self.noise_dbfs is None:
            return np.zeros(samples, dtype=np.float32)
        pink = _pink_noise(self.seed, duration_ms)[:samples]
        return (pink * 10.0 ** (self.noise_dbfs / 20.0)).astype(np.float32)

    def describe(self) -> str:
        """A short label: "-30 dB, 150 ms, -60 dBFS" (+ ", RT60 300 ms"), "no echo, -60 dBFS"."""
        noise = "no noise" if self.noise_dbfs is None else f"{self.noise_dbfs:.0f} dBFS"
        if self.echo_gain_db is None:
            return f"no echo, {noise}"
        text = f"{self.echo_gain_db:.0f} dB, {self.echo_lag_ms} ms, {noise}"
        return text + (f", RT60 {self.rt60_ms:.0f} ms" if self.rt60_ms else "")


@dataclass(slots=True)
class RoomResult:
    """What one `RoomPage.run` saw.

    Attributes:
        speech_started: `audio_start_ms` of every `input_audio_buffer.speech_started`.
        transcripts: transcripts of the person's turns, in order.
        played_ms: reply audio the loudspeaker played.
        interrupted_at_ms: the page's play position when the server interrupted the reply
            (None: it played to its end).
        responses: ids of the responses created after the first.
        person_onset_ms: microphone position (ms) of the person's first sample at -40 dBFS or
            louder (None without a person).
        reply_start_ms: microphone position (ms) at which the loudspeaker started the reply
            (None: it never did).
    """

    speech_started: list[int] = field(default_factory=list)
    transcripts: list[str] = field(default_factory=list)
    played_ms: int = 0
    interrupted_at_ms: int | None = None
    responses: list[str] = field(default_factory=list)
    person_onset_ms: float | None = None
    reply_start_ms: float | None = None


class RoomPage:
    """The demo page in a `Room`, playing one reply and streaming its microphone.

    Args:
        client: a connected session.
        room: the echo path.
        person: what a person says into the microphone (24 kHz), or None.
        person_at_ms: when the person starts, ms after the reply started playing.
        ack_interval_ms: `playback.ack` period while the reply plays (ms).
        sound: what the room sounds into the microphone from its first sample on (24 kHz; a
            talk radio, a TV), or None; silence after its end.
    """

    def __init__(self, client: RealtimeClient, room: Room, person: np.ndarray | None = None,
                 person_at_ms: float = 0.0, ack_interval_ms: int = ACK_INTERVAL_MS,
                 sound: np.ndarray | None = None) -> None:
        self.client = client
        self.sound = sound
        self.ack_interval_ms = ack_interval_ms
        self.room = room
        self.person = person
        self.person_at_ms = person_at_ms
        self._impulse = room.impulse_response()
        self._noise = room.noise(NOISE_MS)
        self._reply = np.zeros(0, dtype=np.float32)
        self._speaker: list[np.ndarray] = []
        self._speaker_samples = 0
        self._mic_samples = 0
        self._played = 0
        self._play_from: int | None = None
        self._response_id: str | None = None
        self._audio_done = False
        self._stopped = False
        self._finished_at: int | None = None
        self._scanned = 0
        self._result = RoomResult()

    async def run(self, prompt: str, after_ms: float = 2500.0) -> RoomResult:
        """Turn on server VAD, stream the microphone, send `prompt` (typed) and play the reply
        until it ends or is interrupted; keep listening `after_ms` more, and on until every
        turn the server started has its transcript (or was deleted or a backchannel; at most
        `SETTLE_S`), and
        `RESPONSE_WAIT_S` more for responses to them. Returns what happened.

        Raises:
            AssertionError: the run lasted `RUN_LIMIT_S` (the reply never started or ended).
        """
        client = self.client
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        await client.wait_for("session.updated")
        reader = asyncio.create_task(self._read())
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            await client.send({"type": "conversation.item.create", "item": {
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": prompt}]}})
            await client.send({"type": "response.create"})
            last_ack, settled_at = 0, None
            while settled_at is None or loop.time() < settled_at + RESPONSE_WAIT_S:
                await asyncio.sleep(TICK_MS / 1000)
                self._take_events()
                assert loop.time() < started + RUN_LIMIT_S, (
                    f"no end after {RUN_LIMIT_S:g} s: {[e['type'] for e in client.events]}")
                now = round((loop.time() - started) * RATE_HZ)
                self._play_until(now)
                await self._listen_until(now)
                if settled_at is None and self._settled(after_ms):
                    settled_at = loop.time()
                if self._response_id is None or self._play_from is None:
                    continue
                if self._finished_at is None and self._finished():
                    self._finished_at = self._speaker_samples
                    await client.ack(self._response_id, self.played_ms())
                elif self._finished_at is None and now - last_ack >= (
                        self.ack_interval_ms * RATE_HZ // 1000):
                    last_ack = now
                    await client.ack(self._response_id, self.played_ms())
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        self._take_events()
        result = self._result
        result.played_ms = self.played_ms()
        if self._play_from is not None:
            result.reply_start_ms = self._play_from * 1000 / RATE_HZ
        return result

    def played_ms(self) -> int:
        """Reply audio played so far (ms)."""
        return self._played * 1000 // RATE_HZ

    async def _read(self) -> None:
        while True:
            await self.client.drain(0.05)

    def _settled(self, after_ms: float) -> bool:
        """The reply ended `after_ms` ago and every turn started has its transcript, was
        deleted or was a backchannel (or `SETTLE_S` passed since the reply ended)."""
        if self._finished_at is None:
            return False
        listened = (self._mic_samples - self._finished_at) / RATE_HZ
        if listened < after_ms / 1000:
            return False
        started = {e["item_id"] for e in self.client.of_type("input_audio_buffer.speech_started")}
        settled = {e["item_id"] for kind in (TRANSCRIPT, "conversation.item.deleted",
                                             "input_audio_buffer.backchannel")
                   for e in self.client.of_type(kind)}
        return started <= settled or listened >= SETTLE_S

    def _take_events(self) -> None:
        """Queue new reply audio; note interruptions, turns and later responses."""
        events = self.client.events
        result = self._result
        for event in events[self._scanned:]:
            kind = event["type"]
            if kind == "response.created":
                if self._response_id is None:
                    self._response_id = event["response"]["id"]
                else:
                    result.responses.append(event["response"]["id"])
            elif kind == "response.output_audio.delta" and event["response_id"] == (
                    self._response_id) and not self._stopped:
                pcm = np.frombuffer(base64.b64decode(event["delta"]), dtype="<i2")
                self._reply = np.concatenate((self._reply, pcm.astype(np.float32) / 32768.0))
                if self._play_from is None:
                    self._play_from = self._speaker_samples + JITTER_BUFFER_MS * RATE_HZ // 1000
            elif kind == "response.output_audio.done" and event["response_id"] == (
                    self._response_id):
                self._audio_done = True
            elif self._interrupts(event) and not self._stopped:
                self._stopped = True
                result.interrupted_at_ms = self.played_ms()
            elif kind == "input_audio_buffer.speech_started":
                result.speech_started.append(event["audio_start_ms"])
            elif kind == TRANSCRIPT:
                result.transcripts.append(event["transcript"])
        self._scanned = len(events)

    def _interrupts(self, event: dict[str, Any]) -> bool:
        """The server stopped the reply: its audio was cleared, it was cancelled or paused."""
        kind = event["type"]
        if kind in ("output_audio_buffer.cleared", "response.paused"):
            return event.get("response_id") == self._response_id
        return (kind == "response.done" and event["response"]["id"] == self._response_id
                and event["response"]["status"] == "cancelled")

    def _finished(self) -> bool:
        return self._stopped or (self._audio_done and self._played >= self._reply.size)

    def _play_until(self, now: int) -> None:
        """Loudspeaker samples up to `now`: the reply from its start while it plays, silence
        before, after and where the audio has not arrived yet."""
        count = now - self._speaker_samples
        if count <= 0:
            return
        out = np.zeros(count, dtype=np.float32)
        if self._play_from is not None and not self._stopped:
            skip = max(0, self._play_from - self._speaker_samples)
            take = max(0, min(count - skip, self._reply.size - self._played))
            out[skip:skip + take] = self._reply[self._played:self._played + take]
            self._played += take
        self._speaker.append(out)
        self._speaker_samples = now

    async def _listen_until(self, now: int) -> None:
        """Send the microphone up to `now` in whole `APPEND_MS` appends."""
        step = APPEND_MS * RATE_HZ // 1000
        while self._mic_samples + step <= now:
            chunk = self._hear(self._mic_samples, step)
            self._mic_samples += step
            await self.client.send({"type": "input_audio_buffer.append",
                                    "audio": base64.b64encode(fx.to_pcm16(chunk)).decode()})

    def _hear(self, start: int, count: int) -> np.ndarray:
        """Microphone samples [start, start + count): the echo, the person, the room's sound,
        the noise floor."""
        speaker = np.concatenate(self._speaker)
        self._speaker = [speaker]
        lag = self.room.echo_lag_ms * RATE_HZ // 1000
        taps = self._impulse.size
        source = _window(speaker, start - lag - taps + 1, count + taps - 1)
        size = source.size + taps - 1
        heard = np.fft.irfft(np.fft.rfft(source, size) * np.fft.rfft(self._impulse, size),
                             size)[taps - 1:taps - 1 + count].astype(np.float32)
        if self.person is not None and self._play_from is not None:
            at = self._play_from + round(self.person_at_ms * RATE_HZ / 1000)
            if self._result.person_onset_ms is None:
                onset_ms, _ = fx.active_span_ms(resample(self.person, RATE_HZ, fx.RATE_HZ))
                self._result.person_onset_ms = at * 1000 / RATE_HZ + onset_ms
            heard += _window(self.person, start - at, count)
        if self.sound is not None:
            heard += _window(self.sound, start, count)
        heard += _window(self._noise, start % self._noise.size, count)
        return np.clip(heard, -1.0, 1.0)


@functools.cache
def _pink_noise(seed: int, duration_ms: float) -> np.ndarray:
    """Seeded pink noise at `RATE_HZ`, 0 dBFS RMS (read-only: shared by every caller)."""
    pink = resample(fx.pink_noise(np.random.default_rng(seed), duration_ms), fx.RATE_HZ, RATE_HZ)
    pink = pink / float(np.sqrt(np.mean(pink.astype(np.float64) ** 2)))
    pink.setflags(write=False)
    return pink


def _window(signal: np.ndarray, first: int, count: int) -> np.ndarray:
    """`count` samples of `signal` from index `first`, zeros outside it."""
    out = np.zeros(count, dtype=np.float32)
    lo, hi = max(first, 0), min(first + count, signal.size)
    if hi > lo:
        out[lo - first:hi - first] = signal[lo:hi]
    return out


def words(text: str) -> list[str]:
    """Lower-case words of `text` (letters, digits, apostrophes), for word error rates."""
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()


def word_errors(reference: str, hypothesis: str) -> int:
    """Substitutions + deletions + insertions turning `reference`'s words into `hypothesis`'s
    (Levenshtein distance over `words`); the word error rate is this over the reference's
    word count."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, start=1):
        previous, row = row, [i] + [0] * len(hyp)
        for j, heard in enumerate(hyp, start=1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (word != heard))
    return row[-1]
