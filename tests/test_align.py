"""Tests for calibration.align: REFERENCE 6.3 matcher cases (adapted), spoken forms, the
recogniser's number formats, ties, the final transcript unit, long texts and windows."""

# ruff: noqa: RUF001  (full-width CJK punctuation is the test data)

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.align import AlignResult, align_prefix
from calibration.units import cut_after_units, heard_prefix, text_units


@pytest.mark.parametrize(("original", "transcript", "expected"), [
    # REFERENCE 6.3 case 27
    ("你好，今天我们介绍三个方法。", "你好今天我们介绍", "你好，今天我们介"),
    # case 28
    ("Hello, we will explain three options today.", "hello we will explain three",
     "Hello, we will explain"),
    # case 29: one substitution allowed for m = 10
    ("今天下午开会请提前到场。", "今天下午开慧请提前到", "今天下午开会请提前"),
    # numbers in spoken form and as digits, on either side
    ("There are 25 files in the folder.", "there are twenty five files in",
     "There are 25 files"),
    ("There are 25 files in the folder.", "There are 25 files in the", "There are 25 files in"),
    ("I have twenty-five apples in the basket.", "I have 25 apples in",
     "I have twenty-five apples"),
    ("That will be $9.05. Cash or credit?", "that will be nine dollars and five cents cash or",
     "That will be $9.05. Cash"),
    ("That will be $9.05. Cash or credit?", "That will be $9.05. Cash or credit?",
     "That will be $9.05. Cash or"),
    ("That will be $9.05. Cash or credit?", "That will be $9.05.", "That will be"),
    ("Your appointment with Dr. Lee, the general physician, is confirmed.",
     "your appointment with doctor lee the general", "Your appointment with Dr. Lee, the"),
    ("Your appointment with Dr. Lee, the general physician, is confirmed.",
     "Your appointment with Dr. Lee, the general", "Your appointment with Dr. Lee, the"),
    ("The SQL query took 10:30 minutes, OK?", "the s q l query took ten thirty minutes okay",
     "The SQL query took 10:30 minutes,"),
    # one skipped original word costs 0.5 (m = 7, budget 1: two separate skips)
    ("We will meet at the main station tomorrow morning.",
     "we will meet the station tomorrow morning", "We will meet at the main station tomorrow"),
    # a transcript that runs to the very end keeps the withheld last unit out
    ("Hello! How can I help you today?", "Hello, how can I help you today?",
     "Hello! How can I help you"),
    # contractions compare expanded, on either side; British -tre spellings as -ter
    ("If you are new to running, start slowly.", "if you're new to running start slowly",
     "If you are new to running, start"),
    ("I don't want the red one, thanks.", "I do not want the red one thanks",
     "I don't want the red one,"),
    ("Add 250 millilitres of cream to the sauce.", "add 250 milliliters of cream to",
     "Add 250 millilitres of cream"),
    # the recogniser's number formats: same digits, currency word first, digit groups joined
    ("Your appointment is at 9:15 on Tuesday morning.", "your appointment is at 915 on Tuesday",
     "Your appointment is at 9:15 on"),
    ("Your flight leaves at 10:30 in the morning.", "your flight leaves at 10.30 in the",
     "Your flight leaves at 10:30 in"),
    ("A family pass is $30, which saves you $7 today.", "a family pass is dollar 30 which saves",
     "A family pass is $30, which"),
    ("The city tax of €2.50 per person is paid at check-in.",
     "the city tax of euros 2.5 per person is", "The city tax of €2.50 per person"),
    ("The next one is booked for 11/14, and the reminder comes later.",
     "the next one is booked for 11-14 and the", "The next one is booked for 11/14, and"),
    ("The current one opened on July 4th, 1976, and it was repaired.",
     "the current one opened on July 4 1976 and it",
     "The current one opened on July 4th, 1976, and"),
    # a tie in the middle ("jacket" -> "jack it": which word is the insertion) that leads to
    # the same cut does not refuse
    ("You might want a jacket for the evening, though, because it gets cold.",
     "you might want a jack it for the evening though because",
     "You might want a jacket for the evening, though,"),
    # adapted from the reference's refusals: which "a" was skipped leads to the same cut, and
    # the withheld final unit ("mourning") is left out of the alignment, so it cannot tie
    ("x y a a b c d e f g", "x y a b c d e", "x y a a b c d"),
    ("We will meet at the main station tomorrow morning.",
     "we will meet at the main station tomorrow mourning",
     "We will meet at the main station tomorrow"),
    # adapted: "in" is the withheld final unit, so it no longer unanchors the tail
    ("There are 25 files", "there are twenty five files in", "There are 25 files"),
])
def test_accepted(original: str, transcript: str, expected: str) -> None:
    result = align_prefix(original, transcript)
    assert result.reason == "accepted"
    assert result.char_end is not None
    assert heard_prefix(original, result.char_end) == expected
    units = text_units(original)
    assert result.char_end == cut_after_units(original, units, result.heard_units)


