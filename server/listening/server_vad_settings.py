"""The settings of server VAD turn detection and the input-audio margins its turns use.

`TurnDetection` is OpenAI Realtime's `server_vad` or `semantic_vad` object as a session holds
it; the constants say how much input audio a turn keeps around what the VAD reported.
Imported by the protocol core (which parses and applies the settings) and by the detectors
here (which run them).
"""

from __future__ import annotations

from dataclasses import dataclass

SPEECH_DETECTION_LATENCY_MS = 1000
"""Input audio kept beyond the prefix padding before the start of the newest append while no
speech is detected: server VAD reports a speech start up to its minimum speech duration (120 ms;
200 ms while a reply plays) plus a few 32 ms windows after the onset, and the committed
utterance must still reach back to the onset minus the padding. Counted from where the VAD's
input ends before the append, not from the end of the buffer, so an append of any size is seen
whole by the VAD first."""

UTTERANCE_TAIL_MS = 300
"""Audio committed for transcription after a speech stop's `audio_end_ms`: Silero scores a
final unvoiced consonant ("t", "s") as non-speech up to about 190 ms after the last speech
window (measured in tests/test_vad.py), and the transcript should keep it. Server VAD also
reports a pause (`server.listening.turn_events.SpeechPaused`) once the silence reaches this
tail, when the audio a commit would take is complete (`TurnTaking.on_speech_paused`)."""

DECISION_TAIL_MS = 150
"""Silence after a turn's speech at which server VAD reports a gap
(`server.listening.turn_events.SpeechGap`) and a turn deciding a paused reply is transcribed for
that decision, with this much audio after its speech end (`InputTurns.decide`): the verdict is
ready 150 ms sooner than at `UTTERANCE_TAIL_MS` (a cut comes then; a backchannel's resume waits
until the person is done, `server.realtime.pauses.RESUME_SILENCE_MS`, and the transcription
runs in that wait). Measured on
`benchmarks/bench_backchannel.py`'s recordings (tails of 100, 150, 200 ms on the audio server
VAD prepares, tiny.en): all 44 decisions as with 300 ms, and the words of 45 of 50 recordings
(the rest differ in punctuation or a murmur's spelling; benchmarks/README.md); a bench run
with it: the pause -> resume gap without the transcription 492 -> 314 ms at p50. A turn that
is cut is committed with the whole `UTTERANCE_TAIL_MS`, for a final unvoiced consonant, and
transcribed again when anything audible follows the decision's audio."""


EAGERNESS_MAX_WAIT_MS = {"low": 8000, "medium": 4000, "high": 2000, "auto": 4000}
"""`semantic_vad`: the longest silence (ms) after the person's speech before the turn ends,
per `eagerness` (OpenAI: "`low`, `medium`, and `high` have max timeouts of 8s, 4s, and 2s
respectively"; `auto` is `medium`). A turn judged finished sooner ends sooner
(`server.listening.semantic_vad`)."""

EAGERNESS_MIN_WAIT_MS = {"low": 2000, "medium": 1000, "high": 500, "auto": 1000}
"""`semantic_vad`: the shortest silence (ms) after the person's speech before a turn judged
finished ends: a quarter of the longest (500 ms at `high` is LiveKit's turn detector's
`min_endpointing_delay` default). Needed because tiny.en, given a phrase cut off at a pause,
often writes a word that was not said ("I want to book a table for" -> "... for it."), which
hides the unfinished phrase from `server.listening.semantic_vad.transcript_unfinished`, and the
end-of-turn model scores text-to-speech voices as finished at the end of any phrase (measured:
espeak-ng en-us with a 700 ms pause after "for": two turns, the first ended in that
pause)."""

IDLE_TIMEOUT_RANGE_MS = (5000, 30000)
"""Accepted `idle_timeout_ms` (OpenAI's OpenAPI spec: minimum 5000, maximum 30000)."""


@dataclass(frozen=True, slots=True)
class TurnDetection:
    """`session.audio.input.turn_detection` as a session holds it: OpenAI Realtime's
    `server_vad` or `semantic_vad` object (openai `types/realtime/
    realtime_audio_input_turn_detection.py`).

    Attributes:
        type: "server_vad" (a turn ends after `silence_duration_ms` of silence) or
            "semantic_vad" (a turn ends when the person is judged finished, at most
            `EAGERNESS_MAX_WAIT_MS[eagerness]` after their speech).
        threshold: speech probability (0-1) above which Silero VAD counts a 32 ms window as
            speech (server_vad's field; semantic_vad uses the default).
        prefix_padding_ms: audio kept before the detected speech start.
        silence_duration_ms: silence that ends an utterance (server_vad).
        create_response: answer each transcribed utterance automatically.
        interrupt_response: a speech start interrupts an assistant reply still playing.
        eagerness: semantic_vad's "low", "medium", "high" or "auto".
        idle_timeout_ms: server_vad: with no speech this long (ms) after the last reply has
            played out, `input_audio_buffer.timeout_triggered` and a response; None: never.
    """

    type: str = "server_vad"
    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    create_response: bool = True
    interrupt_response: bool = True
    eagerness: str = "auto"
    idle_timeout_ms: int | None = None

    @property
    def semantic(self) -> bool:
        """True for `semantic_vad`."""
        return self.type == "semantic_vad"

    @property
    def end_silence_ms(self) -> int:
        """The silence (ms) after which the VAD ends a turn by itself: `silence_duration_ms`,
        or semantic_vad's longest wait for its eagerness."""
        if self.semantic:
            return EAGERNESS_MAX_WAIT_MS[self.eagerness]
        return self.silence_duration_ms

    def end_wait_ms(self, sounds_finished: bool) -> int:
        """semantic_vad: the silence (ms) after which a turn whose words look finished ends:
        the eagerness's shortest wait when the end-of-turn model agrees, else half its longest
        (the model scores some finished sentences low after a pause inside them: measured on
        `benchmarks/bench_turn_end.py`'s "... capital of | France?", 0.01-0.08 over three
        voices). server_vad: `silence_duration_ms`."""
        if not self.semantic:
            return self.silence_duration_ms
        if sounds_finished:
            return EAGERNESS_MIN_WAIT_MS[self.eagerness]
        return EAGERNESS_MAX_WAIT_MS[self.eagerness] // 2

    def as_wire(self) -> dict[str, object]:
        """The settings as OpenAI Realtime's `turn_detection` object."""
        if self.semantic:
            return {"type": "semantic_vad", "eagerness": self.eagerness,
                    "create_response": self.create_response,
                    "interrupt_response": self.interrupt_response}
        return {"type": "server_vad", "threshold": self.threshold,
                "prefix_padding_ms": self.prefix_padding_ms,
                "silence_duration_ms": self.silence_duration_ms,
                "idle_timeout_ms": self.idle_timeout_ms,
                "create_response": self.create_response,
                "interrupt_response": self.interrupt_response}
