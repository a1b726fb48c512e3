"""The simulated microphone of the echo tests: a real Piper reply as the server sent it (24 kHz),
coming back through the microphone at a delay and gain or through a room (tests/echo_room.py),
over a noise floor, appended every 40 ms with the playing position the session would estimate
(known to +-20 ms); the server's echo detector and VAD run over it. `paced_playback`: a reply
the server paces while its synthesis falls behind, played and ACKed as the page does, heard
through a room.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable

import numpy as np

from server.listening.band_envelope import EchoReference
from server.listening.echo import ECHO_TAIL_MS, EchoDetector
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import TurnDetection
from server.listening.turn_events import SpeechStarted
from server.realtime.arrival import InputClock
from server.realtime.response_state import QueuedAudio, ResponseState
from server.realtime.session import SessionConfig
from server.speech.resampling import resample
from tests import speech_fixtures as fx
from tests.echo_room import Room

REPLY = ("Sure. The museum opens at nine in the morning and closes at six, except on Mondays "
         "when it stays closed all day.")
LEAD_MS = 1000
"""Microphone audio before the reply starts playing."""
APPEND_MS = 40
OUTPUT_RATE_HZ = 24_000


@functools.cache
def reply_24k(text: str = REPLY) -> np.ndarray:
    """The reply as the server sends it: Piper resampled to the 24 kHz output rate."""
    tts = fx.synthesizer("piper")
    pcm = np.concatenate([chunk.pcm for chunk in tts.synthesize(text)])
    return resample(pcm, tts.sample_rate_hz, OUTPUT_RATE_HZ)


def reply_ms(text: str = REPLY) -> float:
    return reply_24k(text).size * 1000 / OUTPUT_RATE_HZ


def microphone(delay_ms: float, gain_db: float, boost_db: float = 0.0,
               person: np.ndarray | None = None, person_at_ms: float = 0.0) -> np.ndarray:
    """16 kHz microphone: the reply `delay_ms` after it started playing (at `LEAD_MS`), scaled
    by `gain_db`, its gain rising by `boost_db` over its first second (an AGC catching up), plus
    `person` at `person_at_ms`, over a -70 dBFS peak pink noise floor."""
    echo = resample(reply_24k(), OUTPUT_RATE_HZ, fx.RATE_HZ) * 10.0 ** (gain_db / 20.0)
    echo *= 10.0 ** (np.minimum(np.arange(echo.size) / fx.RATE_HZ, 1.0) * boost_db / 20.0)
    mic = fx.place(echo, LEAD_MS + delay_ms, 1000)
    if person is not None:
        at = round(person_at_ms * fx.RATE_HZ / 1000)
        mic = np.concatenate((mic, np.zeros(max(0, at + person.size - mic.size), np.float32)))
        mic[at : at + person.size] += person
    return np.clip(fx.with_noise_floor(mic, np.random.default_rng(4), -70.0), -1.0, 1.0)


def room_microphone(room: Room, person: np.ndarray | None = None,
                    person_at_ms: float = 0.0, played: np.ndarray | None = None) -> np.ndarray:
    """16 kHz microphone in `room` (tests/echo_room.py): the reply (or `played`, 24 kHz
    float: what the loudspeaker gave out instead) played from `LEAD_MS` through the room's echo
    path and its noise floor, 2.5 s past its end, plus `person` (16 kHz) at `person_at_ms`."""
    echo = np.convolve(reply_24k() if played is None else played, room.impulse_response())
    lead = (LEAD_MS + room.echo_lag_ms) * OUTPUT_RATE_HZ // 1000
    total = lead + echo.size + 2500 * OUTPUT_RATE_HZ // 1000
    mic = np.zeros(total, dtype=np.float32)
    mic[lead:lead + echo.size] += echo
    mic += room.noise(total * 1000 / OUTPUT_RATE_HZ + 10)[:total]
    mic = resample(mic, OUTPUT_RATE_HZ, fx.RATE_HZ)
    if person is not None:
        at = round(person_at_ms * fx.RATE_HZ / 1000)
        mic[at:at + person.size] += person[:mic.size - at]
    return np.clip(mic, -1.0, 1.0)


def playing_position(mic_ms: float, rng: np.random.Generator, text: str = REPLY) -> int | None:
    """The session's estimate of the position of reply `text` playing at `mic_ms`: exact +-20
    ms, None outside the reply and its echo tail."""
    position = mic_ms - LEAD_MS + rng.uniform(-20.0, 20.0)
    if not 0.0 <= position <= reply_ms(text) + ECHO_TAIL_MS:
        return None
    return int(min(position, reply_ms(text)))


def reference(text: str = REPLY) -> EchoReference:
    recorded = EchoReference(OUTPUT_RATE_HZ)
    reply = reply_24k(text)
    for start in range(0, reply.size, 2400):  # 100 ms pieces, as the TTS chunks arrive
        recorded.append(reply[start : start + 2400])
    return recorded


def echo_matches(mic: np.ndarray, span_ms: int = 250) -> list[tuple[int, float, int]]:
    """(end ms, correlation, lag ms) of the stretches `span_ms` long ending every 32 ms while
    the echo is audible, as `TurnDetector` asks them."""
    detector, recorded, rng = EchoDetector(), reference(), np.random.default_rng(1)
    step = fx.RATE_HZ * APPEND_MS // 1000
    matches, next_end = [], 0
    for start in range(0, mic.size, step):
        end_ms = (start + step) * 1000 // fx.RATE_HZ
        detector.feed(mic[start : start + step], playing_position(end_ms, rng), recorded)
        while next_end + 32 <= end_ms:
            next_end += 32
            match = detector.match(next_end - span_ms, next_end)
            matches.append((next_end, match.correlation, match.lag_ms))
    return matches


def fed_detector(mic: np.ndarray, until_ms: float) -> EchoDetector:
    """An `EchoDetector` fed `mic` (16 kHz) up to `until_ms` in `APPEND_MS` appends with the
    reply's reference and the playing position the session would estimate."""
    detector, recorded, rng = EchoDetector(), reference(), np.random.default_rng(1)
    step = fx.RATE_HZ * APPEND_MS // 1000
    for start in range(0, round(until_ms * fx.RATE_HZ / 1000), step):
        end_ms = (start + step) * 1000 // fx.RATE_HZ
        detector.feed(mic[start:start + step], playing_position(end_ms, rng), recorded)
    return detector


