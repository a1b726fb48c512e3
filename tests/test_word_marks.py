"""Word marks on real Piper audio (deterministic voice), checked against the written units and
against espeak-ng's own word events for the same text."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from calibration.speakable import make_speakable
from calibration.units import text_units
from calibration.word_marks import PackedWordMarks, WordMark
from server.speech.engines import create_synthesizer
from server.speech.synthesizer import SpeechChunk, SpeechSynthesizer

SENTENCES = (
    "Dr. Smith paid $42.50 on 3/4, at 10:30 AM.",
    "That will be $9.05. Cash or credit?",
    "The weather today is sunny with a high of 25 degrees.",
    "🎉🎉 **Great job!** Well done.",
    "U.S.A. and SQL APIs cost 100% more on 555-0123.",
    "Well... I think so, and then… we left.",
    "Democracy in ancient Athens began with the reforms of Cleisthenes.",
    "## Plan\n- Call `Mr. Lee` at 9 a.m. on the 3rd.",
)
MARKUP = set("*_#`")


@pytest.fixture(scope="module")
def piper() -> SpeechSynthesizer:
    """One deterministic, warmed-up Piper voice for the module."""
    synthesizer = create_synthesizer("piper", deterministic=True)
    synthesizer.warm_up()
    return synthesizer


@pytest.fixture(scope="module")
def espeak() -> SpeechSynthesizer:
    """The espeak-ng synthesizer (en-us)."""
    return create_synthesizer("espeak")


@pytest.fixture(scope="module")
def piper_chunks(piper: SpeechSynthesizer) -> dict[str, list[SpeechChunk]]:
    """Piper chunks of every sentence, synthesized once."""
    return {text: list(piper.synthesize(text)) for text in SENTENCES}


def timeline(chunks: list[SpeechChunk], sample_rate_hz: int) -> tuple[list[WordMark], float]:
    """All marks on one timeline (chunks back to back) and the total duration in ms."""
    marks: list[WordMark] = []
    offset_ms = 0.0
    for chunk in chunks:
        marks.extend(
            WordMark(m.char_start, m.char_end, m.start_ms + offset_ms, m.end_ms + offset_ms,
                     m.estimated)
            for m in chunk.marks
        )
        offset_ms += len(chunk.pcm) * 1000 / sample_rate_hz
    return marks, offset_ms


@pytest.mark.parametrize("text", SENTENCES)
def test_marks_are_ordered_and_inside_their_chunk(
    text: str, piper: SpeechSynthesizer, piper_chunks: dict[str, list[SpeechChunk]]
) -> None:
    """Each mark starts inside its chunk; only a chunk's last mark may end after it (a unit
    cut by a part boundary, `server.speech.sentence_parts`), and then inside the audio that
    follows."""
    chunks = piper_chunks[text]
    assert chunks
    previous_char_end = 0
    total_ms = sum(len(chunk.pcm) for chunk in chunks) * 1000 / piper.sample_rate_hz
    offset_ms = 0.0
    for chunk in chunks:
        assert chunk.pcm.dtype == np.float32
        duration_ms = math.ceil(len(chunk.pcm) * 1000 / piper.sample_rate_hz)
        previous_end_ms = 0
        for index, mark in enumerate(chunk.marks):
            last = index + 1 == len(chunk.marks)
            assert 0 <= previous_end_ms <= mark.start_ms < duration_ms
            assert mark.start_ms <= mark.end_ms <= (total_ms - offset_ms + 1 if last
                                                    else duration_ms)
            assert previous_char_end <= mark.char_start < mark.char_end <= len(text)
            previous_end_ms, previous_char_end = mark.end_ms, mark.char_end
        offset_ms += len(chunk.pcm) * 1000 / piper.sample_rate_hz


@pytest.mark.parametrize("text", SENTENCES)
def test_marks_cover_every_spoken_unit_in_order_exactly(
    text: str, piper_chunks: dict[str, list[SpeechChunk]]
) -> None:
    marks = [mark for chunk in piper_chunks[text] for mark in chunk.marks]
    assert not any(mark.estimated for mark in marks)
    covering = []
    for unit in text_units(text):
        owners = [
            index for index, mark in enumerate(marks)
            if mark.char_start <= unit.start and unit.end <= mark.char_end
        ]
        assert len(owners) == 1, text[unit.start : unit.end]
        covering.append(owners[0])
    assert covering == sorted(covering)
    assert set(covering) == set(range(len(marks)))


@pytest.mark.parametrize(
    ("text", "token"),
    [
        ("Dr. Smith paid $42.50 on 3/4, at 10:30 AM.", "Dr."),
        ("Dr. Smith paid $42.50 on 3/4, at 10:30 AM.", "$42.50"),
        ("Dr. Smith paid $42.50 on 3/4, at 10:30 AM.", "3/4"),
        ("Dr. Smith paid $42.50 on 3/4, at 10:30 AM.", "10:30"),
        ("That will be $9.05. Cash or credit?", "$9.05"),
        ("The weather today is sunny with a high of 25 degrees.", "25"),
        ("U.S.A. and SQL APIs cost 100% more on 555-0123.", "U.S.A."),
        ("U.S.A. and SQL APIs cost 100% more on 555-0123.", "APIs"),
        ("U.S.A. and SQL APIs cost 100% more on 555-0123.", "cost"),
        ("U.S.A. and SQL APIs cost 100% more on 555-0123.", "100%"),
        ("U.S.A. and SQL APIs cost 100% more on 555-0123.", "555-0123"),
    ],
)
def test_numbers_and_abbreviations_map_to_the_written_token(
    text: str, token: str, piper_chunks: dict[str, list[SpeechChunk]]
) -> None:
    marks = [mark for chunk in piper_chunks[text] for mark in chunk.marks]
    matching = [mark for mark in marks if text[mark.char_start : mark.char_end] == token]
    assert len(matching) == 1
    assert matching[0].end_ms - matching[0].start_ms > 80


@pytest.mark.parametrize("text", SENTENCES)
def test_piper_words_follow_espeak_words(
    text: str, piper: SpeechSynthesizer, espeak: SpeechSynthesizer,
    piper_chunks: dict[str, list[SpeechChunk]],
) -> None:
    piper_marks, piper_ms = timeline(piper_chunks[text], piper.sample_rate_hz)
    espeak_marks, espeak_ms = timeline(list(espeak.synthesize(text)), espeak.sample_rate_hz)
    assert [(m.char_start, m.char_end) for m in piper_marks] == [
        (m.char_start, m.char_end) for m in espeak_marks
    ]
    starts = [m.start_ms for m in piper_marks]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    for piper_mark, espeak_mark in zip(piper_marks, espeak_marks, strict=True):
        assert abs(piper_mark.start_ms / piper_ms - espeak_mark.start_ms / espeak_ms) < 0.12


@pytest.mark.parametrize("text", ["🎉🎉 **Great job!** Well done.", SENTENCES[-1]])
def test_emoji_and_markup_are_never_spoken_or_marked(
    text: str, piper: SpeechSynthesizer, piper_chunks: dict[str, list[SpeechChunk]]
) -> None:
    for chunk in piper_chunks[text]:
        for mark in chunk.marks:
            written = text[mark.char_start : mark.char_end]
            assert not MARKUP & set(written) and "🎉" not in written
    plain = make_speakable(text).text.strip()
    assert plain and not MARKUP & set(plain) and "🎉" not in plain
    assert np.array_equal(
        np.concatenate([chunk.pcm for chunk in piper_chunks[text]]),
        np.concatenate([chunk.pcm for chunk in piper.synthesize(plain)]),
    )


def test_ellipsis_does_not_glue_words(piper_chunks: dict[str, list[SpeechChunk]]) -> None:
    text = "Well... I think so, and then… we left."
    written = [text[m.char_start : m.char_end] for c in piper_chunks[text] for m in c.marks]
    assert written == ["Well", "I", "think", "so", "and", "then", "we", "left"]


def test_marks_sit_on_speech_not_on_the_leading_silence(
    piper: SpeechSynthesizer, piper_chunks: dict[str, list[SpeechChunk]]
) -> None:
    chunk = piper_chunks["The weather today is sunny with a high of 25 degrees."][0]
    first = chunk.marks[0]
    lead = chunk.pcm[: first.start_ms * piper.sample_rate_hz // 1000]
    word = chunk.pcm[
        first.start_ms * piper.sample_rate_hz // 1000 : first.end_ms * piper.sample_rate_hz // 1000
    ]
    assert 20 <= first.start_ms <= 150
    assert np.sqrt(np.mean(lead**2)) * 20 < np.sqrt(np.mean(word**2))


def test_segment_with_nothing_speakable_yields_no_chunk(piper: SpeechSynthesizer) -> None:
    assert list(piper.synthesize("👍")) == []
    assert list(piper.synthesize(" **🎉** ")) == []


def test_text_the_voice_spells_out_gets_ordered_marks_over_every_unit(
    piper: SpeechSynthesizer,
) -> None:
    """The English voice reads kana letter by letter ("Japanese letter"); its phoneme words
    still align with espeak-ng's words, so the marks are exact, in order, and cover the text."""
    text = "こんにちは、今日はいい天気ですね。"
    # The English Piper voice itself: the "piper" engine speaks Japanese with espeak-ng voices.
    marks, _ = timeline(list(piper.main.synthesize(text)), piper.sample_rate_hz)
    assert marks and not any(mark.estimated for mark in marks)
    units = text_units(text)
    assert marks[0].char_start == units[0].start and marks[-1].char_end == units[-1].end
    # Marks are whole ms (start rounded down, end up: `samples_to_ms`): 1 ms of rounding.
    assert all(a.char_end <= b.char_start and a.end_ms <= b.start_ms + 1
               for a, b in itertools.pairwise(marks))
    assert {unit.start for unit in units} >= {mark.char_start for mark in marks}


def test_packed_word_marks_give_back_the_marks_they_were_given() -> None:
    marks = [WordMark(0, 5, 0, 180), WordMark(6, 11, 180, 410, estimated=True),
             WordMark(12, 13, 2**40, 2**40 + 1)]
    packed = PackedWordMarks()
    assert not packed and list(packed) == []
    packed.extend(marks[:1])
    packed.extend(iter(marks[1:]))
    assert len(packed) == 3 and list(packed) == marks
    assert [type(mark.estimated) for mark in packed] == [bool, bool, bool]
    packed.clear()
    assert len(packed) == 0 and list(packed) == []
