"""The person, not the room: babble and a TV never start a turn, a person over them does, a
turn that never pauses ends at `max_turn_ms`, and the input buffer never makes a session deaf.

Backgrounds are `tests.room_sounds` (five-talker babble of espeak-ng and Piper voices, one TV
talker) at RMS levels over a -70 dBFS RMS pink floor; the person is Piper at -20 dBFS RMS.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import numpy as np
import pytest

from server.config import parse_config
from server.listening.input_speech import InputSpeechDetector
from server.listening.room_background import RoomBackground
from server.listening.server_vad_settings import TurnDetection
from server.listening.silero_vad import WINDOW_MS
from server.listening.turn_events import SpeechStarted, SpeechStopped, TurnEvent
from server.listening.vad import TurnDetectionConfig, TurnDetector
from server.realtime.session import Session, SessionConfig
from server.speech.resampling import resample
from tests import room_sounds as rs
from tests import speech_fixtures as fx
from tests.realtime_client import RealtimeClient
from tests.test_server_vad import LONG_REPLY, SERVER_VAD, SimulatedPage, receive_while

INPUT_RATE_HZ = 24_000
APPEND_MS = 40
FLOOR_DBFS = -70.0
PERSON_DBFS = -20.0
QUESTION = "Hold on, what was the second step?"
BACKGROUNDS = {"babble": rs.babble, "tv": rs.tv_talker}


def room(kind: str, dbfs: float, duration_ms: float, seed: int = 0,
         floor_seed: int | None = None) -> np.ndarray:
    """`kind` background at RMS `dbfs` over the pink floor (seeded `floor_seed`, default
    `seed` + 1), 16 kHz."""
    background = BACKGROUNDS[kind](duration_ms, dbfs, seed=seed)
    rng = np.random.default_rng(seed + 1 if floor_seed is None else floor_seed)
    floor = rs.at_rms_dbfs(fx.pink_noise(rng, duration_ms), FLOOR_DBFS)
    return (background + floor[:background.size]).astype(np.float32)


def person(text: str = QUESTION) -> np.ndarray:
    """The person (Piper) at `PERSON_DBFS` RMS, 16 kHz."""
    return rs.at_rms_dbfs(fx.speech(text), PERSON_DBFS)


def with_person(background: np.ndarray, voice: np.ndarray, at_ms: int) -> np.ndarray:
    mixed = background.copy()
    first = at_ms * fx.RATE_HZ // 1000
    mixed[first:first + voice.size] += voice[:mixed.size - first]
    return mixed


def mic_pcm16(pcm_16k: np.ndarray) -> bytes:
    return fx.to_pcm16(resample(pcm_16k, fx.RATE_HZ, INPUT_RATE_HZ))


def server_vad_events(pcm_16k: np.ndarray, max_turn_ms: int | None = 30_000) -> list[TurnEvent]:
    """The server's VAD (`InputSpeechDetector`) over `pcm_16k` appended as the page does."""
    detector = InputSpeechDetector(TurnDetection(), INPUT_RATE_HZ, 0, max_turn_ms)
    pcm16 = mic_pcm16(pcm_16k)
    step = INPUT_RATE_HZ * 2 * APPEND_MS // 1000
    events: list[TurnEvent] = []
    for start in range(0, len(pcm16), step):
        events += detector.feed(pcm16[start:start + step], False)
    return events


def starts(events: list[TurnEvent]) -> list[int]:
    return [e.audio_start_ms for e in events if isinstance(e, SpeechStarted)]


EARLIEST_START_MS = 300 + 250 + 2 * WINDOW_MS
"""How long before the person's onset their turn's audio may start over talk in the room: the
prefix padding, plus the room's speech in the candidate since the room gate last rejected it
(it asks every `min_speech_ms`), plus two windows."""


# --- the room alone: no turn --------------------------------------------------------------


@pytest.mark.parametrize("dbfs", [-45.0, -55.0, -65.0])
@pytest.mark.parametrize("kind", sorted(BACKGROUNDS))
def test_the_room_alone_never_starts_a_turn(kind: str, dbfs: float) -> None:
    """The issue's kind: babble (five voices) or one TV talker from the session's first
    sample, nobody speaking: no turn in 30 s, with two seeds (different passages)."""
    for seed in (0, 1):
        assert starts(server_vad_events(room(kind, dbfs, 30_000, seed))) == []


