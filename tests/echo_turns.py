"""A person's turn spoken over the reply's echo, as server VAD commits it and ASR reads it:
shared by tests/test_echo_suppression.py and benchmarks/bench_echo_transcripts.py.

The microphone is simulated as in tests/echo_microphone.py: the reply (Piper at 24 kHz) through a
room's echo path over its noise floor, appended every 40 ms with the playing position the
session would estimate, the reply paused as the page pauses it once the turn started.
"""

from __future__ import annotations

import functools

import numpy as np

from calibration.local_asr import LocalWhisperTranscriber, person_transcriber
from server.listening.echo import ECHO_TAIL_MS
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import UTTERANCE_TAIL_MS, TurnDetection
from server.listening.turn_events import SpeechStarted, SpeechStopped
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
    """The person's-turn ASR the server uses (`person_transcriber`: faster-whisper tiny.en,
    text only, one greedy decode: the same audio reads the same in every run)."""
    return person_transcriber()


def transcript(pcm16: bytes) -> list[str]:
    """The words (`tests.echo_room.words`) the server's ASR reads in `pcm16` (PCM16 LE mono at
    `OUTPUT_RATE_HZ`)."""
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0
    return words(whisper().transcribe_blocking(samples, OUTPUT_RATE_HZ))
