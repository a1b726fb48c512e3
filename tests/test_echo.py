"""Echo detection (server/listening/echo.py) on real Piper replies: the assistant's own voice
coming back
through the microphone at unknown delay and gain is recognised; a person talking over it is not
mistaken for it.

The microphone is simulated as the page delivers it: the reply (Piper, as the server sent it at
24 kHz) delayed and scaled, over a pink noise floor, appended every 40 ms with the playing
position the session would estimate (known to +-20 ms).
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable

import numpy as np
import pytest

from server.listening.band_envelope import BAND_EDGES_HZ, BandEnvelope, EchoReference
from server.listening.echo import ECHO_TAIL_MS, EchoDetector
from server.listening.echo_path import ECHO_CORRELATION
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import TurnDetection
from server.listening.turn_events import SpeechStarted
from server.realtime.arrival import ArrivalLateness
from server.realtime.response_state import QueuedAudio, ResponseState
from server.realtime.session import Session, SessionConfig
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


def reply_ms() -> float:
    return reply_24k().size * 1000 / OUTPUT_RATE_HZ


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


def playing_position(mic_ms: float, rng: np.random.Generator) -> int | None:
    """The session's estimate of the reply position playing at `mic_ms`: exact +-20 ms, None
    outside the reply and its echo tail."""
    position = mic_ms - LEAD_MS + rng.uniform(-20.0, 20.0)
    if not 0.0 <= position <= reply_ms() + ECHO_TAIL_MS:
        return None
    return int(min(position, reply_ms()))


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


def turn_starts(mic: np.ndarray, with_reference: bool = True,
                position_at: Callable[[float, np.random.Generator], int | None] = (
                    playing_position), playing_ms: float | None = None) -> list[SpeechStarted]:
    """Run the server's VAD (`InputSpeechDetector`) over `mic` appended as the page does, with
    the assistant playing the reply from `LEAD_MS` for `playing_ms` (default: the reply's
    length), `position_at` estimating the reply position playing at each append. Without the
    reference, the room gate is off too (Silero and the level range gate alone: the controls
    that show the echo gate is needed)."""
    detector = InputSpeechDetector(TurnDetection(), OUTPUT_RATE_HZ, 0)
    if not with_reference:
        detector._turns.room_gate = None
    recorded, rng = reference() if with_reference else None, np.random.default_rng(2)
    pcm16 = fx.to_pcm16(resample(mic, fx.RATE_HZ, OUTPUT_RATE_HZ))
    step = OUTPUT_RATE_HZ * 2 * APPEND_MS // 1000
    playing_ms = reply_ms() if playing_ms is None else playing_ms
    events = []
    for start in range(0, len(pcm16), step):
        end_ms = (start + step) * 1000 // (OUTPUT_RATE_HZ * 2)
        position = position_at(end_ms, rng)
        playing = position is not None and end_ms - LEAD_MS <= playing_ms
        events += detector.feed(pcm16[start : start + step], playing, position, recorded)
    return [event for event in events if isinstance(event, SpeechStarted)]


# --- envelopes ----------------------------------------------------------------------------


def test_band_envelope_levels_and_streaming() -> None:
    t = np.arange(1600) / 16_000
    sine = np.sin(2 * np.pi * 1500 * t).astype(np.float32)  # in the 1000-2000 Hz band
    envelope = BandEnvelope(16_000)
    rows = np.concatenate([envelope.feed(sine[i : i + 70]) for i in range(0, sine.size, 70)])
    assert rows.shape == (10, len(BAND_EDGES_HZ) - 1)
    # The first two 30 ms windows reach back over zeros before the stream.
    assert rows[0, 2] < rows[1, 2] < -3.1
    assert rows[2:, 2] == pytest.approx(np.full(8, -3.0), abs=0.1)
    assert np.all(rows[2:, [0, 1, 3, 4]] < -40.0)
    assert np.all(BandEnvelope(24_000).feed(np.zeros(480)) == -120.0)


def test_reference_reads_silence_outside_the_reply() -> None:
    recorded = reference()
    frames = int(reply_ms()) // 10
    levels = recorded.levels(-5, frames + 10)
    assert np.all(levels[:5] == -120.0) and np.all(levels[-5:] == -120.0)
    assert levels[5:-5].max() > -20.0


# --- the echo of the reply ----------------------------------------------------------------


@pytest.mark.parametrize("delay_ms", [50, 150, 400])
@pytest.mark.parametrize("gain_db", [-40, -20, 0])
def test_the_echo_matches_the_reply_at_any_delay_and_gain(delay_ms: int, gain_db: int) -> None:
    """The reply at -40..0 dB (peaks about -40..0 dBFS), 50-400 ms late: every stretch the turn
    detector could ask about correlates at or above the threshold, at the true lag."""
    matches = echo_matches(microphone(delay_ms, gain_db))
    audible = [(c, lag) for end, c, lag in matches
               if LEAD_MS + delay_ms + 250 <= end <= LEAD_MS + delay_ms + reply_ms()]
    assert min(c for c, _ in audible) >= ECHO_CORRELATION
    assert abs(float(np.median([lag for _, lag in audible])) - delay_ms) <= 50


@pytest.mark.parametrize("delay_ms", [50, 400])
def test_an_agc_boost_does_not_hide_the_echo(delay_ms: int) -> None:
    """A quiet echo (-30 dB) whose gain rises by 10 dB while it plays, as Chromium's AGC does."""
    matches = echo_matches(microphone(delay_ms, -30, boost_db=10))
    audible = [c for end, c, _ in matches
               if LEAD_MS + delay_ms + 250 <= end <= LEAD_MS + delay_ms + reply_ms()]
    assert min(audible) >= ECHO_CORRELATION


