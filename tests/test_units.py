"""Tests for calibration.units: spans, spoken forms, grapheme-safe cuts, and the cases file."""

# ruff: noqa: RUF001  (full-width CJK punctuation and curly apostrophes are the test data)

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.graphemes import grapheme_boundaries
from calibration.number_words import cardinal_words, integer_reading, ordinal_words
from calibration.units import (
    cut_after_units,
    heard_prefix,
    snap_down,
    spoken_words,
    text_units,
    unit_duration_ms,
)


def heard_at(text: str, played_ms: int) -> str:
    """Heard text under the cases-file timing rule (a unit is heard when its end <= played)."""
    units = text_units(text)
    elapsed = 0
    count = 0
    for unit in units:
        elapsed += unit_duration_ms(unit)
        if elapsed > played_ms:
            break
        count += 1
    return heard_prefix(text, cut_after_units(text, units, count))


# /work/shared/cases/interruption_cases.md: (id, written reply, played_ms, expected heard text).
CASES = [
    ("F1", "Democracy in ancient Athens began with the reforms of Cleisthenes. Citizens voted "
     "directly in the assembly. Women, slaves and foreigners were excluded.", 1700,
     "Democracy in ancient Athens"),
    ("F2a", "The capital of Australia is Canberra, not Sydney.", 2100,
     "The capital of Australia is"),
    ("F2b", "The capital of Australia is Canberra, not Sydney.", 0, ""),
    ("F3-turn2", "That will be $9.05. Cash or credit? There is a store discount you can apply "
     "now.", 4500, "That will be $9.05. Cash or credit?"),
    ("F7", "Hello! How can I help you today?", 2800, "Hello! How can I help you today?"),
    ("F7-variant", "Hello! How can I help you today?", 1700, "Hello! How can I"),
    ("F9", "The weather today is sunny with a high of 25 degrees.", 2100,
     "The weather today is sunny"),
    ("F14", "🎉🎉 **Great job!** Well done.", 900, "🎉🎉 **Great job!**"),
    ("F16", "Your balance is forty dollars. Your next payment is due on Friday.", 2400,
     "Your balance is forty dollars. Your"),
    ("F18-R1", "One moment please.", 500, "One"),
    ("F18-R2", "Your appointment with Dr. Lee, the general physician, is confirmed for the day "
     "after tomorrow.", 2900, "Your appointment with Dr. Lee, the general"),
    ("F19", "2 + 2 = 4. Anything else?", 1700, "2 + 2 ="),
    ("F21-zh", "你好！我是你的助手。今天想聊什么？", 1100, "你好！我是"),
    ("F21-ja", "こんにちは、今日はいい天気ですね。", 1600, "こんにちは、今"),
    ("F23", "Let me explain the three plans we offer.", 800, "Let me"),
    ("F25-R1", "Okay.", 400, "Okay."),
    ("F25-R2", "Let me read the disclaimer: calls may be recorded for quality purposes.", 800,
     "Let me"),
    ("F28", "Congrats on the launch 🎉 we did it! 👩‍👩‍👧", 1700, "Congrats on the launch"),
    ("F29", "one two three four five six seven eight nine ten", 1600, "one two three four"),
    ("F31", "10, 9, 8, 7, 6, 5, 4, 3, 2, 1, liftoff!", 2000, "10, 9, 8, 7, 6,"),
]


