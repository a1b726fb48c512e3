"""Echo suppression for ASR (server/listening/echo_suppression.py, through
`InputSpeechDetector.without_echo`): a turn committed over the reply's echo starts a little
before the person's voice, on the echo; the audio handed to ASR has that echo taken down and is
the committed audio unchanged from the voice on, and unchanged without an echo.

The microphone is simulated as in tests/echo_microphone.py: the reply (Piper at 24 kHz) through a
room's echo path over its noise floor, appended every 40 ms with the playing position the
session would estimate, the reply paused as the page pauses it once the turn started.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from calibration.local_asr import LocalWhisperTranscriber
from server.listening.echo import ECHO_TAIL_MS
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import UTTERANCE_TAIL_MS, TurnDetection
from server.listening.turn_events import SpeechStarted, SpeechStopped
from server.listening.vad import VOICE_ONSET_MARGIN_MS
from server.speech.resampling import resample
from tests import speech_fixtures as fx
from tests.echo_microphone import (
    APPEND_MS,
    LEAD_MS,
    OUTPUT_RATE_HZ,
    REPLY,
    reference,
    reply_24k,
)
from tests.echo_room import Room, words

PAUSE_REACTION_MS = 100
"""From the append that started the turn to the page's loudspeaker falling silent (the
server's `response.paused`, the page's next 20 ms tick; bench_echo measured 60-120 ms)."""


def paused_turn(person: np.ndarray, person_at_ms: float, room: Room,
                reply_text: str = REPLY) -> tuple[bytes, int, bytes]:
    """The committed turn of `person` (16 kHz) speaking at `person_at_ms` over the echo of the
    reply `reply_text` in `room`, the page pausing the reply `PAUSE_REACTION_MS` after the
    server VAD's `speech_started` (so the echo overlaps the first words, as in bench_echo).
    Returns the committed PCM16 at 24 kHz, its input-timeline start (ms) and the
    echo-suppressed audio as PCM16 (`InputSpeechDetector.without_echo`; the raw audio when it
    found no echo)."""
    reply = reply_24k(reply_text)
    reply_length_ms = reply.size * 1000 / OUTPUT_RATE_HZ
    stop_ms = None
    for _ in range(2):  # the first pass finds the turn's start, the second pauses the reply
        played_ms = reply_length_ms if stop_ms is None else stop_ms - LEAD_MS
        echo_24k = reply[:round(played_ms * OUTPUT_RATE_HZ / 1000)]
        echo = np.convolve(echo_24k, room.impulse_response())
        lead = (LEAD_MS + room.echo_lag_ms) * OUTPUT_RATE_HZ // 1000
        total = round((LEAD_MS + reply_length_ms + 2500) * OUTPUT_RATE_HZ / 1000)
        mic = np.zeros(total, dtype=np.float32)
        mic[lead:lead + echo.size] += echo[:total - lead]
        mic += room.noise(total * 1000 / OUTPUT_RATE_HZ + 10)[:total]
        person_24k = resample(person, fx.RATE_HZ, OUTPUT_RATE_HZ)
        at = round(person_at_ms * OUTPUT_RATE_HZ / 1000)
        mic[at:at + person_24k.size] += person_24k
        pcm16 = fx.to_pcm16(np.clip(mic, -1.0, 1.0))
        detector = InputSpeechDetector(TurnDetection(), OUTPUT_RATE_HZ, 0)
        recorded, rng = reference(reply_text), np.random.default_rng(2)
        step = OUTPUT_RATE_HZ * 2 * APPEND_MS // 1000
        started = stopped = None
        for start in range(0, len(pcm16), step):
            end_ms = (start + step) * 1000 // (OUTPUT_RATE_HZ * 2)
            elapsed_ms = end_ms - LEAD_MS
            position = (None if not 0 <= elapsed_ms <= played_ms + ECHO_TAIL_MS else
                        int(np.clip(elapsed_ms + rng.uniform(-20.0, 20.0), 0, played_ms)))
            playing = position is not None and elapsed_ms <= played_ms
            for event in detector.feed(pcm16[start:start + step], playing, position, recorded):
                if isinstance(event, SpeechStarted) and started is None:
                    started = event.audio_start_ms
                    stop_ms = end_ms + PAUSE_REACTION_MS if stop_ms is None else stop_ms
                elif isinstance(event, SpeechStopped) and stopped is None:
                    stopped = event.audio_end_ms
            if stopped is not None:
                break
        assert started is not None and stopped is not None
    first, last = (ms * OUTPUT_RATE_HZ * 2 // 1000 for ms in (started, stopped + UTTERANCE_TAIL_MS))
    committed = pcm16[first:last]
    suppressed = detector.without_echo(committed, started)
    return committed, started, committed if suppressed is None else fx.to_pcm16(suppressed)


@functools.cache
def whisper() -> LocalWhisperTranscriber:
    """The person's-turn ASR the server uses: faster-whisper tiny.en, text only."""
    return LocalWhisperTranscriber(word_timestamps=False)


def transcript(pcm16: bytes) -> list[str]:
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0
    return words(whisper().transcribe_blocking(samples, OUTPUT_RATE_HZ))


@pytest.mark.parametrize("text", ["Hold on a second.", "Excuse me, how much does it cost?"])
def test_the_echo_in_front_of_the_voice_onset_is_suppressed_for_asr(text: str) -> None:
    """bench_echo's kind (espeak-ng en-us at -12 dBFS peak over the reply's -30 dB echo, 150 ms
    late, over -60 dBFS pink noise, the reply paused once the turn started): the turn's audio
    starts a little before the person's voice, on the echo, and tiny.en wrote "Oh, not
    American." for "Hold on a second." in 3 of 12 protocol runs (the echo in front of the soft
    "h"). The audio handed to ASR (`InputSpeechDetector.without_echo`) has that echo at least
    6 dB down (measured: 9-20 dB) and, from the voice on, is the committed audio unchanged;
    its transcript is the sentence."""
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
    assert np.max(np.abs(quiet[voice] - raw[voice])) <= 2 / 32768
    assert transcript(suppressed) == words(text)


def test_without_echo_the_audio_for_asr_is_the_committed_audio() -> None:
    """The same person with no echo in the room (a headset): nothing to suppress."""
    person = fx.at_peak_dbfs(fx.speech("Hold on a second.", "espeak", "en-us"), -12.0)
    committed, _, suppressed = paused_turn(person, LEAD_MS + 1500, Room(None, 150, -60.0))
    assert suppressed == committed