@pytest.mark.parametrize(("delay_ms", "gain_db", "boost_db"),
                         [(50, 0, 0), (150, -20, 10), (400, -40, 0), (150, -30, 10)])
def test_the_echo_never_starts_a_turn(delay_ms: int, gain_db: int, boost_db: int) -> None:
    mic = microphone(delay_ms, gain_db, boost_db)
    assert turn_starts(mic) == []
    # Silero alone cannot tell: without the reply to compare with, the echo is a turn.
    assert len(turn_starts(mic, with_reference=False)) >= 1


# --- a person over the echo ---------------------------------------------------------------


PEOPLE = [
    ("What time does the museum open tomorrow?", "piper", None, -6.0),
    ("Wait, stop, that is not what I asked.", "espeak", "en-us", -6.0),
    ("Tell me about the planets instead.", "espeak", "en-us+f3", -12.0),
    ("Hold on, I have a question.", "piper", None, -12.0),
]


@pytest.mark.parametrize(("text", "engine", "voice", "dbfs"), PEOPLE)
def test_a_person_over_the_echo_starts_a_turn(text: str, engine: str, voice: str | None,
                                               dbfs: float) -> None:
    """Another sentence (Piper or espeak-ng) at a normal level over the echo at an AGC-like
    -25 dBFS peak: the correlation falls below the threshold and the turn starts within
    600 ms of the person's onset, reaching back before it."""
    person = fx.at_peak_dbfs(fx.speech(text, engine, voice), dbfs)
    echo_peak = fx.peak_dbfs(reply_24k())
    mic = microphone(150, -25.0 - echo_peak, person=person, person_at_ms=LEAD_MS + 1500)
    onset_ms = LEAD_MS + 1500 + fx.active_span_ms(person)[0]
    matches = echo_matches(mic)
    after = [c for end, c, _ in matches if onset_ms + 250 <= end <= onset_ms + 600]
    assert min(after) < ECHO_CORRELATION
    started = turn_starts(mic)
    assert len(started) == 1
    assert onset_ms - 100 <= started[0].audio_start_ms <= onset_ms


