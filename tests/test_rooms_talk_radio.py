"""The person over one talker in the room (issue 24): talk radio, a TV talker. The talker alone
starts no turn; a person clearly above it (10 dB or more, RMS) is heard, a short word as well
as a sentence whose first words the room gate rejects.

Issue 24's tester found a person at -20 dBFS RMS over an espeak-ng talk radio at -32 dBFS RMS
(en-us+m3 and piano chords in the 300-3400 Hz band) never heard, with or without a reply, and
at -26 dBFS RMS over that radio at -40 dBFS RMS: the short word stood only 3.5 dB above the
radio's loudest window (less than `room_background.LOUDER_DB`, 7 dB: `LEARNED_LOUDER_DB` now
asks 3 in a learned room), the sentence's first words, rejected, became the room that the
rest of it was judged against. The two examples are kept (en-us+m3 talker); the other
talkers, persons and levels were not measured on.
"""

from __future__ import annotations

import numpy as np
import pytest

from server.speech.resampling import resample
from tests import echo_microphone
from tests import room_sounds as rs
from tests import speech_fixtures as fx
from tests import test_rooms as rooms
from tests.echo_microphone import LEAD_MS, room_microphone, turn_starts
from tests.echo_room import RATE_HZ, Room, RoomPage
from tests.realtime_client import RealtimeClient

PASSAGE = ("You are listening to the afternoon show. Coming up after the break, the weather for "
           "the weekend, and a call from a listener who grew the biggest pumpkin in the county. "
           "But first, the traffic: the bridge is closed until six, so take the long way round.")
PHONE_BAND_HZ = (300.0, 3400.0)
FIRST_WORD_MS = 650
"""How late after the person's voice their turn may start (their first word is 300-600 ms)."""


BED_DB = -6.0
"""A talk radio's music bed under its talker (`tests.room_sounds.instrumental`), dB RMS: the
tester's radio had piano chords at half the talker's RMS amplitude."""


def talker_room(engine: str, voice: str | None, dbfs: float, duration_ms: float,
                phone: bool) -> np.ndarray:
    """16 kHz: one talker reading `PASSAGE` on a loop (no pause but its own), at RMS `dbfs`;
    when `phone` (talk radio) over a music bed (`BED_DB`) and band-limited to
    `PHONE_BAND_HZ`; over the -70 dBFS RMS pink floor of `tests.test_rooms`."""
    passage = fx.speech(PASSAGE, engine, voice)
    samples = round(duration_ms * fx.RATE_HZ / 1000)
    talk = rs.at_rms_dbfs(np.tile(passage, -(-samples // passage.size))[:samples], 0.0
                          ).astype(np.float64)
    if phone:
        talk += rs.instrumental(duration_ms)[:samples] * 10.0 ** (BED_DB / 20.0)
        spectrum = np.fft.rfft(talk)
        freqs = np.fft.rfftfreq(talk.size, 1.0 / fx.RATE_HZ)
        spectrum[(freqs < PHONE_BAND_HZ[0]) | (freqs > PHONE_BAND_HZ[1])] = 0.0
        talk = np.fft.irfft(spectrum, talk.size)
    floor = rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(7), duration_ms),
                           rooms.FLOOR_DBFS)
    return (rs.at_rms_dbfs(talk.astype(np.float32), dbfs) + floor[:samples]).astype(np.float32)


TALKERS_ALONE = [("espeak", "en-us+m3", True, -30.0), ("piper", None, True, -36.0),
                 ("espeak", "en-029", True, -42.0), ("espeak", "en-us+f3", False, -30.0),
                 ("espeak", "en-gb-x-rp", False, -42.0)]


@pytest.mark.parametrize(("engine", "voice", "phone", "dbfs"), TALKERS_ALONE)
def test_a_talker_alone_never_starts_a_turn(engine: str, voice: str | None, phone: bool,
                                            dbfs: float) -> None:
    """One talker from the session's first sample, nobody speaking, 16 s: no turn."""
    mic = talker_room(engine, voice, dbfs, 16_000, phone)
    assert rooms.starts(rooms.server_vad_events(mic)) == []