@pytest.mark.parametrize("dbfs", [-45.0, -65.0])
@pytest.mark.parametrize("kind", sorted(BACKGROUNDS))
def test_the_person_over_the_room_is_one_turn_that_ends(kind: str, dbfs: float) -> None:
    """The person at -20 dBFS RMS over that background: one turn, starting at most
    `EARLIEST_START_MS` before their voice and stopping within a second after it, although
    the background talks on."""
    voice = person()
    at_ms = 6000
    onset_ms, offset_ms = (at_ms + edge for edge in fx.active_span_ms(voice))
    events = server_vad_events(with_person(room(kind, dbfs, 12_000), voice, at_ms))
    assert starts(events) and len(starts(events)) == 1, events
    assert onset_ms - EARLIEST_START_MS <= starts(events)[0] <= onset_ms
    [stop] = [e for e in events if isinstance(e, SpeechStopped)]
    assert not stop.forced
    assert offset_ms - 300 <= stop.audio_end_ms <= offset_ms + 1000


FIRST_WORDS_OVER_THE_ROOM = [("Hold on, what was the second step?", "piper", None),
                             ("Actually, I need a table for four people.", "espeak", "en-us"),
                             ("Wait, stop, I have a question.", "piper", None),
                             ("Wait, one more thing.", "espeak", "en-us")]
"""Two of `benchmarks/bench_rooms.py`'s sentences, and two that open with a short word and a
pause (issue 24, failing input 2)."""

BABBLE_BEFORE_THE_VOICE = ((5, 105), (9, 109))
"""(babble seed, floor seed) of `bench_rooms`' scenes 5 and 9: at -65 dBFS RMS Silero scores
runs of this babble as speech within the prefix padding before 4 s."""


@pytest.mark.parametrize("dbfs", [-45.0, -55.0, -65.0])
@pytest.mark.parametrize(("text", "engine", "voice"), FIRST_WORDS_OVER_THE_ROOM)
def test_a_turn_s_first_word_is_the_person_s_never_the_room_s_before_it(
        text: str, engine: str, voice: str | None, dbfs: float) -> None:
    """The look-back for a turn's first word (`TurnDetector._first_word_ms`) takes no run
    of the room's chatter (one the room gate calls the room) for the person's first word,
    and still takes the person's own short first word: over babble (two seeds) the person at
    -20 dBFS RMS is one turn starting at most `EARLIEST_START_MS` before their voice, never
    after it. Before, over babble at -65 dBFS RMS, Silero's runs on the babble just before
    the person's voice were taken for its first word and the turn began 750-880 ms before the
    voice, whatever the sentence (`bench_rooms`: the person found 8 of 10). The babble's
    espeak-ng talkers differ slightly with what the process synthesized before
    (`server.speech.engines.create_synthesizer`), so which scenes failed changed with that."""
    voice_pcm = rs.at_rms_dbfs(fx.speech(text, engine, voice), PERSON_DBFS)
    at_ms = 4000
    onset_ms = at_ms + fx.active_span_ms(voice_pcm)[0]
    for seed, floor_seed in BABBLE_BEFORE_THE_VOICE:
        mic = room("babble", dbfs, 10_000, seed, floor_seed)
        events = server_vad_events(with_person(mic, voice_pcm, at_ms))
        assert len(starts(events)) == 1, (seed, events)
        assert onset_ms - EARLIEST_START_MS <= starts(events)[0] <= onset_ms, (seed, events)


@pytest.mark.parametrize("dbfs", [-60.0, -50.0, -45.0])
@pytest.mark.parametrize("word", ["Yes.", "Right.", "No."])
def test_a_word_said_in_the_room_just_before_the_person_is_not_their_first_word(
        word: str, dbfs: float) -> None:
    """Someone in the room says a short word (Piper, at `dbfs` RMS over the -70 dBFS floor)
    that ends 80, 150 or 220 ms before the person (Piper, -20 dBFS RMS) starts: the room
    gate calls it the room, so the look-back for the person's first word stops there, and a
    candidate the gate held back as the room starts where it became the person: the turn
    starts at most the prefix padding and two windows before the person's voice. Before, 8
    of these 27 turns began on the word, 750-880 ms before the voice, and 11 more 336-560
    ms before it."""
    voice = person()
    said = fx.speech(word)
    said_end_ms = fx.active_span_ms(said)[1]
    said = rs.at_rms_dbfs(said, dbfs)
    at_ms = 4000
    onset_ms = at_ms + fx.active_span_ms(voice)[0]
    for gap_ms in (80, 150, 220):
        floor = rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(3), 8000), FLOOR_DBFS)
        said_at_ms = round(onset_ms - gap_ms - said_end_ms)
        events = server_vad_events(with_person(with_person(floor, said, said_at_ms), voice,
                                               at_ms))
        assert len(starts(events)) == 1, (gap_ms, events)
        assert onset_ms - 300 - 2 * WINDOW_MS <= starts(events)[0] <= onset_ms, (gap_ms, events)


