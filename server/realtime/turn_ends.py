"""Where the person's turn ends beyond the VAD's silence: `semantic_vad`'s end-of-turn verdict
and `server_vad`'s `idle_timeout_ms`. Sans-I/O; owned by the session.

- `semantic_vad`: at a turn's pause the end-of-turn model's probability and the transcript
  are judged together (`server.listening.semantic_vad.TurnEndJudge`); a turn whose words
  look finished is stopped by the VAD (`EndTurn`) before the eagerness's longest silence.
- `idle_timeout_ms` (OpenAI: "applied after the last model response's audio has finished
  playing"): no speech that long after the latest reply played out commits the silence as a
  user item (`input_audio_buffer.timeout_triggered`) and starts a response.
"""

from __future__ import annotations

from collections.abc import Callable

from server.listening.semantic_vad import TurnEndJudge, TurnEndVerdict
from server.listening.server_vad_settings import TurnDetection
from server.realtime.effects import EndTurn
from server.realtime.events import EventLog
from server.realtime.input_turns import InputTurns
from server.realtime.responses import ResponseLifecycle


class TurnEnds:
    """The session's semantic end-of-turn verdicts and idle timeout.

    Args:
        input_turns: the session's input turns (the turn detection settings in force).
        lifecycle: the session's responses (the latest reply's playback).
        log: the session's outbox (`EndTurn` effects).
        start_response: starts a response as the session does for a turn.
    """

    def __init__(self, input_turns: InputTurns, lifecycle: ResponseLifecycle, log: EventLog,
                 start_response: Callable[[], None]) -> None:
        self._input_turns = input_turns
        self._lifecycle = lifecycle
        self._log = log
        self._start_response = start_response
        self._judge = TurnEndJudge()
        self._speech_clock_ms = 0.0
        self._idle_answered: str | None = None

    def _semantic(self) -> TurnDetection | None:
        detection = self._input_turns.turn_detection
        return detection if detection is not None and detection.semantic else None

    def speech_heard(self, clock_ms: float) -> None:
        """The VAD reported a speech start or stop at session clock `clock_ms` (ms): the idle
        timeout counts from there at the earliest."""
        self._speech_clock_ms = clock_ms

    def resumed(self) -> None:
        """Speech came back after the turn's pause: no verdict on that pause counts."""
        self._judge.resumed()

    def probability(self, item_id: str, audio_end_ms: int, probability: float) -> None:
        """The end-of-turn model's `probability` (0-1) for the turn `item_id` at its pause
        after `audio_end_ms` (ms on the input timeline)."""
        if self._semantic() is not None:
            self._end(self._judge.probability(item_id, audio_end_ms, probability))

    def transcript(self, item_id: str, audio_end_ms: int | None, transcript: str) -> None:
        """The `transcript` of the turn `item_id` up to its pause after `audio_end_ms` (ms;
        None: its latest pause)."""
        if self._semantic() is not None:
            self._end(self._judge.transcript(item_id, audio_end_ms, transcript))

    def _end(self, verdict: TurnEndVerdict | None) -> None:
        detection = self._semantic()
        if verdict is not None and detection is not None:
            self._log.effect(EndTurn(verdict.audio_end_ms,
                                     detection.end_wait_ms(verdict.sounds_finished)))

    def check_idle(self, now_ms: float) -> float | None:
        """server_vad's `idle_timeout_ms` at session clock `now_ms` (ms): once that long has
        passed with no speech since the latest reply played out (its first send plus its
        audio's duration, real-time playback) and no turn is in progress,
        `input_audio_buffer.timeout_triggered`, the silence committed as a user item
        (`InputTurns.timeout_triggered`) and a response; once per reply. Returns the clock
        reading (ms) at which to look again, None when nothing is due."""
        detection = self._input_turns.turn_detection
        response = self._lifecycle.latest()
        if detection is None or detection.idle_timeout_ms is None or response is None or (
                response.active or response.first_send_ms is None
                or response.id == self._idle_answered or self._input_turns.speech_turn
                or self._input_turns.transcripts.pending):
            return None
        idle_since = max(response.first_send_ms + response.cursor.sent_ms,
                         self._speech_clock_ms)
        due = idle_since + detection.idle_timeout_ms
        if now_ms < due:
            return due
        self._idle_answered = response.id
        if self._input_turns.timeout_triggered(now_ms - idle_since):
            self._start_response()
        return now_ms
