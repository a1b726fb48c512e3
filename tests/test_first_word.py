"""Issue 24, failing input 2: a turn's audio starts at the person's first voiced onset, not
where the VAD triggered. Utterances that open with a short word and a pause ("Wait, stop, ...":
"Wait" is too short to start a turn and the "st" of "stop" scores under the threshold), in
Piper and espeak-ng voices, through the server's VAD (Silero + `TurnDetector`) with no reply
playing, over a -60 dBFS pink floor."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from calibration.local_asr import LocalWhisperTranscriber
from server.listening.silero_vad import SileroStreamingVad
from server.listening.turn_events import SpeechStarted
from server.listening.vad import TurnDetector
from tests import speech_fixtures as fx
from tests.echo_room import words

LEAD_MS = 1000
"""Silence (the noise floor) before the utterance."""

OPENERS = ["Wait, stop, I have a question.", "Wait, one more thing.", "No, that's wrong.",
           "Hold on, what time is it?", "Okay, tell me more.", "Sorry, say that again.",
           "Yes, please go on.", "Well, I am not sure.", "Look, that is too expensive.",
           "So, what happens next?", "Stop, that is enough.", "Right, and then what?"]
"""Utterances that open with a short word and a pause."""

VOICES = [("piper", None), ("espeak", "en-us")]


def turn(text: str, engine: str, voice: str | None) -> tuple[list[SpeechStarted], np.ndarray,
                                                               float]:
    """The turns the server VAD starts on `text` (-6 dBFS peak) after `LEAD_MS`, the 16 kHz
    microphone, and the voice onset (ms, first sample at -40 dBFS)."""
    person = fx.at_peak_dbfs(fx.speech(text, engine, voice), -6.0)
    mic = fx.with_noise_floor(fx.place(person, LEAD_MS, 1500), np.random.default_rng(1), -60.0)
    vad, detector = SileroStreamingVad(), TurnDetector()
    started = []
    for start in range(0, mic.size, 640):  # 40 ms appends
        for window in vad.feed_windows(mic[start:start + 640]):
            event = detector.process(window.end_ms, window.probability, window.level_dbfs)
            if isinstance(event, SpeechStarted):
                started.append(event)
    return started, mic, LEAD_MS + fx.active_span_ms(person)[0]


@pytest.mark.parametrize(("engine", "voice"), VOICES)
@pytest.mark.parametrize("text", OPENERS)
def test_the_turn_starts_before_the_first_word(text: str, engine: str, voice: str | None) -> None:
    """24 utterances: one turn, its audio from at most the prefix padding before the first
    word's onset, never after it. Before, Piper "Wait, stop, I have a question." started
    313 ms after "Wait"'s onset (84 ms after it ended)."""
    started, _, onset_ms = turn(text, engine, voice)
    assert len(started) == 1
    assert onset_ms - 400 <= started[0].audio_start_ms <= onset_ms


@functools.cache
def whisper() -> LocalWhisperTranscriber:
    return LocalWhisperTranscriber(word_timestamps=False)


@pytest.mark.parametrize("text", ["Wait, stop, I have a question.", "Wait, one more thing."])
def test_asr_hears_the_first_word(text: str) -> None:
    """The issue's examples (Piper): tiny.en on the turn's audio from its start hears the
    first word ("Stop, I have a question." before)."""
    started, mic, _ = turn(text, "piper", None)
    audio = mic[started[0].audio_start_ms * fx.RATE_HZ // 1000:]
    heard = words(whisper().transcribe_blocking(audio, fx.RATE_HZ))
    assert heard[:1] == words(text)[:1], heard
