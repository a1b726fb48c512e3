"""Valid Unicode out of a responder's deltas, whatever the model streamed.

A JSON string may hold UTF-16 surrogate escapes (RFC 8259 section 7), and an LLM server that
streams byte-level tokens sends an emoji's pair split across two events (`"\\ud83d"`, then
`"\\udc4d"`) or a lone half; `json.loads` turns each into a lone surrogate code point, which no
UTF-8 encoder accepts (Piper's phonemizer and the event encoder raised `UnicodeEncodeError`, and
the reply never ended: issue 27). `SurrogateRepair` joins a pair split across deltas and
replaces a lone surrogate by U+FFFD REPLACEMENT CHARACTER, as a UTF-16 decoder with
errors="replace" does (Unicode 15, section 3.9, "U+FFFD substitution").
"""

from __future__ import annotations

REPLACEMENT = "\ufffd"


def repair_surrogates(text: str) -> str:
    """`text` with each valid surrogate pair joined into its code point and every lone
    surrogate replaced by U+FFFD; text without surrogates comes back unchanged."""
    if not any("\ud800" <= char <= "\udfff" for char in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class SurrogateRepair:
    """Repair a stream of text deltas: `feed` each delta, `flush` at the end of the stream.

    A delta that ends with a high surrogate keeps it back until the next delta says whether
    its low half follows; the concatenation of every returned piece is
    `repair_surrogates(concatenation of the deltas)`.
    """

    def __init__(self) -> None:
        """A repair with nothing kept back."""
        self._held = ""

    def feed(self, delta: str) -> str:
        """The repaired text of `delta` (and of a high surrogate kept back from before);
        may be "" (a delta of one high surrogate)."""
        text = self._held + delta
        self._held = text[-1] if text and "\ud800" <= text[-1] <= "\udbff" else ""
        return repair_surrogates(text[: len(text) - len(self._held)])

    def flush(self) -> str:
        """End of the stream: U+FFFD for a high surrogate still kept back, else ""."""
        held, self._held = self._held, ""
        return REPLACEMENT if held else ""
