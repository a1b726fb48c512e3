"""Piper's phoneme words aligned to the written words: a mismatch costs only the words around it
(issue 12 item 2), on synthetic phoneme words and on real Piper audio."""

# ruff: noqa: RUF001  (IPA phonemes are the test data)
from __future__ import annotations

import pytest

from server.speech.synthesizer import SpeechSynthesizer
from server.speech.word_alignment import PhonemeWord, align_words, comparison_form
from tests.conftest import loaded_synthesizer


def spoken(*words: str, samples_per_phoneme: int = 100) -> list[PhonemeWord]:
    """Phoneme words with one phoneme per character, back to back, a 50-sample gap between."""
    result: list[PhonemeWord] = []
    position = 0
    for word in words:
        phonemes = []
        for phoneme in word:
            phonemes.append((phoneme, position, position + samples_per_phoneme))
            position += samples_per_phoneme
        result.append(PhonemeWord(tuple(phonemes)))
        position += 50
    return result


def test_matching_lists_are_exact_and_take_each_word_span() -> None:
    words = spoken("kat", "sat", "mat")
    timings, aligned = align_words(["kˈat", "sat", "mˌat"], words)
    assert aligned == 3
    assert [(t.start, t.end, t.exact) for t in timings] == [
        (w.start, w.end, True) for w in words
    ]


def test_one_mismatch_costs_only_its_own_word() -> None:
    timings, _ = align_words(["wan", "tu", "θri", "zzzzz", "for", "faiv"],
                             spoken("wan", "tu", "θri", "ɡɹin", "for", "faiv"))
    assert [t.exact for t in timings] == [True, True, True, False, True, True]
    assert timings[2].end <= timings[3].start <= timings[3].end <= timings[4].start


def test_two_words_glued_into_one_are_split_at_their_phoneme_boundary() -> None:
    """Piper's "cat cat" glued at espeak-ng's clause split: both halves stay exact."""
    words = spoken("kæt", "kætkæt", "kæt")
    timings, _ = align_words(["kæt"] * 4, words)
    assert all(t.exact for t in timings)
    assert timings[1].start == words[1].start and timings[2].end == words[1].end
    assert timings[1].end == timings[2].start == words[1].start + 300


def test_a_symbol_read_only_by_the_tts_leaves_the_others_exact() -> None:
    """Piper reads the second "-" of CVE-2024-3094 as "dash"; espeak-ng's "-" is silent."""
    timings, _ = align_words(["siː", "", "tuː", "naɪn"], spoken("siː", "tuː", "dæʃ", "naɪn"))
    assert [t.exact for t in timings] == [True, True, True, True]
    assert timings[1].start == timings[1].end == timings[0].end


def test_free_end_leaves_the_written_words_of_the_next_chunk() -> None:
    timings, aligned = align_words(["wan", "tu", "θri", "for"], spoken("wan", "tu"),
                                   free_end=True)
    assert aligned == 2 and all(t.exact for t in timings)


def test_comparison_form_ignores_stress_and_linking_marks() -> None:
    assert comparison_form("sˌiːvˌiːʲˈiː") == comparison_form("siːviːiː")


@pytest.fixture(scope="module")
def piper() -> SpeechSynthesizer:
    return loaded_synthesizer("piper")


@pytest.mark.parametrize(("text", "marks"), [
    ("cat " * 200, 200),
    ("Version 3.12.1 fixed 27 bugs, including CVE-2024-3094, and sped up start-up by 2x.", 15),
    ("It is fixed. Read CVE-2024-3094 now.", 8),
])
def test_issue_inputs_get_exact_piper_marks(piper: SpeechSynthesizer, text: str,
                                            marks: int) -> None:
    """Issue 12 item 2: 200 of 200 and 11 of 16 marks were estimated."""
    chunks = list(piper.synthesize(text))
    got = [mark for chunk in chunks for mark in chunk.marks]
    assert len(got) == marks
    assert not [mark for mark in got if mark.estimated]
    durations_ms = [len(chunk.pcm) * 1000 // piper.sample_rate_hz + 1 for chunk in chunks]
    for index, chunk in enumerate(chunks):
        assert all(a.end_ms <= b.start_ms for a, b in zip(chunk.marks, chunk.marks[1:],
                                                          strict=False))
        # A word's mark is in the chunk where the word starts; a long word (a CVE id spelled
        # out) may end in a later chunk (`server/speech/sentence_parts.py`).
        assert all(0 <= m.start_ms < durations_ms[index] for m in chunk.marks)
        assert all(m.start_ms <= m.end_ms <= sum(durations_ms[index:]) for m in chunk.marks)


def test_repeated_words_marks_follow_the_audio(piper: SpeechSynthesizer) -> None:
    """The 200 "cat" marks are evenly paced, as the words are: no stretch is squeezed."""
    chunks = list(piper.synthesize("cat " * 200))
    marks = [mark for chunk in chunks for mark in chunk.marks]
    lengths = sorted(mark.end_ms - mark.start_ms for mark in marks)
    assert lengths[-1] < 3 * lengths[len(lengths) // 2]
