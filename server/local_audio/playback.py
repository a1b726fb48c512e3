"""What the speaker played: the audio queued for the output device, rendered by the stream
callback, and each response's heard position.

The output stream consumes frames in blocks (`PlaybackLedger.render`, called from the
PortAudio callback thread). Every frame it hands to the device, audio or silence, advances the
stream position; a frame reaches the speaker once the device's output latency (frames still
in its buffer) has passed after it. A response's played position is therefore the reply
frames rendered before `stream position - latency frames`, which is what the page's playback
worklet reports too (`web/playback.js`: rendered frames minus the output latency, clamped to
the audio received). A response that drained is reported in full once silence has pushed its
last frame past the latency.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class _Segment:
    """Reply frames `reply_start` .. `reply_start + count - 1` went to the device at stream
    positions `stream_start` .. `stream_start + count - 1`."""

    stream_start: int
    reply_start: int
    count: int


@dataclass(slots=True)
class _Track:
    """One response's audio: queued pieces, frames received and rendered, its segments."""

    queue: collections.deque[np.ndarray] = field(default_factory=collections.deque)
    head_offset: int = 0
    received: int = 0
    rendered: int = 0
    stopped: bool = False
    segments: list[_Segment] = field(default_factory=list)


class PlaybackLedger:
    """Responses' audio waiting for the output device, and the frames the device consumed.

    Thread-safe: `render` runs on the audio callback thread, everything else on the client's
    event loop. One response plays at a time, as on the page: the first audio of a new
    response stops the one before (superseded), whose position then stays final.

    Args:
        rate_hz: the stream's sample rate (the session's output rate, 24000).
    """

    def __init__(self, rate_hz: int) -> None:
        self.rate_hz = rate_hz
        self._lock = threading.Lock()
        self._tracks: dict[str, _Track] = {}
        self._current: _Track | None = None
        self._stream_frames = 0
        self._last_block = 0

    @property
    def stream_frames(self) -> int:
        """Frames the callback consumed since the stream started (audio and silence)."""
        with self._lock:
            return self._stream_frames

    @property
    def last_block(self) -> int:
        """Frames of the latest callback block (0 before the first)."""
        with self._lock:
            return self._last_block

    def enqueue(self, response_id: str, pcm: np.ndarray) -> str | None:
        """Queue the next samples of `response_id` (1-D float32 in [-1, 1]); audio of a
        stopped response is dropped. Returns the id of the response this one superseded (it
        was playing and is now stopped), else None."""
        samples = np.asarray(pcm, dtype=np.float32).reshape(-1)
        superseded = None
        with self._lock:
            track = self._tracks.get(response_id)
            if track is None:
                track = self._tracks[response_id] = _Track()
                previous = self._current
                if previous is not None and not previous.stopped:
                    previous.stopped = True
                    previous.queue.clear()
                    superseded = next(key for key, value in self._tracks.items()
                                      if value is previous)
                self._current = track
            if not track.stopped and samples.size:
                track.queue.append(samples)
                track.received += samples.size
        return superseded

    def render(self, out: np.ndarray) -> None:
        """Fill `out` (frames x channels float32, the callback's output buffer) with the
        current response's queued audio, silence after it, and count the frames. Audio
        thread."""
        frames = out.shape[0]
        out.fill(0.0)
        with self._lock:
            track = self._current
            written = 0
            while track is not None and track.queue and written < frames:
                head = track.queue[0]
                take = min(frames - written, head.size - track.head_offset)
                out[written:written + take, 0] = head[track.head_offset:track.head_offset + take]
                self._note(track, self._stream_frames + written, take)
                written += take
                track.head_offset += take
                if track.head_offset == head.size:
                    track.queue.popleft()
                    track.head_offset = 0
            if out.shape[1] > 1:
                out[:, 1:] = out[:, :1]
            self._stream_frames += frames
            self._last_block = frames

    def stop(self, response_id: str) -> None:
        """Silence `response_id` now: its queued audio is dropped and later audio ignored."""
        with self._lock:
            track = self._tracks.setdefault(response_id, _Track())
            track.stopped = True
            track.queue.clear()
            track.head_offset = 0

    def received_frames(self, response_id: str) -> int:
        """Frames of `response_id` received (queued or rendered)."""
        with self._lock:
            track = self._tracks.get(response_id)
            return track.received if track else 0

    def rendered_frames(self, response_id: str) -> int:
        """Frames of `response_id` the callback handed to the device."""
        with self._lock:
            track = self._tracks.get(response_id)
            return track.rendered if track else 0

    def played_frames(self, response_id: str, latency_frames: int) -> int:
        """Frames of `response_id` that reached the speaker: those rendered before the stream
        position minus `latency_frames` (the device's reported output latency)."""
        with self._lock:
            track = self._tracks.get(response_id)
            if track is None:
                return 0
            heard_before = self._stream_frames - latency_frames
            played = 0
            for segment in track.segments:
                if segment.stream_start >= heard_before:
                    break
                played = segment.reply_start + min(segment.count,
                                                   heard_before - segment.stream_start)
            return played

    def forget(self, response_id: str) -> None:
        """Drop the bookkeeping of a stopped response whose final position was reported."""
        with self._lock:
            track = self._tracks.pop(response_id, None)
            if track is not None and track is self._current:
                self._current = None

    @staticmethod
    def _note(track: _Track, stream_start: int, count: int) -> None:
        """Record `count` reply frames of `track` rendered from `stream_start` (lock held)."""
        last = track.segments[-1] if track.segments else None
        if last is not None and last.stream_start + last.count == stream_start:
            last.count += count
        else:
            track.segments.append(_Segment(stream_start, track.rendered, count))
        track.rendered += count
