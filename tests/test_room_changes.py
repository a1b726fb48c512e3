"""The room changes, the person is still told from it (issue 24): after loud babble stops the
person is heard at once, and a room lifted by the page's auto gain is still the room.

The scenes are `tests.test_rooms`'s (babble and a TV talker of `tests.room_sounds` over a
-70 dBFS RMS pink floor, the person Piper at -20 dBFS RMS), through a real server on loopback
with server VAD and the real transcriber, appended faster than real time (nothing plays, so
nothing depends on the clock).
"""

from __future__ import annotations

import asyncio
import base64

import numpy as np
import pytest

from benchmarks.bench_interruptions import turn_starts
from server.listening.turn_events import SpeechStarted, SpeechStopped
from tests import room_sounds as rs
from tests import speech_fixtures as fx
from tests.echo_microphone import LEAD_MS, room_microphone
from tests.echo_room import Room, words
from tests.realtime_client import RealtimeClient
from tests.test_rooms import (
    EARLIEST_START_MS,
    FLOOR_DBFS,
    INPUT_RATE_HZ,
    mic_pcm16,
    person,
    room,
    server_vad_events,
    starts,
    with_person,
)
from tests.test_server_vad import SERVER_VAD

APPEND_MS = 40
SPEED = 4.0
"""Appends go this many times faster than real time."""

LOUD_BABBLE_DBFS = -25.0
MAX_TURN_MS = 4000


async def turns_over_the_protocol(start_server, mic_16k: np.ndarray, turns: int,
                                  **server: object) -> RealtimeClient:
    """Stream `mic_16k` (16 kHz) to a fresh server with server VAD (responses off) and wait
    for `turns` committed turns' transcripts (or 60 s); the client, closed, with every event."""
    started = await start_server(tts="uniform", calibration="marks", **server)
    pcm16 = mic_pcm16(mic_16k)
    frame = INPUT_RATE_HZ * 2 * APPEND_MS // 1000
    async with RealtimeClient.connect(started.ws_url) as client:
        await client.send({"type": "session.update", "session": {"audio": {"input": {
            "turn_detection": {**SERVER_VAD, "create_response": False}}}}})
        await client.wait_for("session.updated")
        for start in range(0, len(pcm16), frame):
            await client.send({"type": "input_audio_buffer.append",
                               "audio": base64.b64encode(pcm16[start:start + frame]).decode()})
            await asyncio.sleep(APPEND_MS / 1000 / SPEED)
            await client.drain(0.0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while (len(client.of_type("conversation.item.input_audio_transcription.completed"))
               < turns and loop.time() < deadline):
            await client.drain(0.1)
    return client


@pytest.mark.parametrize("gap_ms", [1000, 3000, 8000])
async def test_the_person_is_heard_at_once_after_loud_babble_stops(
        start_server, gap_ms: int) -> None:
    """The issue's example: babble at -25 dBFS RMS after a second of quiet room holds a turn
    until `max_turn_ms` (4 s here), then is the room; it stops, and the person's question at
    -20 dBFS RMS `gap_ms` later is a turn of its own, transcribed. (Before, the room's loud
    levels were remembered for 10 s and the question started no turn at 3 s or 8 s.)"""
    quiet = rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(7), 1000), FLOOR_DBFS)
    babble = room("babble", LOUD_BABBLE_DBFS, 6000, seed=4)
    after = rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(8), gap_ms + 4000), FLOOR_DBFS)
    voice = person()
    mic = np.concatenate((quiet, babble, with_person(after, voice, gap_ms)))
    onset_ms = 7000 + gap_ms + fx.active_span_ms(voice)[0]
    client = await turns_over_the_protocol(start_server, mic, 2, max_turn_ms=MAX_TURN_MS)
    started = [e["audio_start_ms"] for e in client.of_type("input_audio_buffer.speech_started")]
    stopped = client.of_type("input_audio_buffer.speech_stopped")
    assert len(started) == 2 and len(stopped) == 2, (started, stopped)
    assert onset_ms - EARLIEST_START_MS <= started[1] <= onset_ms, (started, onset_ms)
    transcripts = client.of_type("conversation.item.input_audio_transcription.completed")
    assert "second step" in transcripts[-1]["transcript"].lower(), transcripts


