"""The microphone input buffer: PCM16 mono bytes with stable positions on the input timeline.

Positions are ms since the first sample ever appended in the session (OpenAI Realtime's
`audio_start_ms` / `audio_end_ms` of `input_audio_buffer.speech_*`), so they stay valid when
old audio is dropped from the front. Sans-I/O.
"""

from __future__ import annotations


class InputAudioBuffer:
    """Buffered microphone audio (PCM16 LE mono).

    Args:
        sample_rate_hz: input sample rate (24000).
        max_bytes: bound on buffered audio; `append` refuses more.
    """

    def __init__(self, sample_rate_hz: int, max_bytes: int) -> None:
        self.sample_rate_hz = sample_rate_hz
        self.max_bytes = max_bytes
        self.data = bytearray()
        self.start_ms = 0

    def __len__(self) -> int:
        return len(self.data)

    def _ms(self, byte_count: int) -> int:
        return byte_count * 1000 // (2 * self.sample_rate_hz)

    def _bytes(self, ms: int) -> int:
        return max(0, ms) * self.sample_rate_hz // 1000 * 2

    @property
    def end_ms(self) -> int:
        """Position (ms) just after the last buffered sample."""
        return self.start_ms + self._ms(len(self.data))

    def append(self, pcm16: bytes) -> int:
        """Append audio; return the position (ms) of its first sample.

        Raises:
            OverflowError: the buffer would exceed `max_bytes` (nothing is appended).
        """
        if len(self.data) + len(pcm16) > self.max_bytes:
            raise OverflowError("input audio buffer full")
        position_ms = self.end_ms
        self.data.extend(pcm16)
        return position_ms

    def drop_front(self, byte_count: int) -> None:
        """Forget the oldest `byte_count` bytes; positions of the rest do not change."""
        byte_count = min(byte_count, len(self.data)) // 2 * 2
        del self.data[:byte_count]
        self.start_ms += self._ms(byte_count)

    def drop_before(self, position_ms: int) -> None:
        """Forget the audio before `position_ms` (ms on the input timeline); nothing when it is
        at or before the buffer's start."""
        self.drop_front(self._bytes(position_ms - self.start_ms))

    def peek(self, start_ms: int, end_ms: int) -> bytes:
        """Return audio [start_ms, end_ms) (clipped to what is buffered); nothing is dropped."""
        first = self._bytes(start_ms - self.start_ms)
        return bytes(self.data[first:self._bytes(end_ms - self.start_ms)])

    def take(self, start_ms: int, end_ms: int) -> bytes:
        """Return audio [start_ms, end_ms) (as `peek`) and drop everything before `end_ms`."""
        audio = self.peek(start_ms, end_ms)
        self.drop_front(self._bytes(end_ms - self.start_ms))
        return audio

    def clear(self) -> None:
        """Drop all buffered audio (positions keep counting)."""
        self.drop_front(len(self.data))
