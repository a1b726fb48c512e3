"""A Piper voice for browser tests whose fake microphone carries the reply's own echo: the echo in
a file cannot follow the page's playback, so the playback must not starve. `CachedSynthesizer`
synthesizes each text once and then yields its chunks at once, and the server sends
`SEND_AHEAD_MS` ahead of playback (measured on a loaded machine, load average about 20 on 2
cores: without them the page's output fell 0.6-3.4 s behind real time within a 3.5 s reply,
and the file's echo then ran on over silence).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from server.speech.synthesizer import SpeechChunk, SpeechSynthesizer, StopSignal

SEND_AHEAD_MS = 5000
"""The server's `lead_ms` for these tests: it sends the reply this far ahead of what played
(400 ms by default)."""


class CachedSynthesizer:
    """A real synthesizer (Piper, deterministic) whose chunks for each text are kept after
    the first synthesis and yielded again at once: the same audio, sent ahead of playback."""

    def __init__(self, inner: SpeechSynthesizer) -> None:
        self.inner = inner
        self.name = inner.name
        self.sample_rate_hz = inner.sample_rate_hz
        self._cache: dict[str, list[SpeechChunk]] = {}
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Warm the inner voice."""
        self.inner.warm_up()

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        """The chunks of `text`: from the inner voice as it makes them the first time (kept
        once all were made and nobody stopped it), at once afterwards (nothing more once
        `stop` is set)."""
        with self._lock:
            cached = self._cache.get(text)
        if cached is None:
            chunks = []
            for chunk in self.inner.synthesize(text, stop):
                chunks.append(chunk)
                yield chunk
            if stop is None or not stop.is_set():
                with self._lock:
                    self._cache[text] = chunks
            return
        for chunk in cached:
            if stop is not None and stop.is_set():
                return
            yield chunk
