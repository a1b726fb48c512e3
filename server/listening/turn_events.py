"""The events of turn detection (`server.listening.vad.TurnDetector`): a turn starts, may be
ending (a gap, a pause), resumes, and stops. Positions are ms on the input timeline (since the
microphone stream started), as OpenAI Realtime's `input_audio_buffer.speech_started` /
`speech_stopped` give them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """A turn began: `audio_start_ms` is the speech start minus the prefix padding (>= 0), ms
    on the input timeline (`input_audio_buffer.speech_started.audio_start_ms`)."""

    audio_start_ms: int


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    """A turn ended: `audio_end_ms` is the end of its last speech window, ms on the input
    timeline (`input_audio_buffer.speech_stopped.audio_end_ms`); `forced`: it did not pause
    but ran into `TurnDetectionConfig.max_turn_ms` (`audio_end_ms` is then the end of the
    window that reached it)."""

    audio_end_ms: int
    forced: bool = False


@dataclass(frozen=True, slots=True)
class SpeechPaused:
    """A turn may be ending: the non-speech after its last speech window reached
    `TurnDetectionConfig.pause_ms`, sooner than `silence_duration_ms`. `audio_end_ms` is the
    end of that window, ms on the input timeline: the `SpeechStopped.audio_end_ms` to come if
    no speech follows. Lets the caller start work on the utterance (its transcription) while
    the rest of the silence is awaited."""

    audio_end_ms: int


@dataclass(frozen=True, slots=True)
class SpeechGap:
    """The non-speech after a turn's last speech window reached `TurnDetectionConfig.gap_ms`,
    sooner than `pause_ms`: `audio_end_ms` is the end of that window, ms on the input
    timeline (the `SpeechPaused` and `SpeechStopped` to come if no speech follows). Lets the
    caller decide early what a short utterance was (a backchannel over a paused reply)."""

    audio_end_ms: int


@dataclass(frozen=True, slots=True)
class SpeechResumed:
    """Speech came back after a reported `SpeechGap` or `SpeechPaused`: work started on the
    utterance up to that pause no longer covers all of it. `audio_end_ms` is the end of the
    speech window that resumed it, ms on the input timeline."""

    audio_end_ms: int


TurnEvent = SpeechStarted | SpeechGap | SpeechPaused | SpeechResumed | SpeechStopped
