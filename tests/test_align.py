"""Tests for calibration.align: REFERENCE 6.3 matcher cases (adapted), spoken forms, long texts."""

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
    # the last three heard words must match exactly
    ("There are 25 files", "there are twenty five files in", "unanchored_tail"),
    ("We will meet at the main station tomorrow morning.",
     "we will meet at the main station tomorow morning", "unanchored_tail"),
    # ties: which "a" was skipped, and whether the last word replaced or was added
    ("x y a a b c d e", "x y a b c", "ambiguous_path"),
    ("We will meet at the main station tomorrow morning.",
     "we will meet at the main station tomorrow mourning", "ambiguous_endpoint"),
])
def test_refused(original: str, transcript: str, reason: str) -> None:
    assert align_prefix(original, transcript) == AlignResult(None, reason, 0)


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
)
def test_exact_prefix_transcript_never_claims_beyond_it(
    tokens: list[str], k: int, as_spoken: bool, separator: str,
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
    result = align_prefix(text, transcript)
    assert result.reason == "accepted"
    assert result.char_end is not None
    assert cut_after_units(text, units, k - 1) <= result.char_end
    assert result.char_end <= cut_after_units(text, units, k)
