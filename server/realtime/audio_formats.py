"""A session's audio formats on the wire: OpenAI's `audio/pcm` (24 kHz PCM16), `audio/pcmu` and
`audio/pcma` (8 kHz G.711 mu-law and A-law), for input and output apart.

Inside, the session works in PCM16 mono at its own rate (24 kHz) and in ms, whatever the wire
carries: `WireAudio.decode_input` turns each `input_audio_buffer.append` into that (G.711
decoded, then resampled 8 -> 24 kHz as one stream), and `WireAudio.encode_output` turns each
audio delta into the output format (resampled 24 -> 8 kHz as one stream per response, then
G.711 encoded). Positions (`audio_end_ms`, marks, ACKs, truncates) stay in ms, so nothing else
changes. Resampling is soxr's streaming HQ resampler (`StreamResampler`), which keeps back
the end of each chunk until the next one: at most `MAX_HELD_MS`. A completed G.711 reply's
held end is flushed before its `response.output_audio.done` (`WireAudio.flush_output`), so
its bytes match its `audio_end_ms`; a cancelled one's is dropped with the rest of its audio.
The end of each append reaches the input buffer with the next one.
Sans-I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from server.listening.pcm16 import float_to_pcm16, pcm16_to_float
from server.realtime import g711
from server.speech.resampling import StreamResampler

PCM_RATE_HZ = 24000
"""The rate of `audio/pcm`, the only one OpenAI's GA schema allows for it."""
G711_RATE_HZ = 8000
"""The rate of `audio/pcmu` and `audio/pcma` (G.711)."""
MAX_HELD_MS = 75
"""Most audio (ms) the 24 -> 8 kHz stream keeps back at any time: measured 73.1 ms over 600
chunks of 50 to 7,200 samples each (soxr 1.0, HQ), whatever the chunk size."""


def parse_format(value: Any) -> dict[str, Any]:
    """The wire format object of a `session.update`'s `audio.input.format` or
    `audio.output.format`: `{"type": "audio/pcm", "rate": 24000}` (type and rate may be left
    out), `{"type": "audio/pcmu"}` or `{"type": "audio/pcma"}`.

    Raises:
        ValueError: anything else (the message says what is accepted).
    """
    kind = value.get("type", "audio/pcm") if isinstance(value, dict) else None
    if isinstance(kind, str) and kind in g711.LAWS and set(value) <= {"type"}:
        return {"type": kind}
    rate = value.get("rate", PCM_RATE_HZ) if isinstance(value, dict) else None
    if kind == "audio/pcm" and set(value) <= {"type", "rate"} and (
            type(rate) is int and rate == PCM_RATE_HZ):  # not 24000.0 nor True: an integer
        return {"type": "audio/pcm", "rate": PCM_RATE_HZ}
    raise ValueError("The audio format must be audio/pcm at 24000 Hz, audio/pcmu or "
                     "audio/pcma.")


def _resampled(stream: StreamResampler, pcm16: bytes) -> bytes:
    """PCM16 `pcm16` through `stream` (the samples it released), as PCM16 LE."""
    held, own = stream.feed(pcm16_to_float(pcm16))
    return float_to_pcm16(np.concatenate((held, own)))


@dataclass
class WireAudio:
    """One session's input and output formats, and the resampling streams they need.

    Attributes:
        voice: the voice every response reports in its `audio.output`.
        rate_hz: the session's own rate (Hz; `audio/pcm` is reported at it, G.711 is
            resampled to and from it).
        input_format, output_format: the wire format objects (`parse_format`).
        audio_output: the `audio.output` object every response reports (format and voice);
            shared with the response lifecycle and updated in place with the output format.
    """

    voice: str
    rate_hz: int = PCM_RATE_HZ
    input_format: dict[str, Any] = field(init=False)
    output_format: dict[str, Any] = field(init=False)
    audio_output: dict[str, Any] = field(init=False)
    _input_stream: StreamResampler | None = None
    _output_stream: tuple[str, StreamResampler] | None = None

    def __post_init__(self) -> None:
        self.input_format = self.output_format = {"type": "audio/pcm", "rate": self.rate_hz}
        self.audio_output = {"format": self.output_format, "voice": self.voice}

    def configure(self, input_format: dict[str, Any] | None,
                  output_format: dict[str, Any] | None) -> None:
        """Switch to the given formats (None: unchanged); a stream in progress starts anew."""
        if input_format is not None and input_format != self.input_format:
            self.input_format, self._input_stream = input_format, None
        if output_format is not None and output_format != self.output_format:
            self.output_format, self._output_stream = output_format, None
            self.audio_output["format"] = output_format

    def decode_input(self, data: bytes) -> bytes:
        """One append's audio as PCM16 LE mono at `rate_hz`.

        Raises:
            ValueError: `audio/pcm` data of an odd byte count.
        """
        law = self.input_format["type"]
        if law not in g711.LAWS:
            if len(data) % 2:
                raise ValueError("PCM16 audio must have an even byte count.")
            return data
        if self._input_stream is None:
            self._input_stream = StreamResampler(G711_RATE_HZ, self.rate_hz)
        return _resampled(self._input_stream, g711.decode(data, law))

    def encode_output(self, response_id: str, pcm16: bytes) -> bytes:
        """One audio delta of `response_id` (PCM16 LE mono at `rate_hz`) in the output
        format; a response's deltas are resampled as one stream."""
        law = self.output_format["type"]
        if law not in g711.LAWS:
            return pcm16
        if self._output_stream is None or self._output_stream[0] != response_id:
            self._output_stream = response_id, StreamResampler(self.rate_hz, G711_RATE_HZ)
        return g711.encode(_resampled(self._output_stream[1], pcm16), law)

    def flush_output(self, response_id: str) -> bytes:
        """The end of `response_id`'s output stream, in the output format: the audio its
        resampler still holds (at most `MAX_HELD_MS`), to send before the reply's
        `response.output_audio.done` so that its bytes match its `audio_end_ms`; b"" when
        nothing is held (`audio/pcm`, or no stream of this response). The next delta starts
        a new stream."""
        stream = self._output_stream
        if stream is None or stream[0] != response_id:
            return b""
        self._output_stream = None
        tail = stream[1].flush()
        if not len(tail):
            return b""
        return g711.encode(float_to_pcm16(tail), self.output_format["type"])