def test_the_room_after_the_person_spoke_never_starts_a_turn() -> None:
    """Once the person's own level is known (a turn at -20 dBFS RMS in a quiet room), babble
    and then a TV talker at -45 dBFS RMS start no turn."""
    quiet = rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(5), 3000), FLOOR_DBFS)
    first = with_person(quiet, person("What is the weather like today?"), 500)
    rest = np.concatenate((room("babble", -45.0, 15_000, seed=2),
                           room("tv", -45.0, 15_000, seed=3)))
    events = server_vad_events(np.concatenate((first, rest)))
    assert len(starts(events)) == 1 and starts(events)[0] < 1000, events


# --- the longest turn -----------------------------------------------------------------------


def test_a_turn_that_never_pauses_stops_at_max_turn_ms_and_the_detector_rearms() -> None:
    config = TurnDetectionConfig(max_turn_ms=2000)
    detector = TurnDetector(config)
    probabilities = [0.0] * 20 + [0.9] * 180
    events = [(index * WINDOW_MS, detector.process(index * WINDOW_MS, probability))
              for index, probability in enumerate(probabilities, start=1)]
    events = [(end, e) for end, e in events if e is not None]
    assert [type(e) for _, e in events[:3]] == [SpeechStarted, SpeechStopped, SpeechStarted]
    first_start = events[0][1].audio_start_ms + config.prefix_padding_ms
    stop_end, stop = events[1]
    assert stop == SpeechStopped(stop_end, forced=True)
    assert 2000 <= stop_end - first_start < 2000 + WINDOW_MS
    with pytest.raises(ValueError, match="max_turn_ms"):
        TurnDetectionConfig(max_turn_ms=-1)


def test_the_room_gate_moves_a_candidate_s_start_and_its_windows_in_a_turn_are_silence() -> None:
    """`TurnDetector.room_gate` (a stand-in: the room until 1600 ms and from 3200 ms):
    rejected candidates move their start, the turn starts `min_speech_ms` after the room
    stopped, and the room's windows after the person's end the turn like non-speech."""
    detector = TurnDetector(TurnDetectionConfig())
    asked: list[tuple[int, int]] = []

    def room_gate(start_ms: int, end_ms: int) -> bool:
        asked.append((start_ms, end_ms))
        return end_ms <= 1600 or start_ms >= 3200

    detector.room_gate = room_gate
    events = [(index * WINDOW_MS, detector.process(index * WINDOW_MS, 0.9))
              for index in range(1, 200)]
    events = [(end, e) for end, e in events if e is not None]
    assert [type(e) for _, e in events] == [SpeechStarted, SpeechStopped]
    start_end, started = events[0]
    assert 1600 < start_end <= 1600 + 256 + WINDOW_MS
    assert started.audio_start_ms >= 1600 - 256 - 300
    stop_end, stopped = events[1]
    assert stopped.audio_end_ms == 3200 and not stopped.forced
    assert stop_end - 3200 >= TurnDetectionConfig().silence_duration_ms


def test_a_forced_turn_becomes_background_a_stopped_one_the_person_s_level() -> None:
    rng = np.random.default_rng(0)
    model = RoomBackground()
    fed_ms = 0

    def hear(pcm: np.ndarray) -> None:
        nonlocal fed_ms
        model.feed(pcm, playing=False)
        fed_ms += pcm.size * 1000 // fx.RATE_HZ
        model.advance(fed_ms)

    hear(rs.at_rms_dbfs(fx.pink_noise(rng, 2016), FLOOR_DBFS))
    loud = rs.at_rms_dbfs(fx.pink_noise(rng, 1024), -25.0)
    model.turn_started(2016)
    hear(loud)
    model.turn_stopped()
    assert -25.0 < model.person_dbfs < -15.0
    hear(loud)
    assert not model.is_background(3040, 4064), "as loud as the person, far above the floor"
    model.turn_started(4064)
    hear(loud)
    model.turn_stopped(forced=True)
    hear(loud)
    assert model.is_background(5088, 6112), "the same sound after a forced turn: the room"


