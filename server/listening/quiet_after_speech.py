"""Where the person's sound really ended, and whether anything was heard since: the silence a
paused reply's backchannel waits for before the reply resumes.

Silero's verdict lags the sound at both ends of a silence. At the end, it keeps scoring the
first window of digital silence as speech (0.93 after espeak-ng en-us "Okay.", 0.66 after
en-gb-scotland's, 0.44 over Piper's last -68 dBFS window: the hysteresis keeps all three), so
server VAD's speech end can lie a window (32 ms) after the sound's; at the start of the next
word, the first window of "Stop"'s /s/ is already 18 dB under the loudest of "Okay" (-31 to -35
dBFS) while Silero gives it 0.18-0.42, and it crosses the hysteresis level (0.35) a window
later, and is judged only once its whole 32 ms window has come out of the 16 kHz resampler
(30-60 ms behind the input). Level frames of 10 ms on the input itself see both edges
sooner: the silence after a backchannel counts from the end of the last frame within
`SOUND_BELOW_SPEECH_DB` of the utterance's loudest (and over the room's floor, `room_floor`), and
a frame as loud as that after it restarts the count, before Silero calls it speech.
Measured on the tester's "Okay. Stop." and constructed backchannel-gap-interruption pairs in
Piper and six espeak-ng voices (`tests/test_resume_silence.py`).

Sans-I/O: fed by `server.listening.input_speech.InputSpeechDetector`.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np

from server.listening.room_floor import floor_dbfs as floor_dbfs_over_room

FRAME_MS = 10
"""Length of one level frame (ms)."""

SOUND_BELOW_SPEECH_DB = 30.0
"""A level frame (RMS) within this of the loudest speech window of the last `SPEECH_MEMORY_MS`
holds the person's sound (dB). Measured on `benchmarks/bench_backchannel.py`'s backchannels
(Piper and four espeak-ng voices): the end of a word's audible decay lies 26-43 dB under its
loudest window (Piper "Okay." -33 then -54), the first window of a next word's onset 15-22 dB
under it; digital silence and a -60 dBFS pink floor lie 45 dB or more under it."""

SPEECH_MEMORY_MS = 3000
"""How long (ms) a speech window's level sets the loudness the sound is measured against."""

ONSET_QUIET_MS = 150
"""Quiet (ms) before a run of sound that makes it an onset (`QuietAfterSpeech.onset_ms`): a
next word after a pause, not a room that the level rule hears as sound all along (babble
at -45 dBFS RMS over a reply, before server VAD has learned the room: 30 dB under the person)."""


@dataclass(frozen=True, slots=True)
class HeardSound:
    """How far the input was judged for sound, and where the person's sound was: positions (ms)
    on the session's input timeline (`QuietAfterSpeech`'s attributes of the same names; the
    two sound positions None when unknown)."""

    heard_ms: int
    sound_end_ms: int | None = None
    onset_ms: int | None = None


class QuietAfterSpeech:
    """The end of the newest 10 ms frame that held the person's sound (`sound_end_ms`), and how
    far the frames reach (`heard_ms`), on the input timeline from the first sample fed.

    A frame holds sound when its RMS level is at most `SOUND_BELOW_SPEECH_DB` under the loudest
    window Silero scored as speech in the last `SPEECH_MEMORY_MS` (`speech_window`), and at
    least the person's floor over the room (`server.listening.room_floor.floor_dbfs`: the room's
    babble or TV is not the person starting again) when one is known. Before any speech
    window, no frame holds sound.

    Attributes:
        sound_end_ms: end (ms) of the newest frame that held sound, None before the first.
        onset_ms: start (ms) of the newest run of sound that followed at least
            `ONSET_QUIET_MS` of quiet, None before the first.
        heard_ms: end (ms) of the newest complete frame fed.

    Args:
        sample_rate_hz: rate of the samples `frames` takes (the session's input rate).
    """

    def __init__(self, sample_rate_hz: int) -> None:
        self._frame = sample_rate_hz * FRAME_MS // 1000
        self.sound_end_ms: int | None = None
        self.onset_ms: int | None = None
        self.heard_ms = 0
        self._speech: collections.deque[tuple[int, float]] = collections.deque()
        self._pending = np.zeros(0, dtype=np.float32)

    def speech_window(self, end_ms: int, level_dbfs: float) -> None:
        """Silero scored the window ending at `end_ms` (ms) as speech; its RMS level (dBFS)."""
        memory = self._speech
        while memory and memory[-1][1] <= level_dbfs:
            memory.pop()
        memory.append((end_ms, level_dbfs))

    def frames(self, samples: np.ndarray, room_dbfs: float | None) -> None:
        """Take the next float samples at the input rate (following those fed before), with
        the room's loud level (dBFS, None while unknown); a frame's last samples may wait for
        the next call."""
        samples = np.concatenate([self._pending, samples.astype(np.float32, copy=False)])
        whole = samples.size // self._frame * self._frame
        self._pending = samples[whole:]
        if not whole:
            return
        power = np.mean(np.square(samples[:whole].reshape(-1, self._frame), dtype=np.float64),
                        axis=1)
        levels = 10.0 * np.log10(np.maximum(power, 1e-12))
        ends = self.heard_ms + FRAME_MS * np.arange(1, levels.size + 1)
        self.heard_ms = int(ends[-1])
        memory = self._speech
        while memory and memory[0][0] <= self.heard_ms - SPEECH_MEMORY_MS:
            memory.popleft()
        if not memory:
            return
        floor_dbfs = memory[0][1] - SOUND_BELOW_SPEECH_DB
        room_floor_dbfs = floor_dbfs_over_room(room_dbfs)
        if room_floor_dbfs is not None:
            floor_dbfs = max(floor_dbfs, room_floor_dbfs)
        for index in np.flatnonzero(levels >= floor_dbfs):
            start_ms = int(ends[index]) - FRAME_MS
            if self.sound_end_ms is None or start_ms - self.sound_end_ms >= ONSET_QUIET_MS:
                self.onset_ms = start_ms
            self.sound_end_ms = start_ms + FRAME_MS
