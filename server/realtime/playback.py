"""The per-response playback cursor: what was generated, sent, played and committed to history.

Semantics follow REFERENCE.md section 2 (vLLM-Omni's `DuplexPlaybackCursor`): all positions are
integer milliseconds from the first sample of that response's audio; `played_ms` and
`committed_ms` only move forward, except that a hard truncate (a permanent cap) may lower
`committed_ms`; caps only ever tighten. Sans-I/O: plain state, no clocks.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PlaybackCursor:
    """Three clocks of one response plus the history commit position.

    Attributes:
        generated_ms: audio produced by TTS so far (ms).
        sent_ms: audio handed to the socket so far (ms).
        played_ms: the client's latest reported rendered position (ms), monotonic.
        committed_ms: the position history may treat as heard (ms).
        audio_complete: the whole reply was synthesised (never set for a cancelled generation).
        hard_cap_ms: tightest permanent cap from a truncate or barge-in, None if none.
        anomalies: count of reported positions beyond the audio sent (they are clamped).
    """

    generated_ms: int = 0
    sent_ms: int = 0
    played_ms: int = 0
    committed_ms: int = 0
    audio_complete: bool = False
    hard_cap_ms: int | None = None
    anomalies: int = 0

    @property
    def total_ms(self) -> int:
        """Total audio of the response so far: max(generated_ms, sent_ms)."""
        return max(self.generated_ms, self.sent_ms)

    @property
    def cutoff_ms(self) -> int:
        """The single position calibration may treat as heard (REFERENCE.md 2.2).

        min(committed_ms, total audio, hard cap), never below 0.
        """
        cutoff = min(self.committed_ms, self.total_ms)
        if self.hard_cap_ms is not None:
            cutoff = min(cutoff, self.hard_cap_ms)
        return max(0, cutoff)

    @property
    def fully_played(self) -> bool:
        """True when the whole reply was synthesised and the cutoff reaches its end."""
        return self.audio_complete and self.cutoff_ms >= self.total_ms

    @property
    def unplayed_ms(self) -> int:
        """Audio sent but not yet committed as played (ms); 0 when the client is idle."""
        return max(0, self.sent_ms - self.committed_ms)

    def _clamp(self, position_ms: int) -> int:
        """Clamp a client-reported position to [0, sent_ms], counting an anomaly if beyond."""
        if position_ms > self.sent_ms:
            self.anomalies += 1
            return self.sent_ms
        return max(0, position_ms)

    def acknowledge(self, played_ms: int) -> int:
        """Apply an ordinary playback ACK; return the clamped position (ms).

        `played_ms` and `committed_ms` only move forward; the commit stays under the hard cap.
        """
        position = self._clamp(played_ms)
        self.played_ms = max(self.played_ms, position)
        committed = max(self.committed_ms, position)
        if self.hard_cap_ms is not None:
            committed = min(committed, self.hard_cap_ms)
        self.committed_ms = committed
        return position

    def truncate(self, audio_end_ms: int) -> int:
        """Apply a permanent cap (truncate / barge-in); return the effective cap (ms).

        The cap only tightens: a later, looser truncate does not raise it. `committed_ms` is set
        to the cap's position (the only way it decreases), and `played_ms` catches up with it.
        """
        position = self._clamp(audio_end_ms)
        cap = position if self.hard_cap_ms is None else min(self.hard_cap_ms, position)
        self.hard_cap_ms = cap
        self.played_ms = max(self.played_ms, cap)
        self.committed_ms = cap
        return cap

    def as_wire(self) -> dict[str, int | bool]:
        """The cursor as sent in `playback.acknowledged.cursor`."""
        return {
            "generated_ms": self.generated_ms,
            "sent_ms": self.sent_ms,
            "played_ms": self.played_ms,
            "committed_ms": self.committed_ms,
            "audio_complete": self.audio_complete,
        }
