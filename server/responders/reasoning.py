"""Reasoning spans cut out of a model's streamed content.

Reasoning models write their chain of thought into the content, between tags, before the
answer: DeepSeek-R1 and Qwen3 `<think>…</think>` (their chat templates' tag), others
`<thinking>` or `<reasoning>`. It is not part of the reply: never spoken, never shown as the
assistant's message, never sent back in the prompt. (A server that parses it out sends it as
`reasoning_content` deltas instead, which `LLMResponder` does not read.)
"""

from __future__ import annotations

REASONING_TAGS = ("think", "thinking", "reasoning")
"""Tag names of reasoning spans (lower case, as the models write them)."""

_OPENERS = tuple(f"<{tag}>" for tag in REASONING_TAGS)


class ReasoningFilter:
    """Stream filter: `feed` each content delta, `flush` at the end of the stream.

    Returns the content outside reasoning spans: an opening tag (`_OPENERS`) starts a span that
    its closing tag ends; the whitespace right after a closing tag is dropped too (the answer
    starts after it). A delta that ends in what may be the start of a tag keeps it back until
    the next delta decides; a span still open at the end of the stream drops the rest.
    """

    def __init__(self) -> None:
        """A filter outside any reasoning span."""
        self._held = ""
        self._closer: str | None = None
        self._after_span = False

    def feed(self, delta: str) -> str:
        """The part of `delta` (and of text kept back before) that is not reasoning; may be
        ""."""
        text, self._held = self._held + delta, ""
        kept: list[str] = []
        while text:
            if self._closer is not None:
                end = text.find(self._closer)
                if end < 0:
                    self._held = _tag_prefix(text, (self._closer,))
                    return "".join(kept)
                text, self._closer, self._after_span = text[end + len(self._closer):], None, True
                continue
            if self._after_span:
                text = text.lstrip()
                if not text:
                    break
                self._after_span = False
            start = text.find("<")
            if start < 0:
                kept.append(text)
                break
            kept.append(text[:start])
            text = text[start:]
            opener = next((tag for tag in _OPENERS if text.startswith(tag)), None)
            if opener is not None:
                self._closer = f"</{opener[1:]}"
                text = text[len(opener):]
            elif _tag_prefix(text, _OPENERS) == text:
                self._held = text
                break
            else:
                kept.append("<")
                text = text[1:]
        return "".join(kept)

    def flush(self) -> str:
        """End of the stream: text kept back outside a span (an unfinished "<thi"), else ""."""
        held, self._held = self._held, ""
        return "" if self._closer is not None else held


def _tag_prefix(text: str, tags: tuple[str, ...]) -> str:
    """The longest suffix of `text` that is a proper prefix of one of `tags` ("" if none)."""
    for size in range(min(len(text), max(map(len, tags)) - 1), 0, -1):
        if any(tag.startswith(text[-size:]) for tag in tags):
            return text[-size:]
    return ""
