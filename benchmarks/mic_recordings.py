"""The microphone audio of `bench_microphone`: generated recordings (people in Piper and espeak-ng
voices, noise bursts and coughs, the assistant's echo) laid out in one 16 kHz track with their
segments on its timeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tests import speech_fixtures

MARKER_AT_MS = 500.0
MARKER_MS = 60.0
"""A 60 ms white-noise burst at -6 dBFS peak, 500 ms into each browser WAV: below the VAD's
minimum duration, its onset event puts WAV time 0 on the page clock (+-10 ms frames)."""
LEAD_MS = 1500.0
"""Silence after the marker, before the first recording."""
SPEECH_GAP_MS = 4000.0
"""Silence after each utterance: server VAD end (500 ms), transcription and the reply's first
audio must fit in it, so that the next utterance comes while the reply plays."""
NOISE_GAP_MS = 1500.0
"""Silence after each noise / echo recording."""
ECHO_LEVELS_DBFS = (-36.0, -30.0, -12.0)
"""Levels of the assistant's echo: its reply scaled so that the reply's peak is at this dBFS
(-36: a loudspeaker's residual after echo cancellation, as in tests/test_browser_microphone.py;
-30: the client's level guard holds it; -12: only its envelope guard and the server's echo
detector can tell it from the person)."""
ECHO_RECORDING_MS = 12_000.0
"""Length of each browser echo recording: one browser run each, the microphone hearing the
reply from the moment it is switched on (an echo never starts in the middle of a reply)."""
BROWSER_ECHO_DELAY_MS = 100.0
"""Browser echo recordings: at WAV time t they carry the reply's audio at t - this. The reply
has rendered a few tens of ms when the page's WAV time 0 passes, so the echo lags what plays
by that much more (table 2 shows the measured lag): output + input latency and the room, as
a loudspeaker's echo (it can never lead the playback)."""
NOISE_BURSTS = 18
"""Noise bursts / coughs per run (speech_fixtures.short_bursts, 50-180 ms, below both VADs'
minimum speech durations)."""
SPEECH_SENTENCES = (
    "Wait, what time does it open?",
    "Sorry, what time does it open?",
    "Hold on, I have a quick question.",
    "Stop, that is not what I asked.",
    "Can you slow down a little?",
    "Actually, I need the weekend hours.",
    "Excuse me, how much does it cost?",
    "No, I meant the other museum.",
    "Hang on, is it open on Sunday?",
    "Okay, but where do I park the car?",
    "Just a second, let me grab a pen.",
    "Tell me about the weather instead.",
    "Really? I thought it was closed today.",
    "Never mind, what about the train?",
    "Wait a moment, which floor is it on?",
    "Could you tell me about the planets?",
    "Hmm, that sounds too expensive for me.",
    "Please skip ahead to the opening hours.",
    "Sorry to interrupt, but I am in a hurry.",
    "What was the name of that street?",
    "Okay, thanks, that is enough for now.",
    "Is there a discount for students?",
    "Tell me how bread rises.",
    "Wait, wait, what was the address?",
)
"""Things people say over an assistant: even indices in the Piper voice, odd ones in the
espeak-ng voices of speech_fixtures.ESPEAK_VOICES in turn."""
BURST_KINDS = ("white noise", "pink noise", "cough")
"""The order in which speech_fixtures.short_bursts cycles its makers."""


@dataclass(frozen=True, slots=True)
class Recording:
    """One generated microphone recording: `kind` ("piper", "espeak en-us", "cough", "echo
    -30 dBFS", ...), the sentence it says ("" for noise) and 16 kHz float32 PCM. An echo
    recording (`echo_dbfs` set) is silence until `page_run` fills it with the part of the
    reply that plays BROWSER_ECHO_DELAY_MS before its place in the track, scaled to
    `echo_dbfs` peak."""

    kind: str
    text: str
    pcm: np.ndarray
    echo_dbfs: float | None = None