PEOPLE_OVER_A_TALKER = [
    ("espeak", "en-us+m3", -32.0, "Wait.", "piper", None, -20.0),
    ("espeak", "en-us+m3", -40.0, "Excuse me, can you stop for a second?", "piper", None, -26.0),
    ("piper", None, -36.0, "Stop, please.", "espeak", "en-us+f2", -22.0),
    ("espeak", "en-029", -42.0, "Sorry, I have one question.", "espeak", "en-gb-x-rp", -26.0),
    ("espeak", "en-us+f3", -30.0, "No, stop, that is wrong.", "piper", None, -18.0),
    ("espeak", "en-gb-x-rp", -36.0, "Stop.", "espeak", "en-us+m7", -16.0),
]
"""(talker engine, voice, RMS dBFS on the phone band; the person's text, engine, voice, RMS
dBFS): the person 10-16 dB over the talker, RMS. The first two are the tester's examples."""


@pytest.mark.parametrize(("engine", "voice", "room_dbfs", "text", "person_engine",
                          "person_voice", "person_dbfs"), PEOPLE_OVER_A_TALKER)
def test_the_person_clearly_above_a_talker_is_one_turn_from_their_first_word(
        engine: str, voice: str | None, room_dbfs: float, text: str, person_engine: str,
        person_voice: str | None, person_dbfs: float) -> None:
    """The talker (talk radio) from the first sample, the person 6 s in: one turn, starting
    at most `EARLIEST_START_MS` before their voice and within their first word. Before, the
    tester's sentence (the second) was never heard: no turn."""
    at_ms = 6000
    person = rs.at_rms_dbfs(fx.speech(text, person_engine, person_voice), person_dbfs)
    mic = talker_room(engine, voice, room_dbfs, 11_000, True)
    first = at_ms * fx.RATE_HZ // 1000
    mic[first:first + person.size] += person
    onset_ms = at_ms + fx.active_span_ms(person)[0]
    started = rooms.starts(rooms.server_vad_events(mic))
    assert [onset_ms - rooms.EARLIEST_START_MS <= start <= onset_ms + FIRST_WORD_MS
            for start in started] == [True], (started, onset_ms)


async def test_the_person_over_talk_radio_cuts_the_reply_over_the_protocol(start_server
                                                                            ) -> None:
    """A real server: an espeak-ng en-us+m3 talk radio at -36 dBFS RMS from the first sample
    while the assistant answers; Piper "Wait, stop, I have a question." at -20 dBFS RMS 6 s
    in is the one turn, it cuts the reply, and its transcript holds the person's words. (At
    -32 dBFS RMS the radio's first second is a turn: a cold room, `COLD_NEAR_DB`.)"""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    at_ms = 6000
    person = rs.at_rms_dbfs(fx.speech("Wait, stop, I have a question."), -20.0)
    room = talker_room("espeak", "en-us+m3", -36.0, 10_000, True)
    first = at_ms * fx.RATE_HZ // 1000
    room[first:first + person.size] += person
    onset_ms = at_ms + fx.active_span_ms(person)[0]
    client, transcript, page = await rooms.person_over_the_reply(server, rooms.mic_pcm16(room))
    started = client.of_type("input_audio_buffer.speech_started")
    assert [onset_ms - rooms.EARLIEST_START_MS <= e["audio_start_ms"] <= onset_ms + FIRST_WORD_MS
            for e in started] == [True], (started, onset_ms)
    assert "question" in transcript["transcript"].lower(), transcript["transcript"]
    assert page.stopped_at_ms is not None and page.stopped_at_ms >= at_ms - 1000


ECHO_ROOM = Room(-14.0, 100, -60.0)
"""The tester's loudspeaker: the reply's echo at -14 dB, 100 ms late, over a -60 dBFS floor."""

