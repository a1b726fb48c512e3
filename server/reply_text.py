"""A reply's text as the responder streams it, turned into the segments the voice speaks.

`ReplyText` sits between a responder's deltas and the TTS (asyncio layer, one per generated
reply): it repairs the deltas' Unicode (`SurrogateRepair`), finds the segments
(`SpeechSegmenter`) and queues them for the speaking task; when the responder falls silent in
mid-sentence for `STALLED_TEXT_MS`, the words already written are queued without waiting for
the sentence's end (a stream that stalls is heard up to where it stopped, not held back).
"""

from __future__ import annotations

import asyncio
import time

from server.responders.unicode_repair import SurrogateRepair
from server.speech.segmenter import SpeechSegmenter

STALLED_TEXT_MS = 1000.0
"""Silence of the responder (ms since its last delta) after which the complete words of an
unfinished sentence are spoken. Longer than the gap between two tokens of a streaming LLM (tens
of ms on a GPU, a few hundred for a small CPU model under load), so a sentence that is still
coming is not cut in two (its prosody breaks where it is cut); short enough to stay within a
conversational pause (about 1 s)."""


class ReplyText:
    """Deltas in (`add`, then `end`), speakable segments out (`next_span`).

    Segments are (start, end) code-point spans of the repaired reply text (the concatenation of
    every string `add` and `end` returned), contiguous and in order.
    """

    def __init__(self) -> None:
        """An empty reply."""
        self._repair = SurrogateRepair()
        self._segmenter = SpeechSegmenter()
        self._spans: asyncio.Queue[tuple[int, int] | None] = asyncio.Queue()
        self._last_delta_ms = time.monotonic() * 1000.0

    def add(self, delta: str) -> str:
        """Take one responder delta; return its repaired text ("" when it holds back a high
        surrogate) and queue the segments it completes."""
        self._last_delta_ms = time.monotonic() * 1000.0
        text = self._repair.feed(delta)
        for span in self._segmenter.feed(text):
            self._spans.put_nowait(span)
        return text

    def end(self) -> str:
        """The responder's stream ended: return the repaired text still held back ("" or
        U+FFFD) and queue the last segment; the caller adds the returned text to the reply
        before it calls `close`."""
        text = self._repair.flush()
        for span in [*self._segmenter.feed(text), *self._segmenter.flush()]:
            self._spans.put_nowait(span)
        return text

    def close(self) -> None:
        """No more segments: `next_span` returns None once the queued ones are taken."""
        self._spans.put_nowait(None)

    async def next_span(self) -> tuple[int, int] | None:
        """The next segment to speak; None after `close`. While none is queued and the
        responder has sent nothing for `STALLED_TEXT_MS`, the complete words written so far
        become a segment (`SpeechSegmenter.flush_words`)."""
        while self._spans.empty():
            wait_ms = self._last_delta_ms + STALLED_TEXT_MS - time.monotonic() * 1000.0
            if wait_ms <= 0:
                for span in self._segmenter.flush_words():
                    self._spans.put_nowait(span)
                if not self._spans.empty():
                    break
                wait_ms = STALLED_TEXT_MS
            try:
                async with asyncio.timeout(wait_ms / 1000.0):
                    return await self._spans.get()
            except TimeoutError:
                continue
        return self._spans.get_nowait()
