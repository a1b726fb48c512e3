"""The bound on one session's input audio: a small multiple of real time over a short window.

Every second of microphone audio a client appends costs the server work (base64 and JSON on
the event loop, then server VAD, echo detection and resampling on the input workers,
`server.input_work`), and a client can append audio much faster than it is spoken: an append
of 16 s (the largest text frame) arrives in a few ms. `InputAudioBudget` is a token bucket
over audio milliseconds (the committed rate and burst of RFC 2697's single-rate meter): a
session may append `speed` times real time, with a burst of `speed * window_ms` ms of audio
at once; audio beyond that is throttled, not refused: the
caller reads none of the session's next events until the bucket is back in credit, so TCP
backpressure slows the client down and no audio is lost. Sans-I/O: the caller passes the
clock (monotonic ms) in and does the waiting (`server.input_work.SessionInput.throttle`).
"""

from __future__ import annotations

INPUT_SPEED = 2.0
"""Default bound on a session's input audio, as a multiple of real time (sustained): twice
what a microphone produces, so a client catching up after a stall (the page after a busy main
thread, `duplex-demo talk` after a device stall: at most 500 ms) is never slowed."""

INPUT_WINDOW_MS = 5000.0
"""Default window (ms) over which `INPUT_SPEED` holds: a session may append up to `INPUT_SPEED`
times this (10 s of audio) at once, e.g. a recorded utterance sent in one go."""


class InputAudioBudget:
    """A token bucket of input audio (ms): `speed` ms of audio per ms of wall time, at most
    `speed * window_ms` ms of credit.

    `spend` counts audio already applied and says how long to hold the session's next event;
    an append larger than the credit is applied whole and paid for afterwards, so a session
    never appends more than `speed * (window_ms + t)` ms of audio in any t ms plus its
    largest append.

    Args:
        speed: sustained multiple of real time (> 0).
        window_ms: burst window (ms, > 0); the bucket starts full.

    Raises:
        ValueError: a non-positive speed or window.
    """

    def __init__(self, speed: float, window_ms: float) -> None:
        if not speed > 0 or not window_ms > 0:
            raise ValueError("speed and window_ms must be > 0")
        self.speed = speed
        self.capacity_ms = speed * window_ms
        self._credit_ms = self.capacity_ms
        self._at_ms: float | None = None

    def spend(self, now_ms: float, audio_ms: float) -> float:
        """Count `audio_ms` ms of input audio applied at `now_ms` (monotonic ms, never
        decreasing); return the wait (ms, >= 0) before the session's next event may be read:
        0 while the bucket is in credit, else the time it takes to refill to zero."""
        if self._at_ms is not None:
            self._credit_ms = min(self.capacity_ms,
                                  self._credit_ms + (now_ms - self._at_ms) * self.speed)
        self._at_ms = now_ms
        self._credit_ms -= audio_ms
        return max(0.0, -self._credit_ms / self.speed)
