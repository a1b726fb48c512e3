"""A sentence is decoded in parts that grow geometrically, so one long word never holds the
voice (issue 27: a 16-code-point base64 token spelled letter by letter held Piper's first audio
1.2-1.3 s p95 under load, and 1.6 s of silence mid-reply). `split_sentence` on made-up words and
the real Piper voice's chunks of replies holding long unbreakable tokens."""

from __future__ import annotations

import itertools

import pytest

from benchmarks.bench_long_tokens import KINDS, TEMPLATES
from server.speech.piper_tts import HEAD_MIN_MS
from server.speech.segmenter import SpeechSegmenter
from server.speech.sentence_parts import PART_GROWTH, SentencePart, split_sentence
from tests.conftest import loaded_synthesizer

HOP = 256


def check_parts(parts: list[SentencePart], words: int, samples: int, head_min: int) -> None:
    """Contiguous, frame-aligned, every word once, growth bounded."""
    assert parts[0].start == 0 and parts[-1].end == samples
    assert parts[0].first == 0 and parts[-1].stop == words
    for before, after in itertools.pairwise(parts):
        assert before.end == after.start and before.stop == after.first
        assert before.end % HOP == 0
    for part in parts[1:]:
        assert part.end - part.start <= PART_GROWTH * max(part.start, head_min) + HOP


def test_one_long_word_is_cut_inside_and_keeps_its_mark_where_it_starts() -> None:
    """A 6 s word (one unit, one engine word) after a short one: the head ends inside it at
    HEAD_MIN, and the long word's mark stays in the head (it starts there)."""
    spans = [(0, 2_560), (2_560, 2_560 + 6 * 22_050)]
    samples = spans[-1][1] + HOP
    parts = split_sentence([(0, 0), (1, 1)], spans, samples, HOP, head_min=6_615)
    check_parts(parts, 2, samples, 6_615)
    assert parts[0].end == 6_656 and (parts[0].first, parts[0].stop) == (0, 2)
    assert all(part.first == part.stop == 2 for part in parts[1:])
    assert len(parts) >= 4


def test_words_of_one_unit_stay_together() -> None:
    """Three engine words of one written unit (a token spelled out) are never split between
    parts, and a part boundary between units falls at a word end."""
    spans = [(i * 5_000, (i + 1) * 5_000) for i in range(12)]
    units = [(0, 0), (1, 1), (1, 1), (1, 1), *[(i, i) for i in range(2, 10)]]
    parts = split_sentence(units, spans, 60_160, HOP, head_min=6_615)
    check_parts(parts, 12, 60_160, 6_615)
    for part in parts:
        assert part.first not in (2, 3)


def test_short_sentence_is_one_part() -> None:
    parts = split_sentence([(0, 0)], [(0, 5_000)], 5_120, HOP, head_min=6_615)
    assert parts == [SentencePart(0, 5_120, 0, 1)]


def test_words_and_spans_must_pair() -> None:
    with pytest.raises(ValueError, match="one sample span"):
        split_sentence([(0, 0)], [], 5_120, HOP, head_min=6_615)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("length", [16, 30, 64])
def test_piper_chunks_of_a_long_token_grow_from_a_short_head(kind: str, length: int) -> None:
    """Real Piper: every span of a reply whose first word is a long token starts with a chunk
    of at most 2 x HEAD_MIN_MS (plus a frame), and no later chunk is longer than PART_GROWTH
    times the span's audio before it; marks stay in text order over the whole reply."""
    piper = loaded_synthesizer("piper")
    text = TEMPLATES["first"].format(token=KINDS[kind](length))
    segmenter = SpeechSegmenter()
    rate = piper.sample_rate_hz
    head_ms = 2 * HEAD_MIN_MS + 1000 * HOP / rate + 1
    char_end = 0
    for start, end in segmenter.feed(text) + segmenter.flush():
        chunks = list(piper.synthesize(text[start:end]))
        assert chunks
        assert len(chunks[0].pcm) * 1000 / rate <= head_ms or len(chunks) == 1
        before = len(chunks[0].pcm)
        for chunk in chunks[1:]:
            assert len(chunk.pcm) <= PART_GROWTH * before + 2 * HOP
            before += len(chunk.pcm)
        for chunk in chunks:
            for mark in chunk.marks:
                assert start + mark.char_start >= char_end
                char_end = start + mark.char_end