@pytest.mark.parametrize(("case_id", "text", "played_ms", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_cases_file_heard_text(case_id: str, text: str, played_ms: int, expected: str) -> None:
    assert heard_at(text, played_ms) == expected


def test_f14_edge_emoji_only_reply_has_no_units() -> None:
    assert text_units("👍") == []
    assert snap_down("👍", 1) == 0
    assert heard_prefix("👍", 1) == "👍"


def test_f28_cut_after_last_word_stops_before_detached_zwj_sequence() -> None:
    text = "Congrats on the launch 🎉 we did it! 👩‍👩‍👧"
    units = text_units(text)
    assert heard_prefix(text, cut_after_units(text, units, len(units))) == (
        "Congrats on the launch 🎉 we did it!"
    )
    attached = "we did it!👩‍👩‍👧"
    assert cut_after_units(attached, text_units(attached), 3) == len(attached)


def test_reference_case_26_units_and_spans() -> None:
    text = "今天用ＡＩ，Don't stop！"
    units = text_units(text)
    assert [u.norm for u in units] == ["今", "天", "用", "ai", "don't", "stop"]
    assert [text[u.start:u.end] for u in units] == ["今", "天", "用", "ＡＩ", "Don't", "stop"]
    assert [u.cjk for u in units] == [True, True, True, False, False, False]
    assert [u.protected for u in units] == [False, False, False, False, True, False]


@pytest.mark.parametrize(("token", "spoken"), [
    ("$9.05", "nine dollars and five cents"),
    ("$42.50", "forty two dollars and fifty cents"),
    ("$1", "one dollar"),
    ("$0.50", "fifty cents"),
    ("$2,500", "two thousand five hundred dollars"),
    ("€5", "five euros"),
    ("£3", "three pounds"),
    ("25", "twenty five"),
    ("2,500", "two thousand five hundred"),
    ("1.5", "one point five"),
    ("-3", "minus three"),
    ("100%", "one hundred percent"),
    ("10:30", "ten thirty"),
    ("10:05", "ten oh five"),
    ("10:00", "ten o'clock"),
    ("3rd", "third"),
    ("21st", "twenty first"),
    ("3/4", "three quarters"),
    ("2/3", "two thirds"),
    ("1/2", "one half"),
    ("555-0123", "five five five zero one two three"),
    ("1999", "nineteen ninety nine"),
    ("2005", "two thousand five"),
    ("1990s", "nineteen nineties"),
    ("Dr.", "doctor"),
    ("Mr.", "mister"),
    ("Mrs.", "missus"),
    ("e.g.", "for example"),
    ("i.e.", "that is"),
    ("etc.", "et cetera"),
    ("U.S.A.", "u s a"),
    ("a.m.", "a m"),
    ("p.m.", "p m"),
    ("AM", "a m"),
    ("SQL", "s q l"),
    ("API", "a p i"),
    ("APIs", "a p i s"),
    ("OK", "okay"),
    ("NOT", "not"),
    ("+", "plus"),
    ("=", "equals"),
    ("&", "and"),
    ("@", "at"),
    ("%", "percent"),
    ("don’t", "don't"),
    ("5pm", "five p m"),
])
def test_token_is_one_unit_with_spoken_form(token: str, spoken: str) -> None:
    units = text_units(f"say {token} now")
    assert units[0].norm == "say"
    assert len(units) == 3, [u.spoken for u in units]
    unit = units[1]
    assert (unit.start, unit.end) == (4, 4 + len(token))
    assert unit.spoken == tuple(spoken.split())


def test_spoken_word_counts_from_the_cases_file() -> None:
    assert len(spoken_words("$9.05")) == 5
    assert len(spoken_words("Dr.")) == 1
    assert len(spoken_words("25")) == 2
    assert len(spoken_words("2 + 2 = 4.")) == 5
    assert len(spoken_words("Dr. Smith paid $42.50 on 3/4, at 10:30 AM.")) == 17


def test_spoken_words_are_tagged_with_their_unit() -> None:
    assert spoken_words("Pay $9.05 now") == [
        ("pay", 0), ("nine", 1), ("dollars", 1), ("and", 1), ("five", 1), ("cents", 1),
        ("now", 2),
    ]


def test_mixed_latin_cjk_run_is_split_and_all_cjk_blocks_are_per_character() -> None:
    text = "AI今天 㐀𠀀丽 ひらがなカタカナ 한국어 ｶﾞ"
    units = text_units(text)
    assert [text[u.start:u.end] for u in units] == [
        "AI", "今", "天", "㐀", "𠀀", "丽", "ひ", "ら", "が", "な", "カ", "タ", "カ", "ナ",
        "한", "국", "어", "ｶﾞ",
    ]
    assert all(u.cjk for u in units[1:])
    assert units[-1].norm == "ガ"


def test_conjoining_jamo_syllable_is_one_unit() -> None:
    text = "\u1112\u1161\u11ab\u1100\u1173\u11af"  # 한글 as conjoining jamo
    units = text_units(text)
    assert [(u.start, u.end) for u in units] == [(0, 3), (3, 6)]
    assert [u.norm for u in units] == ["한", "글"]


def test_protected_units() -> None:
    text = "I do not know, we can't, never 不 没有 It isn't 15 files nor twelve"
    protected = [u.norm for u in text_units(text) if u.protected]
    assert protected == ["not", "can't", "never", "不", "没", "isn't", "15", "nor"]


def test_punctuation_markup_and_emoji_are_not_units() -> None:
    text = "## Title: `code` **bold** _it_ 🎉 👩🏽‍💻 🇺🇸 — … ©"
    assert [u.norm for u in text_units(text)] == ["title", "code", "bold", "it"]


def test_soft_hyphen_joins_a_word() -> None:
    units = text_units("co\u00adoperate now")
    assert [(u.start, u.end, u.norm) for u in units] == [(0, 10, "cooperate"), (11, 14, "now")]


def test_combining_marks_stay_inside_words() -> None:
    text = "cafe\u0301 nai\u0308ve"
    units = text_units(text)
    assert [(u.start, u.end) for u in units] == [(0, 5), (6, 12)]
    assert [u.norm for u in units] == ["café", "naïve"]


@pytest.mark.parametrize(("text", "expected"), [
    ("a👩‍👩‍👧b", [0, 1, 6, 7]),
    ("👍🏽!", [0, 2, 3]),
    ("🇺🇸🇬🇧🇫", [0, 2, 4, 5]),
    ("e\u0301\u0323x", [0, 3, 4]),
    ("❤\ufe0f#\ufe0f\u20e3", [0, 2, 5]),
    ("\r\nx", [0, 2, 3]),
    ("🏳\ufe0f\u200d🌈", [0, 4]),
])
def test_grapheme_boundaries(text: str, expected: list[int]) -> None:
    assert grapheme_boundaries(text) == expected


def test_cut_extends_over_attached_punctuation_markup_and_emoji() -> None:
    text = "Done!👩‍👩‍👧 next (really).** Yes"
    units = text_units(text)
    assert heard_prefix(text, cut_after_units(text, units, 1)) == "Done!👩‍👩‍👧"
    assert heard_prefix(text, cut_after_units(text, units, 2)) == "Done!👩‍👩‍👧 next"
    assert heard_prefix(text, cut_after_units(text, units, 3)) == "Done!👩‍👩‍👧 next (really).**"


def test_cut_after_units_validates_count() -> None:
    units = text_units("a b")
    assert cut_after_units("a b", units, 0) == 0
    with pytest.raises(ValueError):
        cut_after_units("a b", units, 3)
    with pytest.raises(ValueError):
        heard_prefix("a b", 4)


def test_snap_down() -> None:
    text = "Hello, world! Bye."
    assert snap_down(text, 0) == 0
    assert snap_down(text, 4) == 0
    assert snap_down(text, 5) == 6
    assert snap_down(text, 11) == 6
    assert snap_down(text, 12) == 13
    assert snap_down(text, 13) == 13
    assert snap_down(text, len(text)) == len(text)


def test_number_converter() -> None:
    assert cardinal_words(0) == ("zero",)
    assert cardinal_words(115) == ("one", "hundred", "fifteen")
    assert " ".join(cardinal_words(1_234_567_890)) == (
        "one billion two hundred thirty four million five hundred sixty seven thousand "
        "eight hundred ninety"
    )
    assert cardinal_words(10**12) == ("one",) + ("zero",) * 12
    assert ordinal_words(12) == ("twelfth",)
    assert ordinal_words(40) == ("fortieth",)
    assert integer_reading("007") == ("zero", "zero", "seven")
    assert integer_reading("1900") == ("nineteen", "hundred")
    assert integer_reading("1905") == ("nineteen", "oh", "five")
    assert integer_reading("1234", year=False) == ("one", "thousand", "two", "hundred",
                                                   "thirty", "four")


_PIECES = st.sampled_from([
    "word", "don't", "$9.05", "25", "Dr.", "SQL", " ", "  ", ", ", "!", "**", "🎉", "👩‍👩‍👧",
    "👍🏽", "🇺🇸", "e\u0301", "你", "こ", "한", "\n", "3/4", "10:30", "+", "—",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=25))
def test_units_and_cuts_respect_grapheme_boundaries(pieces: list[str]) -> None:
    text = "".join(pieces)
    bounds = set(grapheme_boundaries(text))
    units = text_units(text)
    previous_end = 0
    for count, unit in enumerate(units, start=1):
        assert unit.start >= previous_end
        assert unit.start in bounds and unit.end in bounds
        previous_end = unit.end
        cut = cut_after_units(text, units, count)
        assert cut in bounds
        assert unit.end <= cut <= (units[count].start if count < len(units) else len(text))
        assert not any(ch.isspace() for ch in text[unit.end:cut])
        assert snap_down(text, cut) == cut