@pytest.mark.parametrize("dbfs", [-45.0, -55.0])
@pytest.mark.parametrize("kind", ["babble", "tv"])
def test_the_room_lifted_by_the_page_s_auto_gain_never_starts_a_turn(kind: str, dbfs: float
                                                                      ) -> None:
    """The issue's kind: babble or a TV from the session's first sample, lifted by the gain
    Chromium's auto gain applies (`tests.room_sounds.CHROMIUM_AGC_DB`: +10 dB at once, +22 dB
    after 4.6 s), and rising a quarter faster (+25 dB after 4.6 s): no turn in 15 s, three
    seeds. (Before, the room's first words were a turn: +10 dB lifted them over the person's
    level rule with no background heard yet, and the rising gain lifted later words 12 dB
    over the background learned at a lower gain.)"""
    for rise in (1.0, 1.25):
        for seed in (0, 1, 2):
            events = server_vad_events(rs.with_agc(room(kind, dbfs, 15_000, seed), rise))
            assert starts(events) == [], (rise, seed, events)


@pytest.mark.parametrize("kind", ["babble", "tv"])
def test_the_person_over_the_auto_gained_room_is_heard_at_once(kind: str) -> None:
    """The person at -20 dBFS RMS 2 s and 6 s into a room at -45 dBFS RMS, everything lifted
    by `tests.room_sounds.CHROMIUM_AGC_DB`: one turn each, from their voice."""
    voice = person()
    for at_ms in (2000, 6000):
        onset_ms = at_ms + fx.active_span_ms(voice)[0]
        mic = rs.with_agc(with_person(room(kind, -45.0, at_ms + 5000), voice, at_ms))
        events = server_vad_events(mic)
        assert len(starts(events)) == 1, (at_ms, events)
        assert onset_ms - EARLIEST_START_MS <= starts(events)[0] <= onset_ms, (at_ms, events)


@pytest.mark.parametrize("echo_db", [None, -30.0])
@pytest.mark.parametrize("kind", ["babble", "tv"])
def test_a_room_heard_only_while_a_reply_plays_is_the_room(kind: str, echo_db: float | None
                                                           ) -> None:
    """The microphone switched on as a reply starts (a typed prompt's reply, the page's
    microphone enabled during it), the room louder than the issue's -45 dBFS (-35 dBFS RMS),
    with no echo and a -30 dB one: no turn while the reply plays (8 s), two seeds; and the
    person at -20 dBFS RMS 5 s in, over the room at -40 dBFS RMS, is heard from their voice
    (at -35, babble masks the soft "H" of "Hold on": the turn started up to 385 ms after it,
    depending on the babble's passages). Before, the windows of a reply
    playing were never learned as the room: only the person's level rule stood between the
    room and a turn, and these rooms started 1 to 4 turns each."""
    for seed in (0, 1):
        assert turn_starts(reply_in_a_room(kind, echo_db, -35.0, seed), LEAD_MS) == [], seed
    voice = person()
    at_ms = LEAD_MS + 5000
    onset_ms = at_ms + fx.active_span_ms(voice)[0]
    started = turn_starts(reply_in_a_room(kind, echo_db, -40.0, 0, voice, at_ms), LEAD_MS)
    assert len(started) == 1 and onset_ms - EARLIEST_START_MS <= started[0] <= onset_ms, started


def reply_in_a_room(kind: str, echo_db: float | None, dbfs: float, seed: int,
                    voice: np.ndarray | None = None, at_ms: float = 0.0) -> np.ndarray:
    """16 kHz microphone: the reply playing from `LEAD_MS` (`room_microphone`, its echo
    `echo_db`, None: none, over a -60 dBFS pink floor) in babble or a TV (`kind`) at `dbfs`
    RMS (`seed`), with `voice` at `at_ms`."""
    mic = room_microphone(Room(echo_db, 150, -60.0), voice, at_ms)
    mic += room(kind, dbfs, mic.size * 1000 / fx.RATE_HZ + 100, seed)[:mic.size]
    return mic