@pytest.mark.parametrize(("original", "transcript", "reason"), [
    # REFERENCE 6.3 case 30: negation dropped at the start
    ("不要关闭服务然后重启机器。", "关闭服务然后重启", "sensitive_edit"),
    # case 31: protected deletion
    ("Please do not stop the server now.", "please do stop the server now", "sensitive_edit"),
    # case 32: digit substitution, also through spoken forms
    ("There are 15 files in the folder.", "there are 50 files in the folder", "sensitive_edit"),
    ("There are 15 files in the folder.", "there are fifty files in the folder",
     "sensitive_edit"),
    ("There are fifteen files in the folder.", "there are fifty files in the folder",
     "sensitive_edit"),
    ("That will be $9.05. Cash or credit?",
     "that will be nine dollars and fifty cents cash or credit", "sensitive_edit"),
    ("I do not want the red one, thanks.", "i do want the red one thanks", "sensitive_edit"),
    # case 33: fewer than 3 heard units
    ("我们明天去公园。", "我们", "insufficient_text"),
    ("That will be $9.05.", "$9.05", "insufficient_text"),
    ("", "one two three", "insufficient_text"),
    # case 34: repetitive text
    ("Go left then go left then stop.", "go left go left", "edit_distance"),
    # case 35: hallucination
    ("Hello world.", "thanks for watching this video", "edit_distance"),
    # two consecutive skipped original units
    ("We will meet at the main station tomorrow morning.",
     "we will meet main station tomorrow morning", "deletion_gap"),
    ("I don't want the red one, thanks.", "I do want the red one thanks", "sensitive_edit"),
    ("The hotel charges €89 per night, breakfast included.", "the hotel charges euros 80 per",
     "sensitive_edit"),
    # the last three heard words (before the withheld one) must match exactly
    ("There are 25 files here", "there are twenty five fils in", "unanchored_tail"),
    ("We will meet at the main station tomorrow morning.",
     "we will meet at the main station tomorow morning then", "unanchored_tail"),
])
def test_refused(original: str, transcript: str, reason: str) -> None:
    assert align_prefix(original, transcript) == AlignResult(None, reason, 0)


@pytest.mark.parametrize(("original", "transcript", "expected"), [
    # the final unit counts when it matches ...
    ("Hello, we will explain three options today.", "hello we will explain three",
     "Hello, we will explain three"),
    # ... or is any other plain word: a word cut in half, or a misheard one (tiny.en on Piper:
    # "doubles in" -> "doubles and", "the wooden" -> "the wind"); speech was heard there
    ("You might want a jacket for the evening.", "you might want a jack",
     "You might want a jacket"),
    ("For four people you need 500 grams of pasta.", "for four people you need 500 grand",
     "For four people you need 500 grams"),
    ("Let the dough rest until it doubles in size.", "let the dough rest until it doubles and",
     "Let the dough rest until it doubles in"),
    ("Results are sent out by the end of the day.", "results are sent out by the sand",
     "Results are sent out by the end"),
    # ... toward one original unit only: "that's" may be "that" cut in half
    ("Congratulations on the new job! That is wonderful news.",
     "congratulations on the new job that's", "Congratulations on the new job! That"),
    ("I hope you are well today.", "I hope you're", "I hope you"),
    # ... else (one letter: a fragment, "15 p." for "15 percent") it is left out
    ("You might want a jacket for the evening.", "you might want a j-", "You might want a"),
    ("That is 15% more than yesterday.", "that is 15 p.", "That is 15%"),
    # a unit of measure glued to a number, or written out in full
    ("For 4 people you need 250 millilitres of cream.", "for four people you need 250ml of",
     "For 4 people you need 250 millilitres of"),
    ("The trail is 12 km long.", "the trail is 12 kilometres long", "The trail is 12 km long."),
    # numbers never match loosely
    ("Please wait for fifteen minutes.", "please wait for fif", "Please wait for"),
    ("The tour lasts 90 minutes.", "the tour lasts 19", "The tour lasts"),
    # a letter right after "°" is the recogniser's formatting, not a heard word
    ("Expect temperatures near 25 °C at midday.", "expect temperatures near 25°C",
     "Expect temperatures near 25"),
    # ... and the original's "°" is spoken: "degrees" is not the "C" after it
    ("Expect temperatures near 25 °C at midday.", "expect temperatures near 25 degrees",
     "Expect temperatures near 25"),
    ("Expect temperatures near 25 °C at midday.", "expect temperatures near 25 degrees celsius",
     "Expect temperatures near 25 °C"),
])
def test_final_unit_kept_when_it_matches(original: str, transcript: str, expected: str) -> None:
    result = align_prefix(original, transcript, withhold_last=False)
    assert result.reason == "accepted"
    assert heard_prefix(original, result.char_end or 0) == expected
    assert result.char_end == cut_after_units(original, text_units(original), result.heard_units)


