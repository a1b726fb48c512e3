"""A bound on the length of one assistant reply, whatever responder writes it.

`ReplyLengthLimit` wraps any `Responder`: the reply streams through unchanged until it would
exceed `max_chars` characters; then it is cut at the last word boundary within the limit and
ends there, so the response completes normally with a shorter text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from server.responders.prompt import Prompt, Responder
from server.responders.tools import ToolCall

HOLD_BACK_CHARS = 256
"""How close to the limit (code points) partial words are held back: longer than nearly every
written token, URLs included; a longer one arriving at the limit is cut inside."""


def word_prefix(text: str, max_chars: int) -> str:
    """The longest prefix of `text` of at most `max_chars` characters that ends at a word
    boundary, trailing whitespace removed; `text` itself when it fits.

    A word is a run of non-whitespace characters; "" when the first word alone is longer than
    `max_chars`.
    """
    if len(text) <= max_chars:
        return text
    if text[max_chars].isspace():
        return text[:max_chars].rstrip()
    return text[:_last_space(text[:max_chars]) + 1].rstrip()


def _last_space(text: str) -> int:
    """Index of the last whitespace character of `text`, -1 when there is none."""
    return next((i for i in range(len(text) - 1, -1, -1) if text[i].isspace()), -1)


class ReplyLengthLimit:
    """A responder whose replies are at most `max_chars` characters (code points).

    Text is passed on as it arrives. Within `HOLD_BACK_CHARS` of the limit, a trailing partial
    word is held back until the next delta shows where it ends (so a cut never splits a word
    that was already sent); further from it nothing is held back, so the reply's text (and
    its last sentence) is complete as soon as the responder wrote it.
    A reply whose first word alone is longer than `max_chars` is cut inside it, at `max_chars`.

    Args:
        inner: the responder that writes the replies.
        max_chars: the longest reply (> 0).

    Raises:
        ValueError: `max_chars` is not positive.
    """

    def __init__(self, inner: Responder, max_chars: int) -> None:
        if max_chars <= 0:
            raise ValueError("max_chars must be > 0")
        self.inner = inner
        self.max_chars = max_chars

    async def respond(self, prompt: Prompt) -> AsyncIterator[str | ToolCall]:
        """Yield the inner responder's reply, cut as described above; its function calls
        (`ToolCall`) pass unchanged."""
        room = self.max_chars
        pending = ""
        replies = self.inner.respond(prompt)
        try:
            async for delta in replies:
                if not isinstance(delta, str):  # a function call: not text, not counted
                    yield delta
                    continue
                pending += delta
                if len(pending) > room:
                    cut = word_prefix(pending, room)
                    if not cut and room == self.max_chars:
                        cut = pending[:room]
                    if cut:
                        yield cut
                    return
                words_end = len(pending) if len(pending) <= room - HOLD_BACK_CHARS else (
                    _last_space(pending) + 1)
                if words_end:
                    yield pending[:words_end]
                    room -= words_end
                    pending = pending[words_end:]
            if pending:
                yield pending
        finally:
            close = getattr(replies, "aclose", None)
            if close is not None:
                await close()
