"""Effects: what the sans-I/O session asks its asyncio driver (`server.connection`) to do."""

from __future__ import annotations

from dataclasses import dataclass, field

from server.protocol import TurnDetection


@dataclass(frozen=True, slots=True)
class StartGeneration:
    """Effect: run the responder and TTS for `response_id` (after calibration is ready)."""

    response_id: str


@dataclass(frozen=True, slots=True)
class CancelGeneration:
    """Effect: stop generating `response_id`; its late output is dropped anyway."""

    response_id: str


@dataclass(frozen=True, slots=True)
class WakeSender:
    """Effect: new audio may be sendable (output queued, ACK arrived, or a response ended)."""


@dataclass(frozen=True, slots=True)
class DetectSpeech:
    """Effect: run server VAD over newly appended microphone audio (PCM16 LE mono).

    Attributes:
        pcm16: the appended bytes at the session's input rate.
        settings: the session's `server_vad` settings in force.
        position_ms: input-timeline position (ms) of the first appended sample.
        assistant_playing: an assistant reply is still being played (raise the VAD threshold
            against the assistant's own voice leaking into the microphone).
    """

    pcm16: bytes = field(repr=False)
    assistant_playing: bool
    settings: TurnDetection
    position_ms: int


@dataclass(frozen=True, slots=True)
class Transcribe:
    """Effect: transcribe a committed user utterance (PCM16 LE mono at the input rate)."""

    item_id: str
    pcm16: bytes = field(repr=False)


Effect = StartGeneration | CancelGeneration | WakeSender | DetectSpeech | Transcribe
"""Everything the session asks its asyncio driver to do."""