def turn_starts(mic: np.ndarray, with_reference: bool = True,
                position_at: Callable[[float, np.random.Generator], int | None] | None = None,
                playing_ms: float | None = None, text: str = REPLY) -> list[SpeechStarted]:
    """Run the server's VAD (`InputSpeechDetector`) over `mic` appended as the page does, with
    the assistant playing reply `text` from `LEAD_MS` for `playing_ms` (default: the reply's
    length), `position_at` estimating the reply position playing at each append (default:
    `playing_position`). Without the reference, the room gate is off too (Silero and the
    level range gate alone: the controls that show the echo gate is needed)."""
    if position_at is None:
        position_at = functools.partial(playing_position, text=text)
    detector = InputSpeechDetector(TurnDetection(), OUTPUT_RATE_HZ, 0)
    if not with_reference:
        detector._turns.room_gate = None
    recorded, rng = reference(text) if with_reference else None, np.random.default_rng(2)
    pcm16 = fx.to_pcm16(resample(mic, fx.RATE_HZ, OUTPUT_RATE_HZ))
    step = OUTPUT_RATE_HZ * 2 * APPEND_MS // 1000
    playing_ms = reply_ms(text) if playing_ms is None else playing_ms
    events = []
    for start in range(0, len(pcm16), step):
        end_ms = (start + step) * 1000 // (OUTPUT_RATE_HZ * 2)
        position = position_at(end_ms, rng)
        playing = position is not None and end_ms - LEAD_MS <= playing_ms
        events += detector.feed(pcm16[start : start + step], playing, position, recorded)
    return [event for event in events if isinstance(event, SpeechStarted)]