PEOPLE_OVER_A_TALKER_AND_THE_ECHO = [
    ("espeak", "en-us+m3", -32.0, "Wait.", "piper", None, -22.0, 4300),
    ("espeak", "en-gb-scotland", -32.0, "Wait.", "piper", None, -22.0, 5100),
    ("espeak", "en-us+f3", -32.0, "No, wait.", "piper", None, -22.0, 5000),
]
"""(talker engine, voice, RMS dBFS on the phone band; the person's text, engine, voice, RMS
dBFS; ms into the reply): the person 10 dB over the talker, RMS, under `ECHO_ROOM`'s echo of
the reply (`tests.echo_microphone`'s, from `LEAD_MS` into the microphone). Each was missed
before (the room heard under the echo was never learned; in a learned room its loudest
window was lifted by the largest band rise of its last second, up to 9 dB in a band the
talker barely fills)."""


@pytest.mark.parametrize(("engine", "voice", "room_dbfs", "text", "person_engine",
                          "person_voice", "person_dbfs", "at_ms"),
                         PEOPLE_OVER_A_TALKER_AND_THE_ECHO)
def test_the_person_over_a_talker_is_heard_over_the_replys_echo(
        engine: str, voice: str | None, room_dbfs: float, text: str, person_engine: str,
        person_voice: str | None, person_dbfs: float, at_ms: int) -> None:
    """Offline through the server's VAD, the talk radio from the first sample and the reply's
    echo from `LEAD_MS`: the person is one turn from their first word; the talker and the
    echo alone start none."""
    person = rs.at_rms_dbfs(fx.speech(text, person_engine, person_voice), person_dbfs)
    mic = room_microphone(ECHO_ROOM, person, LEAD_MS + at_ms)
    alone = room_microphone(ECHO_ROOM)
    talker = talker_room(engine, voice, room_dbfs, mic.size * 1000 / fx.RATE_HZ + 10, True)
    onset_ms = LEAD_MS + at_ms + fx.active_span_ms(person)[0]
    started = [e.audio_start_ms for e in turn_starts(mic + talker[:mic.size])]
    assert [onset_ms - rooms.EARLIEST_START_MS <= start <= onset_ms + FIRST_WORD_MS
            for start in started] == [True], (started, onset_ms)
    assert turn_starts(alone + talker[:alone.size]) == []
TALK_REPLY = ("say: Tomatoes need at least six hours of direct sun every day, and they grow best "
              "in deep, loose soil that drains well. Water them at the base in the early "
              "morning, never on the leaves, and add a thick layer of straw around each plant.")


async def test_the_person_over_talk_radio_is_heard_over_the_replys_echo(start_server) -> None:
    """A real server, a Piper reply heard through the tester's loudspeaker (`ECHO_ROOM`) and
    an espeak-ng en-us+m3 talk radio at -40 dBFS RMS from the first sample: Piper "Wait." at
    -22 dBFS RMS 6.1 s into the reply is the one turn and cuts the reply. The room is heard
    mostly under the echo: before, the windows the echo ruled were never learned and the room
    stayed young (issue 24's tester: missed 2 of 4 runs)."""
    server = await start_server(tts="piper", calibration="marks")
    radio = talker_room("espeak", "en-us+m3", -40.0, 25_000, True)
    person = rs.at_rms_dbfs(fx.speech("Wait."), -22.0)
    async with RealtimeClient.connect(server.ws_url) as client:
        result = await RoomPage(client, ECHO_ROOM, resample(person, fx.RATE_HZ, RATE_HZ),
                                6100.0, sound=resample(radio, fx.RATE_HZ, RATE_HZ)
                                ).run(TALK_REPLY)
    onset_ms = result.person_onset_ms
    assert onset_ms is not None
    assert [onset_ms - rooms.EARLIEST_START_MS <= start <= onset_ms + FIRST_WORD_MS
            for start in result.speech_started] == [True], (result.speech_started, onset_ms)
    assert result.interrupted_at_ms is not None


REPLY_PAUSED_OVER_THE_RADIO = [(163, 200), (180, 320)]
"""(ms into the microphone the reply starts, ms after the person's voice the page stops
playing it): the real server's timing in the test above, where it failed 5 of 13 runs (the
reply 163-167 ms in): the radio's next sentence 1.1 s after the reply paused was a second turn
(7.76 s)."""


