"""The microphone side of `duplex-demo talk`: a real-time gate and the barge-in detector.

`BargeInDetector` applies the page's barge-in rules (`web/vad.js`: speech held
`MIN_SPEECH_MS` = 200 ms stops the assistant; while the assistant plays, a higher bar and a
double-talk check keep its own voice leaking from the loudspeaker from stopping it) with the
server's detectors instead of a second copy of the page's energy VAD: the streaming Silero VAD
and the `TurnDetector` of `server.listening.vad` (its `echo_threshold` while playing), gated by
`server.listening.echo.EchoDetector`, which compares the microphone's band envelope with the
envelope of the reply audio handed to the speaker, at the position actually playing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import soxr

from server.listening.band_envelope import EchoReference
from server.listening.echo import EchoDetector
from server.listening.silero_vad import SAMPLE_RATE_HZ, SileroStreamingVad
from server.listening.turn_events import SpeechStarted
from server.listening.vad import TurnDetectionConfig, TurnDetector

MIN_SPEECH_MS = 200
"""Speech held this long stops the assistant: the page's `DEFAULT_VAD_CONFIG.minSpeechMs`
(`web/vad.js`)."""

GATE_SLACK_MS = 500
"""Audio a capture callback may deliver ahead of the wall clock before the gate drops it (ms):
more than any real device's block and scheduling jitter."""


class RealTimeGate:
    """Passes at most real time of captured audio, plus `GATE_SLACK_MS`.

    A device without a clock (ALSA's `null` PCM) delivers input as fast as the callback runs,
    hundreds of times real time; forwarding it would flood the server's rate limit and the VAD.
    A real microphone never runs ahead of the wall clock by more than its jitter, so nothing of
    its audio is dropped.

    Args:
        rate_hz: the capture rate.
        clock: monotonic seconds (a parameter for tests).
    """

    def __init__(self, rate_hz: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate_hz = rate_hz
        self._clock = clock
        self._start: float | None = None
        self._passed = 0
        self.dropped = 0

    def admit(self, frames: int) -> int:
        """How many of `frames` newly captured frames to keep (the rest are dropped and
        counted in `dropped`)."""
        now = self._clock()
        if self._start is None:
            self._start = now
        allowed = round((now - self._start + GATE_SLACK_MS / 1000) * self.rate_hz) - self._passed
        keep = max(0, min(frames, allowed))
        self._passed += keep
        self.dropped += frames - keep
        return keep


class BargeInDetector:
    """Tells when a person starts talking over the assistant.

    Feed the microphone in order (`feed`); it returns True on the piece where speech held
    `MIN_SPEECH_MS` while the assistant plays and does not look like its echo.

    Args:
        input_rate_hz: the capture rate (Hz).
    """

    def __init__(self, input_rate_hz: int) -> None:
        self._resampler = soxr.ResampleStream(input_rate_hz, SAMPLE_RATE_HZ, 1, dtype="float32")
        self._vad = SileroStreamingVad()
        self._turns = TurnDetector(TurnDetectionConfig(min_speech_ms=MIN_SPEECH_MS))
        self._echo = EchoDetector()
        self._turns.echo_gate = self._echo.is_echo

    def feed(self, pcm: np.ndarray, playing_ms: int | None,
             reference: EchoReference | None) -> bool:
        """Take the next microphone samples (1-D float32 at the input rate).

        Args:
            pcm: the samples.
            playing_ms: position (ms) of the reply playing now, None when none plays.
            reference: the envelope of that reply's audio (`EchoReference`, None: none).

        Returns:
            True when a speech start completed in this piece while a reply plays.
        """
        pcm_16k = self._resampler.resample_chunk(np.asarray(pcm, dtype=np.float32))
        self._echo.feed(pcm_16k, playing_ms, reference)
        self._turns.assistant_playing = playing_ms is not None
        started = False
        for window in self._vad.feed_windows(pcm_16k):
            event = self._turns.process(window.end_ms, window.probability, window.level_dbfs)
            started |= isinstance(event, SpeechStarted) and playing_ms is not None
        return started
