"""Short sounds on the page's VAD (issue 24; web/transients.js, web/vad.js `minWordMs`), the
server's rules on the server tests' recordings, fed frame by frame to web/vad.js in headless
Chromium (`tests.test_client_vad_rooms.run_room`):

- a knock, a dropped cup, a clap or a cough (`tests.room_sounds.TRANSIENTS`) over a Piper
  reply, with no echo in the microphone or with its echo 30 dB down, never fires the page (a
  barge-in for a sound that is not the person; the knocks and the cup fired it at 190 ms);
- a short word said quickly (`tests.fast_speech`: espeak-ng at 280 words/min), with no reply
  and over one, fires it: a voiced candidate that ended after `minWordMs` (the server's
  `min_speech_ms`, 120) is judged whole, as the server's `ended_word_heard_whole` judges it
  (it never reached `minSpeechMs`, 200 ms, above the release level, and was dropped).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests import room_sounds as rs
from tests import speech_fixtures as fx
from tests.fast_speech import fast_speech
from tests.test_client_vad_rooms import fired, reply_16k, run_room

__all__ = ["run_room"]  # the fixture, used by name

ECHO_DELAY_MS = 150
"""The reply's echo reaches the microphone this late (output and input latency)."""

POSITIONS_MS = (1500, 3000, 4500)
"""Where the sound or word starts in the microphone, ms after the reply started playing."""


def scene(sound: np.ndarray, at_ms: int, echo_db: float | None, seed: int) -> np.ndarray:
    """8 s of microphone at 16 kHz: a -60 dBFS pink floor, the reply's echo `echo_db` (dB, None:
    none) `ECHO_DELAY_MS` late, and `sound` at `at_ms`."""
    mic = fx.with_noise_floor(np.zeros(8 * fx.RATE_HZ, np.float32),
                              np.random.default_rng(seed), -60.0)
    if echo_db is not None:
        echo = reply_16k() * 10.0 ** (echo_db / 20.0)
        delay = ECHO_DELAY_MS * fx.RATE_HZ // 1000
        mic[delay:][:echo.size] += echo[:mic.size - delay]
    mic[at_ms * fx.RATE_HZ // 1000:][:sound.size] += sound
    return mic


@pytest.mark.parametrize("echo_db", [None, -30.0], ids=["no echo", "echo -30 dB"])
@pytest.mark.parametrize("kind", sorted(rs.TRANSIENTS))
async def test_a_transient_over_a_reply_never_fires_the_page(run_room, kind: str,
                                                            echo_db: float | None) -> None:
    """The server tests' transient `kind` at -10 dBFS peak over a Piper reply, at three
    positions: the page's VAD never fires while the reply plays."""
    sound = rs.TRANSIENTS[kind](np.random.default_rng(3), -10.0)
    for seed, at_ms in enumerate(POSITIONS_MS):
        events = await run_room(scene(sound, at_ms, echo_db, seed), reply_16k(), play_from_ms=0)
        assert not [e for e in events if e["type"] == "fired" and e["playing"]], (at_ms, events)


@pytest.mark.parametrize("playing", [False, True], ids=["no reply", "over a reply"])
@pytest.mark.parametrize(("text", "voice"), [("Stop.", "en-us"), ("Hey.", "en-029")])
async def test_a_short_word_said_quickly_fires_the_page(run_room, text: str, voice: str,
                                                        playing: bool) -> None:
    """issue 24's tester's espeak-ng words at 280 words/min (146-264 ms of sound) at -6 dBFS
    peak, with no reply and over one (no echo and a -30 dB echo): the VAD fires within 300 ms
    of the voice's onset at every position. Before (as with `minWordMs` out of reach), never:
    the words end before `minSpeechMs` and are voiced too briefly for the stop-closure rule."""
    word = fx.at_peak_dbfs(fast_speech(text, "espeak", voice, 280), -6.0)
    onset_ms = fx.active_span_ms(word)[0]
    for echo_db in ((None, -30.0) if playing else (None,)):
        for seed, at_ms in enumerate(POSITIONS_MS):
            mic = scene(word, at_ms, echo_db, seed)
            reply = reply_16k() if playing else None
            times = fired(await run_room(mic, reply, play_from_ms=0))
            start = at_ms + onset_ms
            assert [t for t in times if start <= t <= start + 300], (echo_db, at_ms, times)
            assert not [t for t in times if t < start], (echo_db, at_ms, times)
    without = fired(await run_room(scene(word, 3000, None, 0), minWordMs=10_000))
    assert without == [], without