@pytest.mark.parametrize(("text", "engine", "voice", "dbfs"), PEOPLE)
def test_the_turn_audio_starts_at_the_voice_not_with_the_echo(
        text: str, engine: str, voice: str | None, dbfs: float) -> None:
    """The issue's kind: a person over the reply's -30 dB echo over a -60 dBFS noise floor.
    The turn's audio starts within 100 ms before the person's voice onset (not the 300 ms prefix
    padding of echo before it), and the echo detector places that onset within 30 ms."""
    person = fx.at_peak_dbfs(fx.speech(text, engine, voice), dbfs)
    person_at_ms = LEAD_MS + 1500
    mic = room_microphone(Room(-30.0, 150, -60.0), person, person_at_ms)
    onset_ms = person_at_ms + fx.active_span_ms(person)[0]
    started = turn_starts(mic)
    assert len(started) == 1
    assert onset_ms - 100 <= started[0].audio_start_ms <= onset_ms
    detector, recorded, rng = EchoDetector(), reference(), np.random.default_rng(1)
    step = fx.RATE_HZ * APPEND_MS // 1000
    for start in range(0, round((onset_ms + 400) * fx.RATE_HZ / 1000), step):
        end_ms = (start + step) * 1000 // fx.RATE_HZ
        detector.feed(mic[start:start + step], playing_position(end_ms, rng), recorded)
    found = detector.voice_onset_ms(int(onset_ms) - 300, int(onset_ms) + 300)
    assert found is not None and abs(found - onset_ms) <= 30


ROOMS = [Room(-30.0, 150, -60.0), Room(-30.0, 400, -50.0), Room(-30.0, 250, -50.0),
         Room(-20.0, 400, -60.0, rt60_ms=400.0), Room(-30.0, 150, None, rt60_ms=400.0)]


@pytest.mark.parametrize("room", ROOMS, ids=Room.describe)
def test_the_echo_over_a_noise_floor_and_its_tail_never_starts_a_turn(room: Room) -> None:
    """The reply's echo at -30 / -20 dB, 150-400 ms late, over -60 / -50 dBFS RMS pink noise
    (5-15 dB under the echo), with and without a reverberant tail, to 2.5 s after the reply
    ended: no turn. Before the noise-floor model and the reverberant reference, all but the
    first started one here (measured with a 300 ms tail; the first, the issue's room, did over
    the protocol)."""
    assert turn_starts(room_microphone(room)) == []


FIRST_REPLY = "From a cursed kanji to a full chibi chorus line in a single evening."
"""The reply whose echo started a turn in CI (tests/test_echo_server.py, `ISSUE_REPLY`)."""


@pytest.mark.parametrize("text", [FIRST_REPLY, REPLY])
@pytest.mark.parametrize("room", [Room(-30.0, lag, noise) for lag in (150, 400)
                                  for noise in (-60.0, -50.0)], ids=Room.describe)
