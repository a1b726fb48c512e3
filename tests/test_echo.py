"""Echo detection (server/listening/echo.py) on real Piper replies: the assistant's own voice
coming back through the microphone at unknown delay and gain, through a room, after a stall or
a stop, is recognised and never starts a turn; a person talking over it is not mistaken for it.

The microphone is simulated as the page delivers it (tests/echo_microphone.py): the reply
(Piper, as the server sent it at 24 kHz) delayed and scaled, over a pink noise floor, appended
every 40 ms with the playing position the session would estimate (known to +-20 ms). Paced
playback: tests/test_echo_paced_playback.py; the playing position:
tests/test_echo_playing_position.py; the audio handed to ASR: tests/test_echo_suppression.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from server.listening.band_envelope import BAND_EDGES_HZ, BandEnvelope, EchoReference
from server.listening.echo import ECHO_TAIL_MS, EchoDetector
from server.listening.echo_path import ECHO_CORRELATION
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import TurnDetection
from server.listening.turn_events import SpeechStarted
from server.speech.engines import create_synthesizer
from server.speech.resampling import resample
from tests import speech_fixtures as fx
from tests.echo_microphone import (
    APPEND_MS,
    LEAD_MS,
    OUTPUT_RATE_HZ,
    PEOPLE,
    REPLY,
    echo_matches,
    fed_detector,
    microphone,
    playing_position,
    reference,
    reply_24k,
    reply_ms,
    room_microphone,
    turn_starts,
)
from tests.echo_room import Room

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


GARDEN_REPLY = ("Tomatoes need at least six hours of direct sun every day, and they grow best in "
                "deep, loose soil that drains well. Water them at the base in the early "
                "morning, never on the leaves, and add a thick layer of straw around each plant "
                "to keep the roots cool.")
"""The tester's reply (F1): its loud syllables 5-7 s in are where a short word's onset fell
under their echo."""


@pytest.mark.parametrize(("word", "engine", "voice", "at_ms"), [
    ("Wait.", "piper", None, 6100), ("Wait.", "piper", None, 6850),
    ("Wait.", "piper", None, 6400), ("Stop.", "piper", None, 6100),
    ("Stop.", "espeak", "en-us+m3", 6850), ("No.", "espeak", "en-gb-x-rp", 6600)])
def test_a_short_word_whose_onset_falls_on_a_loud_echo_syllable_starts_a_turn(
        word: str, engine: str, voice: str | None, at_ms: int) -> None:
    """Tester F1: Piper "Wait." at -6 dBFS peak, 8-10 dB over a dry -10 dB echo (90 ms late),
    its onset on a loud reply syllable, correlated 0.91-0.93 with the reply, and the echo
    gate took its excess for an auto gain's lift or a followed echo: no turn, the reply played
    on (12 of 12 over the protocol; offline here 6100 and 6850 ms were missed). The first two
    are those; the rest are held out."""
    person = fx.at_peak_dbfs(fx.speech(word, engine, voice), -6.0)
    person_at_ms = LEAD_MS + at_ms
    onset_ms = person_at_ms + fx.active_span_ms(person)[0]
    played = reply_24k(GARDEN_REPLY)
    mic = room_microphone(Room(-10.0, 90, -58.0), person, person_at_ms, played=played)
    started = turn_starts(mic, text=GARDEN_REPLY)
    assert [s.audio_start_ms for s in started if s.audio_start_ms >= onset_ms - 400]


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
    found = fed_detector(mic, onset_ms + 400).voice_onset_ms(int(onset_ms) - 300,
                                                              int(onset_ms) + 300)
    assert found is not None and abs(found - onset_ms) <= 30


@pytest.mark.parametrize(("text", "engine", "voice", "dbfs", "at_ms"), [
    *((text, engine, voice, -6.0, 1500) for text, engine, voice, _ in PEOPLE),
    ("What was the name of that street?", "piper", None, -6.0, 1500),
    ("What was the name of that street?", "piper", None, -12.0, 1500),
    ("What was the name of that street?", "piper", None, -12.0, 900),
    ("Stop.", "piper", None, -6.0, 1500), ("Stop.", "piper", None, -12.0, 700),
    ("No.", "espeak", "en-gb-x-rp", -6.0, 1500), ("Wait.", "espeak", "en-us+m3", -6.0, 1500),
    ("Wait.", "espeak", "en-us+m3", -12.0, 700)])
def test_a_voice_onset_right_before_the_trigger_is_found(
        text: str, engine: str, voice: str | None, dbfs: float, at_ms: int) -> None:
    """A loud person triggers the VAD within a window of their first word, and the turn asks
    for its voice onset with only 40 ms of the voice heard (a run cut off by the end of the
    audio, `CUT_RUN_FRAMES`). Over loopback, Piper "What was the name of that street?" at
    -12 dBFS peak over the -30 dB echo had no onset found there, and its turn's audio began with
    300 ms of echo, in 4 of 6 runs (CI). Before the cut run, 30 ms after the onset found none of
    these and 40 ms missed the street twice. At 0.7-0.9 s into the reply no echo path is held
    yet and a voice's first frames rise more slowly over the lead-in's echo (CI: the street
    again, its audio from 290 ms before the voice): the cut run reaches `EXCESS_DB`."""
    person = fx.at_peak_dbfs(fx.speech(text, engine, voice), dbfs)
    person_at_ms = LEAD_MS + at_ms
    mic = room_microphone(Room(-30.0, 150, -60.0), person, person_at_ms)
    onset_ms = person_at_ms + fx.active_span_ms(person)[0]
    found = fed_detector(mic, onset_ms + 40).voice_onset_ms(int(onset_ms) - 300,
                                                             int(onset_ms) + 40)
    assert found is not None and abs(found - onset_ms) <= 10


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


# --- a loudspeaker with a long output latency ------------------------------------------


@pytest.mark.parametrize(("delay_ms", "gain_db"),
                         [(450, -10), (700, -14), (900, -20), (1000, -10), (1100, -14),
                          (900, -14), (1000, -14)])
def test_a_long_latency_loudspeaker_s_echo_never_starts_a_turn(delay_ms: int,
                                                               gain_db: int) -> None:
    """A Bluetooth or USB loudspeaker plays 100 ms to about 1 s after the page hands it the
    audio. With the lag search ending at 800 ms (`LAG_RANGE_MS`), an echo 800 ms late started a
    turn here (tester F2, over the protocol: 700 ms, where the estimated playing position adds
    its own error; tester N1: 900 and 1000 ms, 14 dB down, cut the first reply 1.2 s in every
    run)."""
    assert turn_starts(microphone(delay_ms, gain_db)) == []


@pytest.mark.parametrize(("delay_ms", "text", "engine", "voice", "at_ms"), [
    (900, "Wait.", "piper", None, 2500), (1000, "Wait.", "espeak", "en-us+m3", 2500),
    (900, "Stop.", "espeak", "en-us", 4000), (1000, "Wait, what?", "espeak", "en-gb-x-rp", 4000)])
def test_a_person_over_a_long_latency_echo_starts_a_turn(delay_ms: int, text: str, engine: str,
                                                         voice: str | None, at_ms: int) -> None:
    """A short interruption at -6 dBFS peak `at_ms` into the session's first reply, whose echo
    comes 900 or 1000 ms late and 14 dB down (tester N1's loudspeaker): one turn, its audio
    starting at the person's voice."""
    person = fx.at_peak_dbfs(fx.speech(text, engine, voice), -6.0)
    mic = microphone(delay_ms, -14.0, person=person, person_at_ms=LEAD_MS + at_ms)
    onset_ms = LEAD_MS + at_ms + fx.active_span_ms(person)[0]
    started = turn_starts(mic)
    assert len(started) == 1
    assert onset_ms - 150 <= started[0].audio_start_ms <= onset_ms + 300


GAP_MS = 2000
"""Silence between the two replies of `test_the_echo_path_of_one_reply_is_held_into_the_next`."""


@pytest.mark.parametrize("delay_ms", [700, 1000])
def test_the_echo_path_of_one_reply_is_held_into_the_next(delay_ms: int) -> None:
    """Tester F2's loop: the first reply's echo (-14 dB, 700 ms late) taught its path, but a
    learning window at the start of the next reply, where the reply sounded only at short lags
    and its echo had not arrived yet, taught "no echo", and the echo's first words started a
    turn 0.9 s into every later reply. Two replies, exact positions (+-20 ms): the lag learned
    in the first is held through all of the second, and neither echo starts a turn."""
    reply = reply_24k()
    echo = resample(reply, OUTPUT_RATE_HZ, fx.RATE_HZ) * 10.0 ** (-14.0 / 20.0)
    second_ms = LEAD_MS + reply_ms() + GAP_MS
    mic = fx.place(echo, LEAD_MS + delay_ms, GAP_MS - delay_ms)
    mic = np.concatenate((mic, fx.place(echo, delay_ms, 1000)))
    mic = np.clip(fx.with_noise_floor(mic, np.random.default_rng(4), -70.0), -1.0, 1.0)
    references = (reference(), reference())
    rng = np.random.default_rng(1)

    def position(end_ms: float) -> tuple[int | None, EchoReference | None]:
        second = end_ms >= second_ms
        played = playing_position(end_ms - (second_ms - LEAD_MS if second else 0.0), rng)
        return played, (references[second] if played is not None else None)

    detector = EchoDetector()
    step = fx.RATE_HZ * APPEND_MS // 1000
    lags = []
    for start in range(0, mic.size, step):
        end_ms = (start + step) * 1000 // fx.RATE_HZ
        detector.feed(mic[start:start + step], *position(end_ms))
        path = detector.learn(end_ms)
        if end_ms >= second_ms:
            lags.append(None if path is None else path.lag_ms)
    assert lags and all(lag is not None and abs(lag - delay_ms) <= 30 for lag in lags)

    speech = InputSpeechDetector(TurnDetection(), OUTPUT_RATE_HZ, 0)
    pcm16 = fx.to_pcm16(resample(mic, fx.RATE_HZ, OUTPUT_RATE_HZ))
    step = OUTPUT_RATE_HZ * 2 * APPEND_MS // 1000
    events = []
    for start in range(0, len(pcm16), step):
        played, recorded = position((start + step) * 1000 // (OUTPUT_RATE_HZ * 2))
        events += speech.feed(pcm16[start:start + step], played is not None, played, recorded)
    assert [event for event in events if isinstance(event, SpeechStarted)] == []


FIRST_SECOND_SOUNDS = [("hee", "espeak", "en-029"), ("Ha.", "espeak", "en-us"),
                       ("Hey.", "piper", None), ("Mm.", "espeak", "en-us+f3")]
"""Short sounds over the first reply with no echo in the microphone: the tester's laugh (the
example of tests/test_backchannel_done.py) and held-out ones."""


@pytest.mark.parametrize("at_ms", [900, 1000, 1100, 1200])
@pytest.mark.parametrize(("text", "engine", "voice"), FIRST_SECOND_SOUNDS)
def test_a_sound_in_the_first_reply_s_first_second_is_no_echo_of_its_start(
        text: str, engine: str, voice: str | None, at_ms: int) -> None:
    """A headset (no echo, a digitally silent microphone) and the demo's uniform test voice:
    the person's onset at `at_ms` into the session's first reply, before any echo path is
    learned, lines up with the reply's own start at a lag of about `at_ms` (silence before,
    sound after, in both: 0.70 for en-029's "hee" at 870 ms). The candidate's lead-in there
    is the reference's silence, the gain measured on it (the person's onset over nothing)
    54-75 dB, and the sound was held back as that echo at every ask (en-029 "hee" and en-us
    "Ha.", with the lag search to 1.2 s): a "hee" 0.9 s in lost its backchannel. Every ask of
    the echo gate from 50 ms after the onset on: not the echo. (At 600 and 750 ms, within
    `server.listening.echo.SILENT_LEAD_LAG_MS`, both are still held back, as before the range
    was widened.)"""
    synthesizer = create_synthesizer("uniform", deterministic=True)
    recorded = EchoReference(synthesizer.sample_rate_hz)
    for chunk in synthesizer.synthesize("First, open the settings app. Then tap on Wi-Fi."):
        recorded.append(chunk.pcm)
    person = fx.at_peak_dbfs(fx.speech(text, engine, voice), -6.0)
    mic = fx.place(person, at_ms, 1500)
    onset_ms = at_ms + round(fx.active_span_ms(person)[0])
    detector, asked = EchoDetector(), []
    step = fx.RATE_HZ * APPEND_MS // 1000
    for start in range(0, mic.size, step):
        end_ms = (start + step) * 1000 // fx.RATE_HZ
        detector.feed(mic[start:start + step], max(end_ms - 120, 0), recorded)  # as over loopback
        if onset_ms + 110 <= end_ms <= onset_ms + 350:
            asked.append(detector.is_echo(onset_ms + 50, end_ms))
    assert asked and not any(asked)


FAR_LAG_PEOPLE = [("Wait, stop, that is not what I asked.", "piper", None, 0, 900),
                  ("Wait.", "espeak", "en-us+m3", 40, 1000),
                  ("Hold on, I have a question.", "espeak", "en-us+f3", 150, 1100),
                  ("Stop.", "piper", None, 40, 900),
                  ("No, not that one.", "espeak", "en-gb-x-rp", 0, 1100)]
"""(text, engine, voice, echo lag ms, ms into the reply) of `test_a_person_over_the_first_
reply_s_echo_is_not_its_start_at_a_far_lag`: the terminal client's example
(tests/test_local_audio.py, its voice and lag) and held-out ones."""


@pytest.mark.parametrize(("text", "engine", "voice", "lag_ms", "at_ms"), FAR_LAG_PEOPLE)
def test_a_person_over_the_first_reply_s_echo_is_not_its_start_at_a_far_lag(
        text: str, engine: str, voice: str | None, lag_ms: int, at_ms: int) -> None:
    """The microphone opens with the session's first reply (no echo path can be learned in
    its first `LEARN_WINDOW_MS`), which it hears 0-150 ms late at -26 dB; a person speaks
    0.9-1.1 s in. The echo gate's asks on the echo before them (as server VAD asks on a
    candidate held back as echo) find the echo at its short lag; the person's onset lines up
    with the reply's first word at a lag of about `at_ms` (the reference's silence before
    it, as the microphone's before the echo). Every ask from 50 ms after the onset on: not
    the echo. With the lag search to 1.2 s and no heard lag held
    (`server.listening.echo.HEARD_LAG_HOLD_MS`), 3 of these 5 cases failed, and 89 of 108
    (three replies, four voices, lags 0-150 ms, 0.9-1.1 s in) had some of their asks called
    the echo; the terminal client's example was held back for 160 ms."""
    person = fx.at_peak_dbfs(fx.speech(text, engine, voice), -6.0)
    echo = resample(reply_24k(), OUTPUT_RATE_HZ, fx.RATE_HZ) * 10.0 ** (-26.0 / 20.0)
    mic = fx.place(echo, lag_ms, 0)[:fx.RATE_HZ * (at_ms + 1500) // 1000]
    at = fx.RATE_HZ * at_ms // 1000
    said = person[:mic.size - at]
    mic[at:at + said.size] += said
    mic = np.clip(fx.with_noise_floor(mic, np.random.default_rng(4), -70.0), -1.0, 1.0)
    onset_ms = at_ms + round(fx.active_span_ms(person)[0])
    detector, recorded, echo_asked, person_asked = EchoDetector(), reference(), [], []
    step = fx.RATE_HZ * APPEND_MS // 1000
    for start in range(0, mic.size, step):
        end_ms = (start + step) * 1000 // fx.RATE_HZ
        detector.feed(mic[start:start + step], end_ms, recorded)
        if 300 + lag_ms <= end_ms <= onset_ms - 20:
            echo_asked.append(detector.is_echo(end_ms - 250, end_ms))
        if onset_ms + 110 <= end_ms <= onset_ms + 350:
            person_asked.append(detector.is_echo(onset_ms + 50, end_ms))
    assert detector.path is None
    assert echo_asked and all(echo_asked)
    assert person_asked and not any(person_asked)
