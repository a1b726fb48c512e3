"""Echo suppression for ASR (server/listening/echo_suppression.py, through
`InputSpeechDetector.without_echo`): a turn committed over the reply's echo starts a little
before the person's voice, on the echo, and the echo goes on under the first words until the
reply pauses; the audio handed to ASR has that echo taken down, the person's voice kept (its
energy within 1 dB), and is the committed audio unchanged without an echo.

The turns are made by tests/echo_turns.py (the reply's echo through a room, the reply paused
as the page pauses it once the turn started).
"""

from __future__ import annotations

import numpy as np
import pytest

from server.listening.vad import VOICE_ONSET_MARGIN_MS
from tests import speech_fixtures as fx
from tests.echo_microphone import LEAD_MS, OUTPUT_RATE_HZ
from tests.echo_room import Room, words
from tests.echo_turns import paused_turn, transcript


@pytest.mark.parametrize("text", ["Hold on a second.", "Excuse me, how much does it cost?"])
def test_the_echo_in_front_of_the_voice_onset_is_suppressed_for_asr(text: str) -> None:
    """bench_echo's kind (espeak-ng en-us at -12 dBFS peak over the reply's -30 dB echo, 150 ms
    late, over -60 dBFS pink noise, the reply paused once the turn started): the turn's audio
    starts a little before the person's voice, on the echo, and tiny.en wrote "Oh, not
    American." for "Hold on a second." in 3 of 12 protocol runs (the echo in front of the soft
    "h"). The audio handed to ASR (`InputSpeechDetector.without_echo`) has that echo at least
    6 dB down (measured: 9-20 dB) and, from the voice on, the committed audio's energy within
    1 dB (measured: 0.05-0.23 dB less: the echo under the first words); its transcript is the
    sentence."""
    person = fx.at_peak_dbfs(fx.speech(text, "espeak", "en-us"), -12.0)
    person_at_ms = LEAD_MS + 1500
    committed, start_ms, suppressed = paused_turn(person, person_at_ms, Room(-30.0, 150, -60.0))
    onset = round((person_at_ms + fx.active_span_ms(person)[0] - start_ms)
                  * OUTPUT_RATE_HZ / 1000)
    raw, quiet = (np.frombuffer(pcm, dtype="<i2").astype(np.float64) / 32768.0
                  for pcm in (committed, suppressed))
    assert onset > OUTPUT_RATE_HZ * 30 // 1000  # the turn starts on the echo
    # The turn starts VOICE_ONSET_MARGIN_MS before the onset the echo detector located, which
    # may lie 10-20 ms before the voice's first sample at -40 dBFS (its rising edge): the first
    # half of the margin is the echo's alone.
    echo_only = slice(0, OUTPUT_RATE_HZ * VOICE_ONSET_MARGIN_MS // 2 // 1000)
    assert np.mean(quiet[echo_only] ** 2) <= np.mean(raw[echo_only] ** 2) / 4.0  # 6 dB
    voice = slice(onset + OUTPUT_RATE_HZ * 20 // 1000, None)
    assert np.mean(quiet[voice] ** 2) >= np.mean(raw[voice] ** 2) * 10.0 ** (-1.0 / 10.0)
    assert transcript(suppressed) == words(text)


def test_without_echo_the_audio_for_asr_is_the_committed_audio() -> None:
    """The same person with no echo in the room (a headset): nothing to suppress."""
    person = fx.at_peak_dbfs(fx.speech("Hold on a second.", "espeak", "en-us"), -12.0)
    committed, _, suppressed = paused_turn(person, LEAD_MS + 1500, Room(None, 150, -60.0))
    assert suppressed == committed


DRY_10_DB = Room(-10.0, 90, -60.0)
REVERBERANT_10_DB = Room(-10.0, 90, -60.0, rt60_ms=400.0)


@pytest.mark.parametrize(("text", "engine", "voice", "room", "position_ms"), [
    ("No.", "piper", None, DRY_10_DB, 5100),
    ("Wait.", "espeak", "en-us", DRY_10_DB, 2500),
    ("Wait, stop.", "espeak", "en-gb-x-rp", DRY_10_DB, 5100),
    ("No.", "espeak", "en-us", REVERBERANT_10_DB, 2500),
    ("Wait.", "espeak", "en-gb-x-rp", REVERBERANT_10_DB, 2500),
    ("Wait, stop.", "espeak", "en-gb-scotland", REVERBERANT_10_DB, 5100),
])
def test_a_short_interruption_over_a_loud_echo_is_read_as_said(
        text: str, engine: str, voice: str | None, room: Room, position_ms: int) -> None:
    """A tester's F6 kind (`benchmarks/bench_echo_transcripts.py`): a short interruption at
    -6 dBFS peak over the reply's echo 20 or 10 dB down is heard in time, but the echo under
    its words until the reply pauses made tiny.en read the echo's words ("no he's close",
    "way", "where it is stop", "knows", "we'll see you later", "where you stop"): the echo
    suppressed under the words too, it reads what was said."""
    person = fx.at_peak_dbfs(fx.speech(text, engine, voice), -6.0)
    _, _, for_asr = paused_turn(person, LEAD_MS + position_ms, room)
    assert transcript(for_asr) == words(text)


@pytest.mark.parametrize(("voice_engine", "voice", "room", "position_ms"), [
    ("piper", None, DRY_10_DB, 2500),
    ("piper", None, DRY_10_DB, 5100),
    ("piper", None, REVERBERANT_10_DB, 2500),
    ("espeak", "en-us", Room(-20.0, 150, -60.0), 2500),
    ("espeak", "en-gb-x-rp", Room(-20.0, 150, -60.0), 5100),
])
def test_a_stop_over_a_loud_echo_keeps_its_s(voice_engine: str, voice: str | None, room: Room,
                                             position_ms: int) -> None:
    """"Stop." over a -20 or -10 dB echo: its "s" (3-7 dB over the held echo) lies before the
    stop's closure, and the turn's audio began at the vowel without it, 100-140 ms into the
    word: tiny.en read "op" with the echo as "dollars", "that's close", "that was it", "start
    up", "stop these close" (`server.listening.voice_onset.before_closure`)."""
    person = fx.at_peak_dbfs(fx.speech("Stop.", voice_engine, voice), -6.0)
    person_at_ms = LEAD_MS + position_ms
    _, start_ms, for_asr = paused_turn(person, person_at_ms, room)
    assert start_ms <= person_at_ms + fx.active_span_ms(person)[0]
    assert transcript(for_asr) == ["stop"]