def test_an_echo_in_the_microphone_s_first_second_matches_the_reply(room: Room,
                                                                   text: str) -> None:
    """The kind CI found over the protocol (1 run in 12 on a loaded machine): the page streams
    its microphone from the session's start and the first reply plays soon after, so the
    echo's first words are judged before a second of microphone audio was heard. The noise
    floor was then unknown (it waited for 1 s), the noise's random levels were compared with
    the reply's, and the echo (-30 dB, 400 ms late, over -60 dBFS RMS pink noise) correlated
    0.78 and started a turn at 480 ms. Here the microphone starts with the reply: every 250 ms
    stretch of its first second that holds echo matches the reply (0.52-0.89 before the fix)."""
    reply = reply_24k(text)
    mic = room_microphone(room, played=reply)[LEAD_MS * fx.RATE_HZ // 1000:]
    detector, recorded = EchoDetector(), reference(text)
    step = fx.RATE_HZ * APPEND_MS // 1000
    correlations = []
    for start in range(0, fx.RATE_HZ, step):
        end_ms = (start + step) * 1000 // fx.RATE_HZ
        detector.feed(mic[start:start + step], end_ms, recorded)
        if end_ms >= room.echo_lag_ms + 300:
            correlations.append(detector.match(end_ms - 250, end_ms).correlation)
    assert correlations
    assert min(correlations) >= ECHO_CORRELATION


STALL_AT_MS = (1100, 1600, 2300, 3000)
"""Reply positions (ms) at which playback stalls in `test_a_stalled_playback_s_echo_...`."""
STALL_MS = 400
"""How long it stalls (ms)."""


@pytest.mark.parametrize("stall_at_ms", STALL_AT_MS)
def test_a_stalled_playback_s_echo_never_starts_a_turn(stall_at_ms: int) -> None:
    """The kind found by bench_echo on a loaded machine: the server synthesized slower than real
    time, the page's jitter buffer ran dry, and its loudspeaker fell silent for a while in the
    middle of the reply (the echo with it; the session's estimate of the playing position
    stalls at the audio sent). A lead-in over that silence gave no echo gain, every frame of the
    echo after it counted as unexplained, and the echo (-20 dB, 400 ms late, over a -60 dBFS
    floor) started a turn ("Vulture by Court.")."""
    room = Room(-20.0, 400, -60.0)
    reply = reply_24k()
    cut = stall_at_ms * OUTPUT_RATE_HZ // 1000
    played = np.concatenate((reply[:cut], np.zeros(STALL_MS * OUTPUT_RATE_HZ // 1000,
                                                    dtype=np.float32), reply[cut:]))
    mic = room_microphone(room, played=played)

    def stalled_position(mic_ms: float, rng: np.random.Generator) -> int | None:
        elapsed = mic_ms - LEAD_MS
        if elapsed > stall_at_ms:
            elapsed = max(stall_at_ms, elapsed - STALL_MS)
        return playing_position(elapsed + LEAD_MS, rng)

    assert turn_starts(mic, position_at=stalled_position,
                       playing_ms=reply_ms() + STALL_MS) == []


STOP_AT_MS = (900, 2300)
"""Reply positions (ms) at which the person stops the reply in `test_the_echo_after_a_stop_...`."""


@pytest.mark.parametrize("stop_at_ms", STOP_AT_MS)
@pytest.mark.parametrize("room", [Room(-20.0, 400, -60.0, rt60_ms=400.0),
                                  Room(-30.0, 250, -50.0)], ids=Room.describe)
def test_the_echo_after_a_stop_never_starts_a_turn(stop_at_ms: int, room: Room) -> None:
    """Issue 13's kind: the reply is stopped (Stop, a barge-in) in the middle, and the
    microphone still hears its last words for the echo's lag (up to 400 ms, the longest a
    loudspeaker and a browser give) and the room's tail after the loudspeaker fell silent; the
    session's playing position stays at the stop, given for `ECHO_TAIL_MS` more. No turn."""
    mic = room_microphone(room, played=reply_24k()[:stop_at_ms * OUTPUT_RATE_HZ // 1000])

    def stopped_position(mic_ms: float, rng: np.random.Generator) -> int | None:
        elapsed = mic_ms - LEAD_MS
        if not 0.0 <= elapsed <= stop_at_ms + ECHO_TAIL_MS:
            return None
        return int(min(max(elapsed + rng.uniform(-20.0, 20.0), 0.0), stop_at_ms))

    assert turn_starts(mic, position_at=stopped_position, playing_ms=stop_at_ms) == []
    assert turn_starts(mic, with_reference=False, playing_ms=stop_at_ms), "Silero alone: a turn"


# --- paced playback: synthesis falling behind, any ACK interval ----------------------------


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
                   person_at_ms: float = 0.0, late_ms: int = 0) -> list[SpeechStarted]:
    """The server VAD's turns over `MOON` played through `room` by a client the server paces.

    The server's own pacing and estimate run (`ResponseState`, the session's defaults: 400 ms
    lead, 100 ms jitter buffer, 100 ms frames) as Piper's chunks become ready
    (`SYNTHESIZED_AT_MS`). The client plays like the page (from 100 ms queued on, then whatever
    it has: silent when it runs dry, on as soon as more comes) and ACKs its position every
    `ack_every_ms` when it moved (None: never). Its microphone hears the loudspeaker through
    `room` plus `person` (24 kHz) at `person_at_ms` (ms after the request) and is appended
    every 40 ms; one in `1 / STALL_CHANCE` appends is held up to `late_ms` (uniformly, seeded)
    and those after it wait behind it (a stalled event loop, the network). Each append is
    tagged with the position the server estimated when it arrived less its lateness, as
    `ReplyPlayback.position_ms` does (for `ECHO_TAIL_MS` after the reply played out); the
    clock ticks every 10 ms.
    """
    tts = fx.synthesizer("piper")
    chunks = [resample(chunk.pcm, tts.sample_rate_hz, OUTPUT_RATE_HZ)
              for chunk in tts.synthesize(MOON)]
    total = sum(chunk.size for chunk in chunks)
    tick, config = OUTPUT_RATE_HZ // 100, SessionConfig()
    response, recorded = ResponseState("resp", "item", 0), EchoReference(OUTPUT_RATE_HZ)
    received = np.zeros(0, dtype=np.float32)
    speaker = np.zeros(total + OUTPUT_RATE_HZ * 8, dtype=np.float32)
    queued = played = 0
    ended_ms: float | None = None
    rng, arrival = np.random.default_rng(3), ArrivalLateness()
    ends_ms = np.arange(APPEND_MS, speaker.size * 1000 // OUTPUT_RATE_HZ + 1, APPEND_MS)
    stalls_ms = rng.integers(0, late_ms // 10 + 1, ends_ms.size) * 10
    arrivals_ms = np.maximum.accumulate(
        ends_ms + np.where(rng.random(ends_ms.size) < STALL_CHANCE, stalls_ms, 0))
    positions: list[int | None] = []
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
            received = np.concatenate((received, audio))
            recorded.append(audio)
        if played or received.size >= OUTPUT_RATE_HZ * config.jitter_ms // 1000:
            audio = received[played:played + tick]
            speaker[k * tick:k * tick + audio.size] = audio
            played += audio.size
            if played == total and ended_ms is None:
                ended_ms = now_ms
        played_ms = played * 1000 // OUTPUT_RATE_HZ
        if (ack_every_ms is not None and k % (ack_every_ms // 10) == 0
                and response.first_send_ms is not None and played_ms != response.cursor.played_ms):
            response.cursor.acknowledge(played_ms)
            response.acknowledged(now_ms)
        while len(positions) < ends_ms.size and arrivals_ms[len(positions)] <= now_ms:
            late = arrival.late_ms(now_ms, ends_ms[len(positions)])
            positions.append(None if response.first_send_ms is None
                             or (ended_ms is not None and now_ms > ended_ms + ECHO_TAIL_MS)
                             else response.estimated_played_ms(now_ms - late, config.jitter_ms))
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


@pytest.mark.parametrize("lag_ms", [300, 400])
@pytest.mark.parametrize("ack_every_ms", [None, 40, 120, 500])
def test_the_tester_s_echo_never_starts_a_turn(ack_every_ms: int | None, lag_ms: int) -> None:
    """The tester's room: `MOON` at -6 dB (gain 0.5), 300-400 ms late, over a -60 dBFS floor
    (their Gaussian sigma 30 in PCM16 is -61 dBFS), synthesis falling 480 ms behind. With ACKs
    every 120 ms the echo started a turn in 7 of 22 protocol runs ("pulls the seat."): the
    estimate ran on from the last ACK while the client waited for audio, and the echo detector
    mapped the microphone to the reply by one offset, which the stall breaks. Offline before
    the fix, 4 of these 8 started one (300 ms at every ACK interval, 400 ms with ACKs every
    500 ms; the protocol's timing varies from run to run, this simulation's does not)."""
    assert paced_playback(Room(-6.0, lag_ms, -60.0), ack_every_ms) == []


PACED_ROOMS = [Room(gain, lag, noise) for gain in (-40.0, -20.0, -6.0, 0.0)
               for lag in (0, 300, 500) for noise in (-60.0, None)]


@pytest.mark.parametrize(("ack_every_ms", "late_ms"), [(120, 0), (500, 0), (120, 500)])
def test_a_paced_echo_never_starts_a_turn_at_any_ack_interval(ack_every_ms: int,
                                                              late_ms: int) -> None:
    """The kind: the echo at -40..0 dB, 0-500 ms late, over a -60 dBFS floor or none, the
    client ACKing every 120 or 500 ms, synthesis falling behind, and appends held up to 500 ms
    by stalls: no room starts a turn. Before the fix 18 of these 24 rooms did at each interval
    without stalls; the whole grid (benchmarks/README.md "Echo benchmark") went from 125 of
    200 rooms to none."""
    started = {room.describe(): turns for room in PACED_ROOMS
               if (turns := paced_playback(room, ack_every_ms, late_ms=late_ms))}
    assert started == {}


@pytest.mark.parametrize("text", [person[0] for person in PEOPLE])
@pytest.mark.parametrize("room", [Room(-6.0, 400, -60.0), Room(0.0, 500, None)],
                         ids=Room.describe)
def test_a_person_over_a_paced_loud_echo_starts_a_turn(text: str, room: Room) -> None:
    """A person (`PEOPLE`'s sentences and voices) at -6 dBFS peak speaking 2.5 s into the paced
    reply (ACKs every 500 ms, appends held up to 500 ms by stalls) over its echo at -6 or
    0 dB: one turn, from 350 ms before their voice to 1.5 s after it. Measured over these
    rooms, ACKs every 120 and 500 ms, three times each (espeak-ng's audio differs by a few
    samples from call to call), and with stalls of up to 100-500 ms: always one turn, 277 ms
    before to 1099 ms after the voice (the late ones: "Wait, stop" and "Hold on", whose start
    the echo gate holds back; 969 ms before the fix too); before the fix the 0 dB echo started
    its own turn 0.5-0.95 s before the person."""
    _, engine, voice, _ = next(person for person in PEOPLE if person[0] == text)
    person = resample(fx.at_peak_dbfs(fx.speech(text, engine, voice), -6.0), fx.RATE_HZ,
                      OUTPUT_RATE_HZ)
    onset_ms = 2500 + fx.active_span_ms(person)[0]
    started = paced_playback(room, 500, person, 2500, late_ms=500)
    assert len(started) == 1
    assert onset_ms - 350 <= started[0].audio_start_ms <= onset_ms + 1500


# --- the playing position the session estimates --------------------------------------------


def test_the_session_maps_appends_to_the_playing_position() -> None:
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100))
    session.receive(json.dumps({"type": "session.update", "session": {"audio": {"input": {
        "turn_detection": {"type": "server_vad"}}}}}))
    session.receive(json.dumps({"type": "response.create"}))
    response_id = session.current_response_id
    assert response_id is not None
    session.generation.on_text(response_id, "Hello there.")
    session.generation.on_speech(response_id, 12, b"\x00\x00" * 24 * 3000, [])
    session.generation.on_done(response_id)
    session.take_effects()

    heard = [0.0]  # ms of microphone audio appended

    def append_at(clock_ms: float, late_ms: float = 0.0) -> tuple[str | None, int | None]:
        """Append the microphone up to `clock_ms` less `late_ms` (a continuous stream)."""
        session.set_clock(clock_ms)
        samples = max(round((clock_ms - late_ms - heard[0]) * 24), 2)
        heard[0] += samples / 24
        session.receive(json.dumps({"type": "input_audio_buffer.append", "audio": (
            base64.b64encode(b"\x00\x00" * samples).decode())}))
        effect = session.take_effects()[-1]
        return effect.response_id, effect.playback_ms  # type: ignore[union-attr]

    assert append_at(0.0) == (None, None)  # nothing sent yet
    session.pull_outbound(1000.0)
    assert append_at(1050.0) == (response_id, 0)  # the jitter buffer is filling
    assert append_at(1300.0) == (response_id, 200)
    session.set_clock(1400.0)
    session.receive(json.dumps({"type": "playback.ack", "response_id": response_id,
                                "played_ms": 250}))
    assert append_at(1460.0) == (response_id, 310)
    # Audio that arrives 150 ms later than the stream so far: what played when it was captured.
    assert append_at(1700.0, late_ms=150.0) == (response_id, 400)
    assert append_at(5000.0) == (response_id, 500)  # at most what was sent
    session.pull_outbound(5000.0)
    session.set_clock(6000.0)
    session.receive(json.dumps({"type": "playback.ack", "response_id": response_id,
                                "played_ms": 3000}))
    assert append_at(6000.0 + ECHO_TAIL_MS) == (response_id, 3000)  # the echo tail
    assert append_at(6001.0 + ECHO_TAIL_MS) == (None, None)
