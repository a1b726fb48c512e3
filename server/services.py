"""What every connection is given: the process-wide services, and the observer of its traffic.

`Services` is built once per server process (`server.config.build_services`) and shared by
every `server.connection.Connection`; a `SessionObserver` (`server.metrics.SessionMetrics`)
sees one session's client and server events in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from calibration.asr import Transcriber
from calibration.history_calibration import HistoryCalibrationPolicy
from server.realtime.protocol import ClientEvent, ProtocolError
from server.realtime.session import SessionConfig
from server.responders.prompt import Responder
from server.speech.synthesizer import SpeechSynthesizer
from server.voice_turns import VoiceTurns


@dataclass(frozen=True, slots=True)
class Services:
    """Process-wide parts shared by every connection.

    Attributes:
        synthesizer: the TTS engine (thread-safe, warmed up).
        responder: the reply generator.
        session_config: settings copied into each new session.
        policy: the heard-text calibration policy, or None for `--calibration off`.
        input_transcriber: ASR for the person's spoken turns (faster-whisper tiny.en).
        history_audio_max_bytes: retained reply audio per session (bytes).
        calibration_timeout_s: per-callback and per-prompt calibration budget (s).
        send_timeout_s: longest wait for the socket to take one server frame (s); a client
            that reads nothing for that long is closed with
            `server.sending.STALLED_CLIENT_CLOSE_CODE`.
        tts_turn: sessions take turns at the TTS here, one synthesis piece per turn, a
            reply's first piece before continuations, the least-buffered continuation first,
            a continuation far ahead of playback preempted (`server.voice_turns.VoiceTurns`);
            a cancelled reply still waiting leaves the queue at once; the reply holding the
            turn keeps it until its worker thread has returned, which a cancel makes happen
            within milliseconds (`server.speaking.Speaker.speak`), so the turn is free
            exactly when the engine is.
        idle_timeout_s: close a session (1000) after this long without a client frame (s);
            None: never.
        max_events_per_s: client frames applied per session in any 1 s
            (`server.realtime.limits.EventRateLimiter`); None: no limit.
        input_speed: bound on a session's input audio, as a multiple of real time over
            `input_window_s` (`server.realtime.input_budget.InputAudioBudget`): beyond it the
            session's next event is read only once the bound allows (throttled, not
            refused); None: no bound.
        input_window_s: the window of `input_speed` (s): a session may append
            `input_speed * input_window_s` s of audio at once.
    """

    synthesizer: SpeechSynthesizer
    responder: Responder
    session_config: SessionConfig
    policy: HistoryCalibrationPolicy | None
    input_transcriber: Transcriber
    history_audio_max_bytes: int = 8 * 1024 * 1024
    calibration_timeout_s: float = 1.0
    send_timeout_s: float = 10.0
    tts_turn: VoiceTurns = field(default_factory=VoiceTurns)
    idle_timeout_s: float | None = None
    max_events_per_s: int | None = None
    input_speed: float | None = None
    input_window_s: float = 5.0


class SessionObserver(Protocol):
    """Sees one session's traffic in order, e.g. `server.metrics.SessionMetrics`."""

    def client_event(self, event: ClientEvent | ProtocolError) -> None:
        """A client frame was given to the session: its event when applied, else the error
        it was refused with."""

    def server_event(self, event: dict[str, Any]) -> None:
        """A server event is being sent."""


class NoObserver:
    """The observer of a connection nobody observes."""

    def client_event(self, event: ClientEvent | ProtocolError) -> None:
        pass

    def server_event(self, event: dict[str, Any]) -> None:
        pass