PEOPLE = [
    ("What time does the museum open tomorrow?", "piper", None, -6.0),
    ("Wait, stop, that is not what I asked.", "espeak", "en-us", -6.0),
    ("Tell me about the planets instead.", "espeak", "en-us+f3", -12.0),
    ("Hold on, I have a question.", "piper", None, -12.0),
]


MOON = "Sure. The moon pulls the sea, and the sea answers twice a day. That's it!"
"""The tester's reply (`say: ...`, Piper, `--deterministic`)."""
SYNTHESIZED_AT_MS = (150, 475, 1360)
"""When Piper's first chunks of `MOON` were ready (ms after the request; the rest with the
last), as in the tester's trace: the third came 480 ms after the client had played the first
two, and the client's loudspeaker fell silent in between."""
STALL_CHANCE = 0.05
"""Share of the appends of `paced_playback` that a stall holds back: about one a second, as
the tester's client on a loaded machine did (300-450 ms of appends in one burst, several times
a run)."""


def paced_playback(room: Room, ack_every_ms: int | None, person: np.ndarray | None = None,
                   person_at_ms: float = 0.0, late_ms: int = 0,
                   pickup_late_ms: int = 0, ack_repeats: bool = False) -> list[SpeechStarted]:
    """The server VAD's turns over `MOON` played through `room` by a client the server paces.

    The server's own pacing and estimate run (`ResponseState`, the session's defaults: 400 ms
    lead, 100 ms jitter buffer, 100 ms frames) as Piper's chunks become ready
    (`SYNTHESIZED_AT_MS`). The client plays like the page (from 100 ms queued on, then whatever
    it has: silent when it runs dry, on as soon as more comes) and ACKs its position every
    `ack_every_ms` when it moved (None: never; with `ack_repeats`, whether it moved or not, as
    `tests.echo_room.RoomPage` does). Its microphone hears the loudspeaker through
    `room` plus `person` (24 kHz) at `person_at_ms` (ms after the request) and is appended
    every 40 ms; one in `1 / STALL_CHANCE` appends is held up to `late_ms` (uniformly, seeded)
    and the appends and ACKs after it wait behind it (a stalled event loop, the network: one
    socket keeps the client's order). Audio sent while the client stands dry (it played all it
    had) reaches its player `pickup_late_ms` later, and the audio after it behind it: its event
    loop stalled as the audio came (the page's script blocked while its worklet ran dry). Each
    append is tagged with the position the server
    estimates in audio time when it arrives, as `ReplyPlayback.position_ms` does (for
    `ECHO_TAIL_MS` after the reply played out); the clock ticks every 10 ms.
    """
    tts = fx.synthesizer("piper")
    chunks = [resample(chunk.pcm, tts.sample_rate_hz, OUTPUT_RATE_HZ)
              for chunk in tts.synthesize(MOON)]
    total = sum(chunk.size for chunk in chunks)
    tick, config = OUTPUT_RATE_HZ // 100, SessionConfig()
    response, recorded = ResponseState("resp", "item", 0), EchoReference(OUTPUT_RATE_HZ)
    received = np.zeros(0, dtype=np.float32)
    arriving: deque[tuple[float, np.ndarray]] = deque()  # (pickup ms, audio) not yet received
    speaker = np.zeros(total + OUTPUT_RATE_HZ * 8, dtype=np.float32)
    queued = played = 0
    ended_ms: float | None = None
    rng, input_clock = np.random.default_rng(3), InputClock()
    ends_ms = np.arange(APPEND_MS, speaker.size * 1000 // OUTPUT_RATE_HZ + 1, APPEND_MS)
    stalls_ms = rng.integers(0, late_ms // 10 + 1, ends_ms.size) * 10
    arrivals_ms = np.maximum.accumulate(
        ends_ms + np.where(rng.random(ends_ms.size) < STALL_CHANCE, stalls_ms, 0))
    positions: list[int | None] = []
    acks: deque[tuple[float, int, int]] = deque()  # (read ms, appends before it, played ms)
    for k in range(speaker.size // tick):
        now_ms = 10.0 * k
        while queued < len(chunks) and now_ms >= SYNTHESIZED_AT_MS[
                min(queued, len(SYNTHESIZED_AT_MS) - 1)]:
            response.queue_speech(fx.to_pcm16(chunks[queued]), [], OUTPUT_RATE_HZ,
                                  config.frame_ms)
            queued += 1
        while isinstance(frame := response.pop_sendable(
                now_ms, OUTPUT_RATE_HZ, config.lead_ms, config.jitter_ms,
                config.ack_timeout_ms, ack_every_ms is not None), QueuedAudio):
            audio = np.frombuffer(frame.pcm16, dtype="<i2").astype(np.float32) / 32768.0
            dry = not arriving and 0 < received.size <= played
            arriving.append((now_ms + pickup_late_ms if dry else
                             arriving[-1][0] if arriving else now_ms, audio))
            recorded.append(audio)
        while arriving and arriving[0][0] <= now_ms:
            received = np.concatenate((received, arriving.popleft()[1]))
        if played or received.size >= OUTPUT_RATE_HZ * config.jitter_ms // 1000:
            audio = received[played:played + tick]
            speaker[k * tick:k * tick + audio.size] = audio
            played += audio.size
            if played == total and ended_ms is None:
                ended_ms = now_ms
        played_ms = played * 1000 // OUTPUT_RATE_HZ
        if (ack_every_ms is not None and k % (ack_every_ms // 10) == 0
                and response.first_send_ms is not None and (ack_repeats or (
                    played_ms != response.cursor.played_ms
                    and (not acks or acks[-1][2] != played_ms)))):
            before = int(np.searchsorted(ends_ms, now_ms, side="right"))
            acks.append((max(now_ms, arrivals_ms[before - 1] if before else 0.0), before,
                         played_ms))
        while True:  # the server reads the socket in the client's order
            count = len(positions)
            if acks and acks[0][1] <= count:
                if acks[0][0] > now_ms:
                    break
                _, _, acked_ms = acks.popleft()
                response.cursor.acknowledge(acked_ms)
                response.acknowledged(now_ms, float(ends_ms[count - 1]) if count else 0.0)
                continue
            if count == ends_ms.size or arrivals_ms[count] > now_ms:
                break
            end_ms = float(ends_ms[count])
            input_clock.arrived(now_ms, end_ms)
            delay_ms, least_delay_ms = input_clock.delay_ms, input_clock.least_delay_ms
            assert delay_ms is not None and least_delay_ms is not None
            response.anchors.place(end_ms, delay_ms)
            positions.append(None if response.first_send_ms is None
                             or (ended_ms is not None and now_ms > ended_ms + ECHO_TAIL_MS)
                             else response.played_at_audio_ms(end_ms, delay_ms, least_delay_ms,
                                                              config.jitter_ms))
    echo = np.convolve(speaker, room.impulse_response())[:speaker.size]
    lag = room.echo_lag_ms * OUTPUT_RATE_HZ // 1000
    mic = np.concatenate((np.zeros(lag, dtype=np.float32), echo[:echo.size - lag]))
    mic += room.noise(speaker.size * 1000 / OUTPUT_RATE_HZ + 10)[:speaker.size]
    if person is not None:
        at = round(person_at_ms * OUTPUT_RATE_HZ / 1000)
        mic[at:at + person.size] += person[:mic.size - at]
    pcm16 = fx.to_pcm16(mic)
    detector = InputSpeechDetector(TurnDetection(), OUTPUT_RATE_HZ, 0)
    step = OUTPUT_RATE_HZ * 2 * APPEND_MS // 1000
    events = []
    for start, position in zip(range(0, len(pcm16), step), positions, strict=False):
        playing = position is not None and position < total * 1000 // OUTPUT_RATE_HZ
        events += detector.feed(pcm16[start:start + step], playing, position, recorded)
    return [event for event in events if isinstance(event, SpeechStarted)]