@pytest.mark.parametrize("gap_ms", [1200, 1700])
@pytest.mark.parametrize("playing", [False, True], ids=["no reply", "over a reply"])
def test_a_persons_own_short_sound_is_never_learned_as_the_room(playing: bool, gap_ms: int
                                                                 ) -> None:
    """Piper "Uh." then "Stop." `gap_ms` later, -6 dBFS peak, with no reply and over one (no
    echo): "Stop." starts a turn at its voice. Before, "Uh." (too short for a turn with a
    250 ms minimum speech) was learned as the room a second later, "Stop." 1.2 s after it stood
    less than `ABOVE_DB` above the room's last second, and no turn started; over a reply the
    same once its windows were learned as the room. With the 120 ms minimum "Uh." may be a
    turn of its own, at its voice, before it."""
    mic, onset_ms = uh_then_stop(playing, gap_ms)
    started = turn_starts(mic, LEAD_MS) if playing else starts(server_vad_events(mic))
    assert [onset_ms - EARLIEST_START_MS <= start <= onset_ms for start in started][-1:] == [
        True], started
    assert all(UH_MS - EARLIEST_START_MS <= start < UH_MS + 1000
               for start in started[:-1]), started


UH_MS = 3500
"""Where `uh_then_stop`'s "Uh." starts (ms)."""


