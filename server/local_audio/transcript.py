"""The conversation as `duplex-demo talk` prints it: one line per turn or note, the
assistant's text streamed onto its own line as it arrives."""

from __future__ import annotations

from typing import Any, TextIO


class TranscriptPrinter:
    """Prints to `out` (a text stream): `line` for a whole line, `assistant` for a piece of
    a reply's text (appended to that reply's open line), `cut` for a heard-text cut.

    Args:
        out: where to print (stdout for the command).
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._open: str | None = None

    def assistant(self, response_id: str, delta: str) -> None:
        """Append `delta` of `response_id`'s text, opening an `assistant:` line for a new
        reply."""
        if self._open != response_id:
            self.end_line()
            self.out.write("assistant: ")
            self._open = response_id
        self.out.write(delta)
        self.out.flush()

    def end_line(self) -> None:
        """End the assistant's open line, if any."""
        if self._open is not None:
            self.out.write("\n")
            self._open = None
            self.out.flush()

    def line(self, text: str) -> None:
        """Print `text` on a line of its own."""
        self.end_line()
        print(text, file=self.out, flush=True)

    def cut(self, event: dict[str, Any]) -> None:
        """Print a `conversation.item.heard` event: where, how, what was heard and what not,
        e.g. `[cut at 4500 ms by marks] heard: 'one two' | not heard: 'three'`."""
        heard = event.get("text", "")
        full = event.get("full_text", "")
        unheard = full[len(heard):] if full.startswith(heard) else ""
        self.line(f"[cut at {event.get('played_ms')} ms by {event.get('method')}] "
                  f"heard: {heard!r} | not heard: {unheard.strip()!r}")