def test_a_loose_final_match_does_not_anchor_the_tail() -> None:
    original = "Results are sent out by the end of the day."
    # "sand" may stand for "the", but only "out by" match exactly before it
    assert align_prefix(original, "results are cent out by sand", withhold_last=False) == (
        AlignResult(None, "unanchored_tail", 0))


def test_final_unit_withheld_by_default() -> None:
    original = "You might want a jacket for the evening."
    assert heard_prefix(original, align_prefix(original, "you might want a jacket").char_end
                        or 0) == "You might want a"
    assert align_prefix(original, "you might want a jacket") == align_prefix(
        original, "you might want a jacket", withhold_last=True)


def test_reference_case_36_adapted_600_unit_original_is_accepted() -> None:
    rng = random.Random(36)
    vocab = [f"w{i}" for i in range(300)]
    words = [rng.choice(vocab) for _ in range(600)]
    original = " ".join(words) + "."
    assert len(text_units(original)) == 600
    result = align_prefix(original, " ".join(words[:40]))
    assert result.reason == "accepted"
    assert result.heard_units == 39
    assert heard_prefix(original, result.char_end or 0) == " ".join(words[:39])


def _long_text(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    vocab = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
             "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
             "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu"]
    return [rng.choice(vocab) for _ in range(count)]


@pytest.mark.parametrize("expected_unit", [None, 700, 640, 760])
def test_long_transcript_is_windowed_around_expected_unit(expected_unit: int | None) -> None:
    words = _long_text(7, 1500)
    original = " ".join(words)
    spoken = list(words[:700])
    spoken[300] = "banana"  # an error before the window does not matter
    spoken[650] = "banana"  # one error inside the window is within the budget
    result = align_prefix(original, " ".join(spoken), expected_unit=expected_unit)
    assert result.reason == "accepted"
    assert result.heard_units == 699


def test_long_transcript_window_refuses_on_ties() -> None:
    original = "the cat sat on the mat. " * 300
    transcript = " ".join(original.split()[:700])
    result = align_prefix(original, transcript, expected_unit=700)
    assert result.char_end is None
    assert result.reason in {"ambiguous_endpoint", "ambiguous_path"}


@pytest.mark.parametrize("expected_unit", [None, 640, 600, 700])
def test_transcript_of_the_end_of_the_audio_is_aligned_without_the_start_anchor(
    expected_unit: int | None,
) -> None:
    words = _long_text(11, 1500)
    original = " ".join(words)
    spoken = ["ban", *words[600:640]]  # a word cut in half at the start of the window
    spoken[20] = "banana"  # one recognition error
    transcript = " ".join(spoken)
    result = align_prefix(original, transcript, expected_unit=expected_unit, from_start=False)
    assert result.reason == "accepted"
    assert result.heard_units == 639
    kept = align_prefix(original, transcript, expected_unit=expected_unit, from_start=False,
                        withhold_last=False)
    assert kept.heard_units == 640
    assert align_prefix(original, transcript).reason == "edit_distance", "anchored at the start"


def test_window_of_repetitive_text_refuses() -> None:
    original = "the cat sat on the mat. " * 100
    result = align_prefix(original, "the cat sat on the mat the cat sat on the", from_start=False)
    assert result == AlignResult(None, "ambiguous_endpoint", 0)


def test_parameters_are_checked() -> None:
    with pytest.raises(ValueError):
        align_prefix("a b c", "a b c", max_error_rate=1.0)
    with pytest.raises(ValueError):
        align_prefix("a b c", "a b c", window_units=2)
    with pytest.raises(ValueError):
        align_prefix("a b c", "a b c", expected_unit=-1)


_VOCAB = ["hello", "world", "we", "will", "explain", "three", "options", "today", "not",
          "don't", "25", "$9.05", "Dr.", "SQL", "10:30", "3rd", "Lee", "coffee", "你", "好",
          "1999", "e.g.", "OK", "the", "server", "stop", "100%", "2 + 2", "U.S.A."]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(_VOCAB), min_size=4, max_size=40),
    st.integers(min_value=4, max_value=60),
    st.booleans(),
    st.sampled_from([" ", ", ", ". "]),
    st.booleans(),
)
def test_exact_prefix_transcript_never_claims_beyond_it(
    tokens: list[str], k: int, as_spoken: bool, separator: str, withhold_last: bool,
) -> None:
    text = separator.join(tokens) + "."
    units = text_units(text)
    k = min(k, len(units))
    if k < 4:
        return
    if as_spoken:
        transcript = " ".join(w for unit in units[:k] for w in unit.spoken)
    else:
        transcript = text[:cut_after_units(text, units, k)]
    result = align_prefix(text, transcript, withhold_last=withhold_last)
    assert result.reason == "accepted"
    assert result.char_end is not None
    assert cut_after_units(text, units, k - 1) <= result.char_end
    assert result.char_end <= cut_after_units(text, units, k)
    if not withhold_last:
        assert result.char_end == cut_after_units(text, units, k)
