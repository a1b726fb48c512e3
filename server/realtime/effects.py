"""Effects: what the sans-I/O session asks its asyncio driver (`server.connection`) to do."""

from __future__ import annotations

from dataclasses import dataclass, field

from server.listening.server_vad_settings import TurnDetection


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
        response_id: the reply being played (or whose playback just ended: its echo may
            still be arriving), None when none is (`playback_ms` is then None).
        playback_ms: the position in that reply (ms) estimated to be playing when the append
            arrived (`ReplyPlayback.position_ms`), or None; the echo detector compares the
            microphone with the reply's audio around it.
    """

    pcm16: bytes = field(repr=False)
    assistant_playing: bool
    settings: TurnDetection
    position_ms: int
    response_id: str | None
    playback_ms: int | None


@dataclass(frozen=True, slots=True)
class Transcribe:
    """Effect: transcribe a committed user utterance (PCM16 LE mono at the input rate).

    Attributes:
        item_id: the user item awaiting the transcript (`TurnTaking.on_transcription`).
        pcm16: the committed audio.
        audio_start_ms: input-timeline position (ms) of its first sample (the driver
            suppresses the reply's echo it knows there before transcribing).
        prepared: the audio is exactly that of the latest `PrepareTranscription` (same item,
            same bytes): use that transcription instead of starting another. When False, the
            driver drops any prepared transcription.
        transcript: the transcript is already known (the decision's, whose audio is this
            audio up to its silence, `InputTurns.decided`): hand it over, transcribe nothing.
    """

    item_id: str
    pcm16: bytes = field(repr=False)
    audio_start_ms: int
    prepared: bool = False
    transcript: str | None = None


@dataclass(frozen=True, slots=True)
class PrepareTranscription:
    """Effect: start transcribing the audio a server VAD turn would commit if it ended now
    (speculative: a `Transcribe` with `prepared` may claim the result later; nothing is
    reported for it otherwise). Replaces any earlier prepared transcription.

    Attributes:
        item_id: the pending item of the turn in progress.
        pcm16: PCM16 LE mono at the input rate, [speech start, pause end + utterance tail).
        audio_start_ms: input-timeline position (ms) of its first sample.
    """

    item_id: str
    pcm16: bytes = field(repr=False)
    audio_start_ms: int


@dataclass(frozen=True, slots=True)
class DecideTranscription:
    """Effect: transcribe the utterance of a server VAD turn that decides a paused reply, up
    to its speech gap (`TurnTaking.on_decision_transcription` gets the transcript). Runs beside
    any `PrepareTranscription`; each runs to its end, and the core ignores the result of one
    whose turn spoke on after its gap.

    Attributes:
        item_id: the pending item of the turn.
        pcm16: PCM16 LE mono at the input rate, [speech start, speech end + decision tail).
        audio_start_ms: input-timeline position (ms) of its first sample.
        audio_end_ms: the speech end (ms on the input timeline) the gap was reported at.
    """

    item_id: str
    pcm16: bytes = field(repr=False)
    audio_start_ms: int
    audio_end_ms: int


@dataclass(frozen=True, slots=True)
class DiscardTranscription:
    """Effect: drop the prepared transcription of `item_id`: its turn will not be committed
    (the input buffer was cleared, turn detection changed)."""

    item_id: str


@dataclass(frozen=True, slots=True)
class PredictTurnEnd:
    """Effect (`semantic_vad`): run the end-of-turn model (`server.listening.smart_turn`) on a
    turn's audio up to its pause; `TurnTaking.on_turn_end_probability` gets the probability.

    Attributes:
        item_id: the pending item of the turn.
        pcm16: PCM16 LE mono at the input rate, [speech start, pause end + utterance tail).
        audio_end_ms: the speech end (ms on the input timeline) the pause was reported at.
    """

    item_id: str
    pcm16: bytes = field(repr=False)
    audio_end_ms: int


@dataclass(frozen=True, slots=True)
class EndTurn:
    """Effect (`semantic_vad`): the turn whose speech ended at `audio_end_ms` (ms on the input
    timeline) is judged finished: the VAD stops it (`speech_stopped`) once its silence reaches
    `min_silence_ms`, unless speech comes back first."""

    audio_end_ms: int
    min_silence_ms: int


Effect = (StartGeneration | CancelGeneration | WakeSender | DetectSpeech | Transcribe
          | PrepareTranscription | DecideTranscription | DiscardTranscription
          | PredictTurnEnd | EndTurn)
"""Everything the session asks its asyncio driver to do."""
