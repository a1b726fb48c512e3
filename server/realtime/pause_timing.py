"""Where a paused reply's wait went, from the server's own clocks: `response.resumed`'s `timing`.

A backchannel's pause -> resume gap is the person's speech after the pause, the quiet the
resume waits for after it (`server.realtime.pauses.RESUME_SILENCE_MS`), the decision when it
comes later than that quiet (its transcription and readings), and how far server VAD lags the
audio's arrival on a loaded machine. `PauseTiming` keeps the session clock's readings (ms) and
the input-timeline positions (ms) that separate them. Sans-I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PauseTiming:
    """Readings taken while one reply was paused.

    Attributes:
        heard_at_pause_ms: input position (ms) server VAD had judged up to with the audio
            whose speech start paused the reply (the speech start lies before it).
        asked_ms: session clock (ms) when the deciding transcription was asked for (the
            utterance's gap of silence), None before.
        decided_ms: session clock (ms) of the verdict, None before.
        quiet_ms: session clock (ms) when the silence after the backchannel was long enough
            (or its turn ended), None before.
        silence_from_ms: input position (ms) from which that silence counted (the end of the
            person's sound), None before.
        heard_at_quiet_ms: input position (ms) heard when the silence was long enough.
    """

    heard_at_pause_ms: int | None = None
    asked_ms: float | None = None
    decided_ms: float | None = None
    quiet_ms: float | None = None
    silence_from_ms: int | None = None
    heard_at_quiet_ms: int | None = None

    def not_quiet(self) -> None:
        """The person spoke again: the quiet noted before did not end the utterance."""
        self.quiet_ms = self.silence_from_ms = self.heard_at_quiet_ms = None

    def as_wire(self, paused_at_ms: float) -> dict[str, int | None]:
        """The readings as `response.resumed.timing` (ms each, None when not reached):

        - `speech_ms`: input audio from the position heard at the pause to the end of the
          person's sound (the person still speaking);
        - `silence_ms`: input audio of quiet heard after it before the resume;
        - `asked_ms`, `decided_ms`, `quiet_ms`: session clock from the pause (`paused_at_ms`)
          to the decision's request, its verdict, and the quiet long enough;
        - `lag_ms`: `quiet_ms` less the input audio heard meanwhile (`speech_ms` +
          `silence_ms`): how much later server VAD judged that audio than the pause's (its
          queue on a loaded machine; the appends' own pacing).
        """
        def since(clock_ms: float | None) -> int | None:
            return None if clock_ms is None else round(clock_ms - paused_at_ms)

        speech = silence = lag = None
        if self.silence_from_ms is not None and self.heard_at_pause_ms is not None:
            speech = self.silence_from_ms - self.heard_at_pause_ms
        if self.heard_at_quiet_ms is not None and self.silence_from_ms is not None:
            silence = self.heard_at_quiet_ms - self.silence_from_ms
        quiet = since(self.quiet_ms)
        if quiet is not None and speech is not None and silence is not None:
            lag = quiet - speech - silence
        return {"speech_ms": speech, "silence_ms": silence, "asked_ms": since(self.asked_ms),
                "decided_ms": since(self.decided_ms), "quiet_ms": quiet, "lag_ms": lag}