def test_speech_that_never_pauses_is_committed_at_max_turn_ms_then_the_person_is_heard() -> None:
    """Loud babble (-25 dBFS RMS, after a second of quiet room) keeps Silero's speech going:
    the turn it starts ends at `max_turn_ms` (forced), the babble is then the room, and the
    person at -5 dBFS RMS over it starts the next turn, which stops on its own."""
    quiet = rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(7), 1000), FLOOR_DBFS)
    babble = room("babble", -25.0, 14_000, seed=4)
    voice = rs.at_rms_dbfs(fx.speech(QUESTION), -5.0)
    mic = np.concatenate((quiet, with_person(babble, voice, 8000)))
    events = server_vad_events(mic, max_turn_ms=4000)
    kinds = [(type(e).__name__, getattr(e, "forced", None)) for e in events
             if isinstance(e, SpeechStarted | SpeechStopped)]
    assert kinds == [("SpeechStarted", None), ("SpeechStopped", True),
                     ("SpeechStarted", None), ("SpeechStopped", False)], events
    onset_ms = 9000 + fx.active_span_ms(voice)[0]
    assert onset_ms - EARLIEST_START_MS <= starts(events)[1] <= onset_ms


# --- the input buffer ------------------------------------------------------------------------


def send(target: Session, **event: Any) -> list[dict[str, Any]]:
    target.receive(json.dumps(event))
    return target.take_events()


def test_a_full_input_buffer_never_makes_a_server_vad_session_deaf() -> None:
    """A turn in progress holds the buffer (10 s here); appends past it drop the oldest
    audio instead of `input_audio_buffer_full`, and the turn still commits its newest audio.
    Without server VAD the client commits, and an overflow is its error."""
    session = Session(SessionConfig(input_audio_max_bytes=INPUT_RATE_HZ * 2 * 10))
    send(session, type="session.update",
         session={"audio": {"input": {"turn_detection": SERVER_VAD}}})
    second = base64.b64encode(bytes(INPUT_RATE_HZ * 2)).decode()
    send(session, type="input_audio_buffer.append", audio=second)
    session.turn_taking.on_speech_started(500)
    for _ in range(14):
        events = send(session, type="input_audio_buffer.append", audio=second)
        assert not [e for e in events if e["type"] == "error"], events
    assert len(session.input_turns.audio) <= INPUT_RATE_HZ * 2 * 10
    assert session.input_turns.audio.end_ms == 15_000
    session.turn_taking.on_speech_stopped(14_500)
    committed = [e for e in session.take_events() if e["type"] == "input_audio_buffer.committed"]
    assert len(committed) == 1
    manual = Session(SessionConfig(input_audio_max_bytes=INPUT_RATE_HZ * 2 * 10))
    send(manual, type="session.update", session={"audio": {"input": {"turn_detection": None}}})
    for _ in range(10):
        send(manual, type="input_audio_buffer.append", audio=second)
    [error] = send(manual, type="input_audio_buffer.append", audio=second)
    assert error["error"]["code"] == "input_audio_buffer_full"


# --- the example over the protocol -------------------------------------------------


async def stream(client: RealtimeClient, pcm16: bytes) -> None:
    """Append microphone audio in `APPEND_MS` frames, in real time."""
    frame = INPUT_RATE_HZ * 2 * APPEND_MS // 1000
    loop = asyncio.get_running_loop()
    started = loop.time()
    for index, start in enumerate(range(0, len(pcm16), frame)):
        await client.send({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(pcm16[start:start + frame]).decode()})
        await asyncio.sleep(max(0.0, started + (index + 1) * APPEND_MS / 1000 - loop.time()))