def uh_then_stop(playing: bool, gap_ms: int) -> tuple[np.ndarray, float]:
    """16 kHz microphone: Piper "Uh." `UH_MS` in, "Stop." `gap_ms` later, -6 dBFS peak, over a
    reply playing from `LEAD_MS` with no echo (`playing`) or over the room's pink floor; and
    the voice onset (ms) of "Stop."."""
    uh, stop = (fx.at_peak_dbfs(fx.speech(text), -6.0) for text in ("Uh.", "Stop."))
    uh_ms = UH_MS
    stop_ms = uh_ms + gap_ms
    if playing:
        mic = room_microphone(Room(None, 150, -60.0), uh, uh_ms)
    else:
        mic = rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(3), stop_ms + 1500),
                             FLOOR_DBFS)
        mic[uh_ms * fx.RATE_HZ // 1000:][:uh.size] += uh
    mic[stop_ms * fx.RATE_HZ // 1000:][:stop.size] += stop
    return mic, stop_ms + fx.active_span_ms(stop)[0]


SENTENCE = "Can you repeat that?"


def sound_then_sentence(sound: np.ndarray, gap_ms: int, at_ms: int = 12_000
                        ) -> tuple[np.ndarray, float, float, float]:
    """`sound` ending `gap_ms` before Piper saying `SENTENCE` (-10 dBFS peak) `at_ms` into a
    session, over a -60 dBFS pink floor (16 kHz, 3 s after the sentence starts): the
    microphone, where the sound began, and the sentence's voice onset and end (ms)."""
    sentence = fx.at_peak_dbfs(fx.speech(SENTENCE), -10.0)
    onset_ms, end_ms = (at_ms + edge for edge in fx.active_span_ms(sentence))
    mic = fx.with_noise_floor(np.zeros((at_ms + 3000) * fx.RATE_HZ // 1000, np.float32),
                              np.random.default_rng(1), -60.0)
    sound_ms = at_ms - gap_ms - fx.active_span_ms(sound)[1]
    mic[round(sound_ms * fx.RATE_HZ / 1000):][:sound.size] += sound
    mic[at_ms * fx.RATE_HZ // 1000:][:sentence.size] += sentence
    return mic, sound_ms, onset_ms, end_ms


def short_sound(before: str) -> np.ndarray:
    """Piper saying `before` at -10 dBFS peak, or the `tests.room_sounds.TRANSIENTS` sound
    named `before` at -10 dBFS peak (16 kHz)."""
    if before in rs.TRANSIENTS:
        return rs.TRANSIENTS[before](np.random.default_rng(3), -10.0)
    return fx.at_peak_dbfs(fx.speech(before), -10.0)


def short_sound_then_sentence(before: str, gap_ms: int) -> tuple[list[tuple[int, int]], float,
                                                                 float, float]:
    """Server VAD over `short_sound(before)` before the sentence (`sound_then_sentence`): the
    turns (start, stop ms), where the sound began, and the sentence's voice onset and end
    (ms)."""
    mic, sound_ms, onset_ms, end_ms = sound_then_sentence(short_sound(before), gap_ms)
    events = server_vad_events(mic)
    started = [e.audio_start_ms for e in events if isinstance(e, SpeechStarted)]
    stopped = [e.audio_end_ms for e in events if isinstance(e, SpeechStopped)]
    return list(zip(started, stopped, strict=True)), sound_ms, onset_ms, end_ms


@pytest.mark.parametrize("before", ["Um,", "mm"])
@pytest.mark.parametrize("gap_ms", [250, 500, 900])
def test_the_persons_own_sound_before_a_sentence_never_hides_it(before: str, gap_ms: int
                                                                 ) -> None:
    """Piper "Um," or "mm" before a sentence (`short_sound_then_sentence`): one turn, from
    the sentence's voice (or the sound: an "Um," may be its first word) to its end (a long
    enough "mm" is a turn of its own before it). Before, the sound (too short for a turn) was
    learned as the room's last second, the sentence stood less than `ABOVE_DB` above it, and
    was no turn or a turn cut after its first word (a tester's runs)."""
    turns, sound_ms, onset_ms, end_ms = short_sound_then_sentence(before, gap_ms)
    over = [(start, stop) for start, stop in turns if stop >= onset_ms]
    assert len(over) == 1, turns
    assert sound_ms - EARLIEST_START_MS <= over[0][0] <= onset_ms <= end_ms - 300 <= over[0][1]


@pytest.mark.parametrize("kind", sorted(rs.TRANSIENTS))
def test_a_transient_before_a_sentence_leaves_it_one_turn(kind: str) -> None:
    """A short loud non-speech sound (`tests.room_sounds.TRANSIENTS`: a cough, a clap, three
    knocks, a dropped cup; -10 dBFS peak) ending 0.3-1.2 s before a sentence
    (`short_sound_then_sentence`): the sentence is one turn, from its voice to its end. Before,
    the sound was the room's loud levels of the last second (a 180 ms cough is 7 of its 31
    windows): a turn's windows stood less than `CONTINUE_DB` over them at the sentence's
    first pause, and it became two turns (the cough, the knocks and the cup at every
    position; `server.listening.transients` now keeps such sounds out of the room)."""
    split = {}
    for gap_ms in (300, 600, 900, 1200):
        turns, _, onset_ms, end_ms = short_sound_then_sentence(kind, gap_ms)
        over = [(start, stop) for start, stop in turns if stop >= onset_ms]
        if not (len(over) == 1 and onset_ms - EARLIEST_START_MS <= over[0][0] <= onset_ms
                and over[0][1] >= end_ms - 300):
            split[gap_ms] = turns
    assert split == {}


@pytest.mark.parametrize("kind", sorted(rs.TRANSIENTS))
async def test_the_sentence_after_a_transient_is_transcribed_whole(start_server, kind: str
                                                                   ) -> None:
    """Over the protocol (a real server, the real transcriber): a `tests.room_sounds.TRANSIENTS`
    sound at -6 dBFS peak 600 ms before the sentence, 4 s into the session: one turn, whose
    transcript is the whole sentence. Before, the turn ended at the sentence's first pause:
    two transcripts, "Can you" answerable on its own."""
    sound = rs.TRANSIENTS[kind](np.random.default_rng(5), -6.0)
    mic, _, _, _ = sound_then_sentence(sound, 600, at_ms=4000)
    client = await turns_over_the_protocol(start_server, mic, 1)
    transcripts = [e["transcript"] for e in client.of_type(
        "conversation.item.input_audio_transcription.completed")]
    assert len(client.of_type("input_audio_buffer.speech_started")) == 1, transcripts
    assert [words(text) for text in transcripts] == [words(SENTENCE)], transcripts