@dataclass(frozen=True, slots=True)
class Segment:
    """A recording placed in a microphone track: first and last sample at -40 dBFS or louder,
    ms on the track's timeline (speech_fixtures.active_span_ms)."""

    recording: Recording
    onset_ms: float
    offset_ms: float


def speech_recordings(count: int = len(SPEECH_SENTENCES)) -> list[Recording]:
    """The first `count` SPEECH_SENTENCES, synthesized (Piper / espeak-ng voices in turn)."""
    voices = speech_fixtures.ESPEAK_VOICES
    recordings = []
    for index, text in enumerate(SPEECH_SENTENCES[:count]):
        if index % 2 == 0:
            recordings.append(Recording("piper", text, speech_fixtures.speech(text)))
        else:
            voice = voices[(index // 2) % len(voices)]
            recordings.append(Recording(f"espeak {voice}", text,
                                        speech_fixtures.speech(text, "espeak", voice)))
    return recordings


def noise_recordings(seed: int) -> list[Recording]:
    """NOISE_BURSTS seeded white / pink noise bursts and coughs of 50-180 ms."""
    bursts = speech_fixtures.short_bursts(seed, count=NOISE_BURSTS, max_ms=180.0)
    return [Recording(BURST_KINDS[i % len(BURST_KINDS)], "", pcm) for i, pcm in enumerate(bursts)]


def echo_recording(dbfs: float) -> Recording:
    """An echo placeholder of ECHO_RECORDING_MS at `dbfs` peak."""
    return Recording(f"echo {dbfs:.0f} dBFS", "", speech_fixtures.silence(ECHO_RECORDING_MS),
                     dbfs)


def fill_echoes(track: np.ndarray, segments: Sequence[Segment], reply: np.ndarray) -> None:
    """Write the reply's audio (16 kHz) into the echo segments of `track`, in place: at track
    position t the reply's position t - BROWSER_ECHO_DELAY_MS. Scaled so that the reply's peak
    is at the segment's `echo_dbfs`."""
    peak = float(np.max(np.abs(reply)))
    rate = speech_fixtures.RATE_HZ
    delay = round(BROWSER_ECHO_DELAY_MS * rate / 1000)
    for segment in segments:
        dbfs = segment.recording.echo_dbfs
        if dbfs is None:
            continue
        start, end = (round(ms * rate / 1000) for ms in (segment.onset_ms, segment.offset_ms))
        first = max(start, delay)  # before the delay, the reply had not reached the microphone
        part = reply[first - delay:min(end - delay, reply.size)] * (10.0 ** (dbfs / 20.0) / peak)
        track[first:first + part.size] = part


def mic_track(recordings: Sequence[Recording], lead_ms: float, gap_ms: float,
              marker: bool) -> tuple[np.ndarray, list[Segment]]:
    """One 16 kHz track: [marker at MARKER_AT_MS] lead silence, then each recording followed by
    `gap_ms` of silence; returns it with the recordings' segments on its timeline."""
    rate = speech_fixtures.RATE_HZ
    parts = [speech_fixtures.silence(lead_ms)]
    if marker:
        burst = speech_fixtures.white_noise_burst(np.random.default_rng(0), MARKER_MS, -6.0)
        parts = [speech_fixtures.silence(MARKER_AT_MS), burst, speech_fixtures.silence(lead_ms)]
    position = sum(part.size for part in parts)
    segments = []
    for recording in recordings:
        if recording.echo_dbfs is None:
            onset, offset = speech_fixtures.active_span_ms(recording.pcm)
        else:
            onset, offset = 0.0, recording.pcm.size * 1000.0 / rate
        start_ms = position * 1000.0 / rate
        segments.append(Segment(recording, start_ms + onset, start_ms + offset))
        gap = speech_fixtures.silence(gap_ms)
        parts += [recording.pcm, gap]
        position += recording.pcm.size + gap.size
    return np.concatenate(parts).astype(np.float32), segments