async def person_over_the_reply(server: Any, mic: bytes) -> tuple[RealtimeClient, dict[str, Any],
                                                                 SimulatedPage]:
    """A real session with server VAD: `LONG_REPLY` plays on a `SimulatedPage` while `mic`
    (PCM16 at the input rate) streams in real time. Returns the client (all its events), the
    first `conversation.item.input_audio_transcription.completed` and the page (where it
    stopped). Fails the test, naming the turn events seen, when no transcript comes within
    60 s."""
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        await client.wait_for("session.updated")
        response_id, _ = await client.prompt(LONG_REPLY)
        await client.wait_for("response.output_audio.delta")
        page = SimulatedPage(client, response_id)
        playing = asyncio.create_task(page.run())
        await receive_while(client, asyncio.create_task(stream(client, mic)))
        try:
            transcript = await client.wait_for(
                "conversation.item.input_audio_transcription.completed", timeout=60)
        except TimeoutError:
            kinds = [e["type"] for e in client.events
                     if not e["type"].startswith(("response.", "playback."))]
            pytest.fail(f"no transcript: {kinds}")
        finally:
            playing.cancel()
            await asyncio.gather(playing, return_exceptions=True)
    return client, transcript, page


@pytest.mark.parametrize(("kind", "dbfs"), [("babble", -45.0), ("babble", -65.0), ("tv", -45.0)])
async def test_the_person_over_the_room_is_heard_and_the_room_is_not(
        start_server, kind: str, dbfs: float) -> None:
    """The issue's example on a real server: the room talks from the first sample while the
    assistant answers; the reply plays on until the person says "Hold on, what was the
    second step?" at -20 dBFS RMS 5 s in; that is the one turn, it stops, and its transcript
    holds the person's words."""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    at_ms = 5000
    voice = person()
    onset_ms = at_ms + fx.active_span_ms(voice)[0]
    mic = mic_pcm16(with_person(room(kind, dbfs, 9000), voice, at_ms))
    client, transcript, page = await person_over_the_reply(server, mic)
    started = client.of_type("input_audio_buffer.speech_started")
    assert [onset_ms - EARLIEST_START_MS <= e["audio_start_ms"] <= onset_ms
            for e in started] == [True]
    assert len(client.of_type("input_audio_buffer.speech_stopped")) == 1
    assert "second step" in transcript["transcript"].lower()
    stopped_at = page.stopped_at_ms
    assert stopped_at is None or stopped_at >= at_ms - 1000, "the room cut the reply"


def test_max_turn_ms_flag_and_variable() -> None:
    assert parse_config([], {}).max_turn_ms == 30_000
    assert parse_config(["--max-turn-ms", "4000"], {}).max_turn_ms == 4000
    assert parse_config([], {"DUPLEX_MAX_TURN_MS": "5000"}).max_turn_ms == 5000
    with pytest.raises(SystemExit):
        parse_config(["--max-turn-ms", "0"], {})


async def test_a_turn_that_never_pauses_is_committed_at_max_turn_ms_over_the_protocol(
        start_server) -> None:
    """A server with `max_turn_ms` 3000 and loud babble (-25 dBFS RMS) after a second of quiet
    room: the turn it starts stops 3 s after its speech start and is committed, and the
    session goes on listening (no error, no second turn from the same babble)."""
    server = await start_server(tts="uniform", calibration="marks", max_turn_ms=3000)
    quiet = rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(7), 1000), FLOOR_DBFS)
    mic = mic_pcm16(np.concatenate((quiet, room("babble", -25.0, 7000, seed=4))))
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        await client.wait_for("session.updated")
        await receive_while(client, asyncio.create_task(stream(client, mic)))
        await client.wait_for("input_audio_buffer.committed", timeout=10)
        await client.drain(0.5)
    [started] = client.of_type("input_audio_buffer.speech_started")
    [stopped] = client.of_type("input_audio_buffer.speech_stopped")
    # the onset is stamped at the start of the VAD window it was heard in: up to one window
    # (32 ms) before the babble's first sample at 1000 ms, less the 300 ms prefix padding
    assert 1000 - 300 - WINDOW_MS <= started["audio_start_ms"] <= 1400
    # max_turn_ms runs from the window that started the turn; the speech start it reports may
    # reach back a window or two before it to a run of the same babble (see `_first_word_ms`)
    speech_ms = stopped["audio_end_ms"] - started["audio_start_ms"] - 300
    assert 3000 <= speech_ms <= 3000 + 3 * WINDOW_MS
    assert not client.of_type("error")
