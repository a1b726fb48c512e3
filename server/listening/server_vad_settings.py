"""The settings of server VAD turn detection and the input-audio margins its turns use.

`TurnDetection` is OpenAI Realtime's `server_vad` object as a session holds it; the constants
say how much input audio a turn keeps around what the VAD reported. Imported by the protocol
core (which parses and applies the settings) and by the detectors here (which run them).
"""

from __future__ import annotations

from dataclasses import dataclass

SPEECH_DETECTION_LATENCY_MS = 1000
"""Input audio kept beyond the prefix padding before the start of the newest append while no
speech is detected: server VAD reports a speech start up to its minimum speech duration (250 ms)
plus a few 32 ms windows after the onset, and the committed utterance must still reach back to
the onset minus the padding. Counted from where the VAD's input ends before the append, not from
the end of the buffer, so an append of any size is seen whole by the VAD first."""

UTTERANCE_TAIL_MS = 300
"""Audio committed for transcription after a speech stop's `audio_end_ms`: Silero scores a
final unvoiced consonant ("t", "s") as non-speech up to about 190 ms after the last speech
window (measured in tests/test_vad.py), and the transcript should keep it. Server VAD also
reports a pause (`server.listening.vad.SpeechPaused`) once the silence reaches this tail, when the
audio a commit would take is complete (`Session.on_speech_paused`)."""

DECISION_TAIL_MS = 150
"""Silence after a turn's speech at which server VAD reports a gap
(`server.listening.vad.SpeechGap`) and a turn deciding a paused reply is transcribed for that
decision, with this much audio after its speech end (`InputTurns.decide`): a backchannel
then resumes the reply 150 ms sooner than at `UTTERANCE_TAIL_MS`. Measured on
`benchmarks/bench_backchannel.py`'s recordings (tails of 100, 150, 200 ms on the audio server
VAD prepares, tiny.en): all 44 decisions as with 300 ms, and the words of 45 of 50 recordings
(the rest differ in punctuation or a murmur's spelling; benchmarks/README.md); a bench run
with it: the pause -> resume gap without the transcription 492 -> 314 ms at p50. A turn that
is cut is committed with the whole `UTTERANCE_TAIL_MS`, for a final unvoiced consonant, and
transcribed again when anything audible follows the decision's audio."""


@dataclass(frozen=True, slots=True)
class TurnDetection:
    """`session.audio.input.turn_detection` of type `server_vad` (OpenAI Realtime fields).

    Attributes:
        threshold: speech probability (0-1) above which Silero VAD counts a 32 ms window as speech.
        prefix_padding_ms: audio kept before the detected speech start.
        silence_duration_ms: silence that ends an utterance.
        create_response: answer each transcribed utterance automatically.
        interrupt_response: a speech start interrupts an assistant reply still playing.
    """

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    create_response: bool = True
    interrupt_response: bool = True

    def as_wire(self) -> dict[str, object]:
        """The settings as OpenAI Realtime's `turn_detection` object (`type` `server_vad`)."""
        return {"type": "server_vad", "threshold": self.threshold,
                "prefix_padding_ms": self.prefix_padding_ms,
                "silence_duration_ms": self.silence_duration_ms,
                "create_response": self.create_response,
                "interrupt_response": self.interrupt_response}
