"""One response's state: status, playback cursor, text, word marks and its paced outbound queue.

Sans-I/O: plain data plus the pacing arithmetic (`send_budget_ms`); the session decides, the
asyncio driver sends.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from calibration.word_marks import WordMark
from server.realtime.playback import PlaybackCursor


@dataclass(slots=True)
class QueuedTranscript:
    """Transcript text waiting to be sent, ahead of the audio that speaks it."""

    text: str


@dataclass(slots=True)
class QueuedAudio:
    """One audio frame waiting for pacing: PCM16 bytes, its sample count, and the wire marks of
    the TTS chunk it starts (None for the chunk's later frames)."""

    pcm16: bytes
    samples: int
    marks: list[dict[str, object]] | None


@dataclass(slots=True)
class ResponseState:
    """One response: its item, status, cursor, text and the outputs still waiting to be sent.

    Attributes:
        id, item_id: response and assistant item ids.
        epoch: session epoch when the response started.
        status: "in_progress" | "completed" | "cancelled" | "failed".
        cursor: the playback cursor (ms).
        text: the full text generated so far (the history item's `full_text`).
        queued_text_end, sent_text_end: how much of `text` was queued / sent as transcript
            deltas; `response.output_audio_transcript.done` carries exactly the deltas sent.
        marks: word marks on the reply timeline (char offsets into `text`).
        generation_ended: the responder/TTS stopped (finished, cancelled or failed).
        generated_samples, sent_samples: sample counts at the output rate.
        queue: transcript and audio outputs waiting for pacing.
        first_send_ms, last_ack_ms: clock readings (ms) used by pacing.
    """

    id: str
    item_id: str
    epoch: int
    status: str = "in_progress"
    cursor: PlaybackCursor = field(default_factory=PlaybackCursor)
    text: str = ""
    queued_text_end: int = 0
    sent_text_end: int = 0
    marks: list[WordMark] = field(default_factory=list)
    generation_ended: bool = False
    generated_samples: int = 0
    sent_samples: int = 0
    queue: deque[QueuedTranscript | QueuedAudio] = field(default_factory=deque)
    first_send_ms: float | None = None
    last_ack_ms: float | None = None
    status_reason: str | None = None
    error_message: str | None = None

    @property
    def active(self) -> bool:
        """True until the response's terminal event was produced."""
        return self.status == "in_progress"

    def send_budget_ms(self, now_ms: float, lead_ms: int, jitter_ms: int,
                       ack_timeout_ms: int) -> float:
        """How far (ms of this response's audio) may have been sent at clock `now_ms`.

        The client's latest played position plus `lead_ms`; before the first ACK also
        `jitter_ms`, the client's initial jitter buffer (it starts playing once that much is
        buffered, so the first ACK needs it). With no ACK for
        `ack_timeout_ms` since the first audio was sent (or since the last ACK), the played
        position is estimated from real time (elapsed since the first send, minus the jitter
        buffer), so a client that never ACKs still receives the whole reply in real time.
        """
        played = float(self.cursor.played_ms)
        acked_recently = self.last_ack_ms is not None and now_ms - self.last_ack_ms < (
            ack_timeout_ms
        )
        if not acked_recently and self.first_send_ms is not None:
            silent_since = max(self.first_send_ms, self.last_ack_ms or 0.0)
            if now_ms - silent_since >= ack_timeout_ms:
                played = max(played, now_ms - self.first_send_ms - jitter_ms)
        initial_buffer = jitter_ms if self.last_ack_ms is None else 0
        return played + lead_ms + initial_buffer

    def fallback_deadline_ms(self, sent_ms: float, lead_ms: int,
                             ack_timeout_ms: int) -> float | None:
        """The clock reading (ms) at which the real-time fallback of `send_budget_ms` next lets
        audio beyond `sent_ms` out; None before any audio was sent."""
        if self.first_send_ms is None:
            return None
        silent_since = max(self.first_send_ms, self.last_ack_ms or 0.0)
        by_time = self.first_send_ms + sent_ms - lead_ms
        return max(silent_since + ack_timeout_ms, by_time) + 1
