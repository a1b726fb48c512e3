"""Word marks: where each written word of a reply sits on that reply's audio timeline."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class WordMark:
    """One written token of a reply and the audio span in which it is spoken.

    Attributes:
        char_start: inclusive code-point offset of the written token in the text it belongs to
            (a TTS segment inside a synthesiser, the whole reply once placed on the reply timeline).
        char_end: exclusive code-point offset.
        start_ms: audio start in ms, rounded down, on the timeline of the audio it belongs to.
        end_ms: audio end in ms, rounded up, so that "end_ms <= played_ms" never claims a word
            that was only partly rendered.
        estimated: True when the timing is proportional inside a sentence rather than taken from
            the TTS engine's own alignment of this synthesis run.
    """

    char_start: int
    char_end: int
    start_ms: int
    end_ms: int
    estimated: bool = False

    def shifted(self, chars: int, ms: int) -> WordMark:
        """Return this mark moved by `chars` code points and `ms` milliseconds."""
        return replace(
            self,
            char_start=self.char_start + chars,
            char_end=self.char_end + chars,
            start_ms=self.start_ms + ms,
            end_ms=self.end_ms + ms,
        )

    def to_wire(self, text: str) -> dict[str, object]:
        """Return the JSON shape sent on `response.output_audio.delta` as one entry of `marks`.

        `text` is the text the offsets index into (the reply's full text); the written token is
        sent as well so that a client never has to compute offsets itself.
        """
        return {
            "text": text[self.char_start : self.char_end],
            "char_start": self.char_start,
            "char_end": self.char_end,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            "estimated": self.estimated,
        }


class PackedWordMarks:
    """A reply's word marks kept as one array of ints, five per mark (`WordMark`'s fields in
    order), not as one object per mark; iterating yields `WordMark`s.

    For marks kept as long as a reply's recording: every object is tracked by Python's cyclic
    garbage collector, whose full collections walk all of them on the event loop. Measured
    under `benchmarks.bench_load` (200 sessions): word marks were 12,800-24,700 of the server's
    57,000-73,000 tracked objects, one per synthesized word.
    """

    __slots__ = ("_fields",)
    _WIDTH = 5

    def __init__(self) -> None:
        self._fields = array("q")

    def extend(self, marks: Iterable[WordMark]) -> None:
        """Append `marks` in order."""
        for mark in marks:
            self._fields.extend((mark.char_start, mark.char_end, mark.start_ms, mark.end_ms,
                                 mark.estimated))

    def clear(self) -> None:
        """Remove every mark."""
        del self._fields[:]

    def __len__(self) -> int:
        return len(self._fields) // self._WIDTH

    def __iter__(self) -> Iterator[WordMark]:
        fields = self._fields
        for index in range(0, len(fields), self._WIDTH):
            char_start, char_end, start_ms, end_ms, estimated = fields[index:index + self._WIDTH]
            yield WordMark(char_start, char_end, start_ms, end_ms, bool(estimated))