@pytest.mark.parametrize(("lead_ms", "paused_after_ms"), REPLY_PAUSED_OVER_THE_RADIO)
def test_the_talk_radio_after_the_person_paused_the_reply_is_no_turn(
        monkeypatch: pytest.MonkeyPatch, lead_ms: int, paused_after_ms: int) -> None:
    """Offline through the server's VAD, as the real server is fed: an espeak-ng en-us+m3
    talk radio at -40 dBFS RMS from the first sample, `TALK_REPLY` playing from `lead_ms`
    through `ECHO_ROOM` until Piper "Wait." at -22 dBFS RMS 6.1 s into it pauses it (the
    playing position held from then on): one turn, the person's. The room was heard only
    under the echo, so none was learned; the radio's windows after the echo stopped are
    learned only once `SETTLE_MS` old, and before, a candidate was judged with no room at all
    (`RoomBackground._room_heard` now counts them as the room they will be)."""
    monkeypatch.setattr(echo_microphone, "LEAD_MS", lead_ms)
    text = TALK_REPLY.removeprefix("say: ")
    person = rs.at_rms_dbfs(fx.speech("Wait."), -22.0)
    at_ms = 6100
    onset_ms = lead_ms + at_ms + fx.active_span_ms(person)[0]
    paused_ms = round(at_ms + fx.active_span_ms(person)[0] + paused_after_ms)
    played = echo_microphone.reply_24k(text)[:paused_ms * echo_microphone.OUTPUT_RATE_HZ // 1000]
    mic = room_microphone(ECHO_ROOM, person, lead_ms + at_ms, played=played)
    radio = talker_room("espeak", "en-us+m3", -40.0, mic.size * 1000 / fx.RATE_HZ + 10, True)
    mic = np.clip(mic + radio[:mic.size], -1.0, 1.0)

    def position(mic_ms: float, _rng: np.random.Generator) -> int | None:
        return None if mic_ms < 2 * echo_microphone.APPEND_MS else round(
            min(max(mic_ms - lead_ms, 0.0), paused_ms))

    started = [e.audio_start_ms for e in turn_starts(mic, position_at=position,
                                                     playing_ms=paused_ms, text=text)]
    assert [onset_ms - rooms.EARLIEST_START_MS <= start <= onset_ms + FIRST_WORD_MS
            for start in started] == [True], (started, onset_ms)


RADIO_UNDER_THE_ECHO = [(1000, 280), (1280, 280), (1560, 280), (3220, 280)]
"""(ms the talk radio's passage is shifted by, ms into the microphone the reply starts): the
radio heard alone only that briefly, then under `ECHO_ROOM`'s echo of `TALK_REPLY`. The first
three started a turn before (at 8.5, 2.4 and 4.1, 2.0 s): the echo gate counted the radio in
the echo's pauses as more than the echo, the room gate the echo as more than the young room
(`server.listening.echo_and_room`). The last started one at 8.28 s; its radio and the echo
from 1.1 to 3.1 s into the reply (no echo path held until then) are now judged as in a cold
room (`person_level.near_margin_db`), and the turn is gone (how that reaches 8.28 s was not
traced). Not yet: with a shift of 1960 ms the radio alone 1.2 s after
the reply's echo ended (13.57 s) starts a turn: the room learned (1.2 s, its loudest window
-41.8 dBFS) is young and the radio's window 9.7 dB louder (`LOUDER_DB`); raising `LOUDER_DB`
by the young room's raise of `ABOVE_DB` held it but missed the person's "Wait." above (15.4 dB
over a room of 5 windows)."""


@pytest.mark.parametrize(("shift_ms", "lead_ms"), RADIO_UNDER_THE_ECHO)
def test_a_talk_radio_under_the_replys_echo_is_no_turn(monkeypatch: pytest.MonkeyPatch,
                                                       shift_ms: int, lead_ms: int) -> None:
    """Offline through the server's VAD: an espeak-ng en-us+m3 talk radio at -40 dBFS RMS
    from the microphone's first sample and the reply's echo from `lead_ms` on, nobody
    speaking: no turn."""
    monkeypatch.setattr(echo_microphone, "LEAD_MS", lead_ms)
    text = TALK_REPLY.removeprefix("say: ")
    alone = room_microphone(ECHO_ROOM, played=echo_microphone.reply_24k(text))
    radio = talker_room("espeak", "en-us+m3", -40.0,
                        alone.size * 1000 / fx.RATE_HZ + shift_ms + 100, True)
    first = shift_ms * fx.RATE_HZ // 1000
    mic = np.clip(alone + radio[first:first + alone.size], -1.0, 1.0)
    assert turn_starts(mic, text=text) == []


MUSEUM_REPLY = ("The museum opens at nine in the morning and closes at six in the evening. On "
                "Mondays it stays closed all day, and on Sundays the guided tours start at eleven.")
"""A reply long enough to be playing when the person speaks (`benchmarks/bench_echo.py`'s
`PERSON_PROMPT`)."""

ROOMS_UNDER_THE_FIRST_REPLY = [("tv_talker", 0, 170), ("tv_talker", 0, 230),
                               ("tv_talker", 2, 150), ("tv_talker", 2, 170),
                               ("babble", 1, 170), ("radio", 2, 190)]
"""(`tests.room_sounds` sound at -40 dBFS RMS, its seed, ms into the microphone the reply's
audio starts): a room from the microphone's first sample and the reply's echo through
`ECHO_ROOM` from there, as the real server is fed (`bench_echo` table 3): the session says the
reply plays from 80 ms in, its position 0 until the audio starts. The TV talker rows each
started a turn before (at 1.36 s, 0.69 s, 5.23 s and 1.36 s; the real server 0.69 and 1.17 s
into the reply in 5 of 12 runs): the TV and the echo together reached -30.5 dBFS, within
`NEAR_DB` of the person's prior level, while no echo path told the two apart and under 100 ms
of room was heard (`person_level.near_margin_db`: such a room is cold). The babble and radio
rows passed before too."""


@pytest.mark.parametrize(("sound", "seed", "lead_ms"), ROOMS_UNDER_THE_FIRST_REPLY)
def test_a_room_under_the_first_replys_echo_is_no_turn_and_the_person_is_heard(
        monkeypatch: pytest.MonkeyPatch, sound: str, seed: int, lead_ms: int) -> None:
    """Offline through the server's VAD: the room and the echo alone start no turn; with Piper
    "Wait." at -22 dBFS RMS 4.1 s into the reply, that is the one turn."""
    monkeypatch.setattr(echo_microphone, "LEAD_MS", lead_ms)
    reply_ms = echo_microphone.reply_ms(MUSEUM_REPLY)

    def position(mic_ms: float, _rng: np.random.Generator) -> int | None:
        if mic_ms < 2 * echo_microphone.APPEND_MS or mic_ms - lead_ms > reply_ms + 2500:
            return None
        return round(min(max(mic_ms - lead_ms, 0.0), reply_ms))

    person = rs.at_rms_dbfs(fx.speech("Wait."), -22.0)
    at_ms = lead_ms + 4100
    played = echo_microphone.reply_24k(MUSEUM_REPLY)
    alone = room_microphone(ECHO_ROOM, played=played)
    room = getattr(rs, sound)(alone.size * 1000 / fx.RATE_HZ + 100, -40.0, seed=seed)[:alone.size]
    heard = [[e.audio_start_ms for e in turn_starts(np.clip(mic + room, -1.0, 1.0),
                                                    position_at=position, text=MUSEUM_REPLY)]
             for mic in (alone, room_microphone(ECHO_ROOM, person, at_ms, played=played))]
    onset_ms = at_ms + fx.active_span_ms(person)[0]
    assert heard[0] == []
    assert [onset_ms - rooms.EARLIEST_START_MS <= start <= onset_ms + FIRST_WORD_MS
            for start in heard[1]] == [True], (heard[1], onset_ms)
