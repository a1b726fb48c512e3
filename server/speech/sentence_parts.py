"""Where a synthesized sentence is cut into chunks, so that no chunk holds the voice.

Piper's decoder turns a sentence's latent frames into samples at a cost linear in frames
(`server.speech.piper_tts`). A sentence decoded in one run is heard only once all of it is
decoded: one long unbreakable token (a base64 string or an id spelled letter by letter, a
comma list read number by number) made one written word of several seconds and held the voice
for as long (issue 27: first audio 1.2-1.3 s p95 under load for 16-code-point tokens, 1.6 s of
silence mid-reply). So a sentence is cut into parts that grow geometrically: the first holds at
least HEAD_MIN_MS of audio, every later one at most PART_GROWTH times the audio before it in the
sentence, so each part is decoded while the parts before it play as long as the decoder runs
faster than 1 / PART_GROWTH of real time (measured about 0.05 on a quiet machine, 0.2-0.4 under
the shared load of this project's 2 cores). The first part ends at the first boundary between
written units after HEAD_MIN_MS (early audio), a later part at the last one within its allowed
length (fewer cuts); failing one, a part ends inside a unit (or inside one engine word) at a
latent frame boundary. A unit's words stay in the part where the unit starts, with their true
sample spans: that chunk's mark of it ends after the chunk does, where the unit's audio ends in
the next one (the heard cut keeps only units whose marks ended by the played position, so a
unit cut short by a stop is never heard). Sans-I/O; offsets are samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PART_GROWTH = 2
"""Most audio of a part, as a multiple of the sentence's audio before it (at least HEAD_MIN_MS:
the first part). 2 keeps the decoder ahead of playback up to a real-time factor of 0.5; each cut
costs 2 x 16 latent frames of decoder context, so larger parts spend less."""


@dataclass(frozen=True, slots=True)
class SentencePart:
    """One chunk of a sentence: samples [start, end) and words [first, stop) whose marks it
    carries (they start in it; the last unit's may end after `end`)."""

    start: int
    end: int
    first: int
    stop: int


def split_sentence(word_units: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]],
                   samples: int, hop: int, head_min: int) -> list[SentencePart]:
    """Cut a sentence of `samples` samples into parts (see the module docstring).

    Args:
        word_units: per engine word, the inclusive range (first, last) of written units it
            speaks (`WordLocator.word_units`), in order.
        spans: per engine word, its (start, end) samples in the sentence, in order.
        samples: the sentence's length in samples, a multiple of `hop`.
        hop: samples per latent frame: every cut is a multiple of it.
        head_min: least samples of the first part.

    Returns:
        Contiguous parts covering [0, samples), each with at least one sample; every word in
        exactly one part, in order. One part when the sentence is short.

    Raises:
        ValueError: `word_units` and `spans` differ in length.
    """
    if len(word_units) != len(spans):
        raise ValueError("every word needs one sample span")
    parts: list[SentencePart] = []
    start = first = 0
    while True:
        head = start == 0
        most = start + PART_GROWTH * max(start, head_min)
        if most >= samples - hop:
            parts.append(SentencePart(start, samples, first, len(spans)))
            return parts
        least = head_min if head else start + hop
        end = _word_cut(word_units, spans, least, most, hop, earliest=head)
        if end is None:
            end = _frames(least if head else most, hop)
        stop = _words_before(word_units, spans, end, first)
        parts.append(SentencePart(start, end, first, stop))
        start, first = end, stop


def _frames(sample: int, hop: int) -> int:
    """`sample` rounded up to a multiple of `hop`."""
    return -(-sample // hop) * hop


def _word_cut(word_units: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]],
              least: int, most: int, hop: int, earliest: bool) -> int | None:
    """A frame boundary in [least, most] that ends a word whose next word starts on another
    written unit, no earlier than that boundary: the first such (`earliest`) or the last;
    None when there is none."""
    found = None
    for index in range(1, len(spans)):
        end = _frames(spans[index - 1][1], hop)
        if end > most:
            break
        if (end >= least and word_units[index][0] > word_units[index - 1][1]
                and end <= spans[index][0]):
            if earliest:
                return end
            found = end
    return found


def _words_before(word_units: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]],
                  end: int, first: int) -> int:
    """Words [first, result): those that start before `end`, and every later word of a unit one
    of them speaks (a unit's marks stay in the chunk where it starts)."""
    stop = first
    while stop < len(spans) and spans[stop][0] < end:
        stop += 1
    while first < stop < len(spans) and word_units[stop][0] <= word_units[stop - 1][1]:
        stop += 1
    return stop
