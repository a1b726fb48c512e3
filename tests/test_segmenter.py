"""SpeechSegmenter: spans cover the reply exactly, first clause early, then whole sentences."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.speech.segmenter import (
    _WORD,
    FIRST_PIECE_MAX_WORDS,
    FIRST_PIECE_SPLIT_WORDS,
    MAX_PIECE_WORDS,
    SpeechSegmenter,
)


def segments(text: str, *, first_clause: bool = True) -> list[str]:
    segmenter = SpeechSegmenter(first_clause=first_clause)
    spans = segmenter.feed(text) + segmenter.flush()
    return [text[start:end] for start, end in spans]


def spans_fed_in_pieces(text: str, cuts: list[int]) -> list[tuple[int, int]]:
    segmenter = SpeechSegmenter()
    bounds = [0, *sorted(cuts), len(text)]
    spans: list[tuple[int, int]] = []
    for start, end in pairwise(bounds):
        spans += segmenter.feed(text[start:end])
    return spans + segmenter.flush()


def test_first_clause_then_sentences_with_trailing_whitespace() -> None:
    text = "Well, once upon a time, there was a cat.  It sat on a mat, all day. The end."
    assert segments(text) == [
        "Well, once upon a time, ",
        "there was a cat.  ",
        "It sat on a mat, all day. ",
        "The end.",
    ]


def test_first_clause_is_emitted_before_its_sentence_ends() -> None:
    segmenter = SpeechSegmenter()
    assert segmenter.feed("10, 9, 8, 7") == [(0, 10)]
    assert segmenter.feed(", 6, 5, 4, 3, 2, 1, liftoff!") == []
    assert segmenter.flush() == [(10, len("10, 9, 8, 7, 6, 5, 4, 3, 2, 1, liftoff!"))]


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Good bread needs only four things: flour, water, salt and yeast.", "Good bread "
         "needs only four things: "),
        ("Let me explain; the three plans differ.", "Let me explain; "),
        ("The answer to that \u2014 sadly \u2014 is no.", "The answer to that \u2014 "),
        ("The answer to that - sadly - is no.", "The answer to that - "),
        ("Yes, I can help you place your order. Please tell me.", "Yes, I can help you place "
         "your order. "),
        ("It costs 1,500 dollars in total, roughly.", "It costs 1,500 dollars in total, "),
        ("Meet at 10:30 tomorrow: bring tea.", "Meet at 10:30 tomorrow: "),
        ("A well-known fact, sadly.", "A well-known fact, "),
    ],
)
def test_first_clause_needs_three_words_and_a_real_clause_mark(text: str, first: str) -> None:
    assert segments(text)[0] == first


def test_without_splits_a_long_sentence_stays_one_span() -> None:
    text = " ".join(["word"] * 40) + ". Next."
    assert segments(text, first_clause=False) != [text[:-5], "Next."]
    segmenter = SpeechSegmenter(first_clause=False, split_long=False)
    assert segmenter.feed(text) + segmenter.flush() == [(0, len(text) - 5), (len(text) - 5,
                                                                              len(text))]


def test_without_first_clause_every_segment_is_a_sentence() -> None:
    text = "10, 9, 8, 7, 6, 5, 4, 3, 2, 1, liftoff! Next one."
    assert segments(text, first_clause=False) == ["10, 9, 8, 7, 6, 5, 4, 3, 2, 1, liftoff! ",
                                                  "Next one."]


def test_abbreviations_initialisms_and_decimals_do_not_end_sentences() -> None:
    text = (
        "Ask Dr. Lee. Mr. Smith paid $9.05 for 3.5 kilos. He lives in the U.S.A. Today, e.g. "
        "Monday, works. St. Ives is small."
    )
    assert segments(text, first_clause=False) == [
        "Ask Dr. Lee. ",
        "Mr. Smith paid $9.05 for 3.5 kilos. ",
        "He lives in the U.S.A. Today, e.g. Monday, works. ",
        "St. Ives is small.",
    ]


def test_lower_case_continuation_and_quoted_ellipsis_do_not_end_sentences() -> None:
    text = 'Wait... what? I was cut off after "... 7, 6,", so here. He said "yes." Then left.'
    assert segments(text, first_clause=False) == [
        "Wait... what? ",
        'I was cut off after "... 7, 6,", so here. ',
        'He said "yes." ',
        "Then left.",
    ]


def test_other_terminators_closers_and_newlines() -> None:
    text = "Really?! Yes\u2026 Done. \U0001f389\U0001f389 **Great job!** Well done.\nTitle\n\nBody"
    assert segments(text, first_clause=False) == [
        "Really?! ",
        "Yes\u2026 ",
        "Done. ",
        "\U0001f389\U0001f389 **Great job!** ",
        "Well done.\n",
        "Title\n\n",
        "Body",
    ]


def test_cjk_sentence_ends_need_no_whitespace() -> None:
    assert segments("\u4f60\u597d\uff01\u6211\u662f\u4f60\u7684\u52a9\u624b\u3002"
                    "\u4eca\u5929\u60f3\u804a\u4ec0\u4e48\uff1f") == [
        "\u4f60\u597d\uff01",
        "\u6211\u662f\u4f60\u7684\u52a9\u624b\u3002",
        "\u4eca\u5929\u60f3\u804a\u4ec0\u4e48\uff1f",
    ]


def test_cjk_first_clause_counts_characters_as_words() -> None:
    text = "\u3053\u3093\u306b\u3061\u306f\u3001\u4eca\u65e5\u306f\u3044\u3044\u5929\u6c17" \
           "\u3067\u3059\u306d\u3002"
    assert segments(text) == [text[:6], text[6:]]


def test_a_boundary_waits_for_the_next_word_so_whitespace_is_complete() -> None:
    segmenter = SpeechSegmenter(first_clause=False)
    assert segmenter.feed("Hello there.") == []
    assert segmenter.feed(" ") == []
    assert segmenter.feed(" ") == []
    assert segmenter.feed("Next") == [(0, 14)]
    assert segmenter.flush() == [(14, 18)]
    assert segmenter.flush() == []


def test_leading_whitespace_joins_the_first_segment() -> None:
    assert segments("\n  Hi there. Bye.") == ["\n  Hi there. ", "Bye."]


def test_empty_reply_gives_no_spans() -> None:
    segmenter = SpeechSegmenter()
    assert segmenter.feed("") == []
    assert segmenter.flush() == []


_PIECES = st.sampled_from([
    "word", "Dr.", "U.S.A.", "e.g.", "$9.05", "3.5", "10", ",", ";", ":", ".", "!", "?", "...",
    "\u2026", "\u2014", "-", '"', "**", " ", "  ", "\n", "\u4f60", "\u3002", "\uff01", "\u3001",
    "\U0001f389", "The", "it",
])


@given(pieces=st.lists(_PIECES, max_size=40), data=st.data())
def test_spans_cover_the_text_and_do_not_depend_on_delta_boundaries(
    pieces: list[str], data: st.DataObject
) -> None:
    text = "".join(pieces)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=10))
    spans = spans_fed_in_pieces(text, cuts)
    whole = spans_fed_in_pieces(text, [])
    assert spans == whole
    assert "".join(text[start:end] for start, end in spans) == text
    assert all(start < end for start, end in spans)
    assert all(a[1] == b[0] for a, b in pairwise(spans))
    assert all(text[start:end].strip() for start, end in spans[:-1])


def _word_count(piece: str) -> int:
    return len(_WORD.findall(piece))


def test_run_on_text_is_split_into_short_pieces_with_a_short_first_one() -> None:
    """Issue 12 item 1: 600 unpunctuated words were one piece (64.6 s to first audio, 3.7 GB)."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    text = " ".join(words[index % len(words)] for index in range(600))
    pieces = segments(text)
    assert "".join(pieces) == text
    assert _word_count(pieces[0]) == FIRST_PIECE_SPLIT_WORDS
    assert all(_word_count(piece) <= MAX_PIECE_WORDS for piece in pieces)
    assert all(piece.endswith(" ") for piece in pieces[:-1])
    assert len(pieces) == 1 + -(-(600 - FIRST_PIECE_SPLIT_WORDS) // MAX_PIECE_WORDS)


def test_long_sentences_split_at_clause_marks_then_conjunctions() -> None:
    text = ("We left early, the train was late, the rain kept falling on the old station roof "
            "for hours while we waited there with nothing to do. Ok.")
    assert segments(text) == [
        "We left early, ",
        "the train was late, ",
        "the rain kept falling on the old station roof for hours ",
        "while we waited there with nothing to do. ",
        "Ok.",
    ]


def test_a_long_first_sentence_ends_its_first_piece_before_an_early_conjunction() -> None:
    text = ("The tide rises twice a day because the moon pulls the water toward it and the earth "
            "turns beneath that bulge. Next.")
    assert segments(text)[0] == "The tide rises twice a day "


def test_unpunctuated_cjk_is_split_between_characters() -> None:
    text = "\u4f60\u597d" * 20
    pieces = segments(text)
    assert "".join(pieces) == text
    assert [len(piece) for piece in pieces] == [6, 16, 16, 2]


def test_one_token_longer_than_the_limit_is_kept_whole() -> None:
    token = "a-" * 30 + "b"
    segmenter = SpeechSegmenter()
    assert segmenter.feed("Look " + token) == [(0, 5)]
    assert segmenter.feed(" c d") == [(5, 5 + len(token) + 1)]
    assert segmenter.flush() == [(5 + len(token) + 1, len("Look " + token + " c d"))]


@given(words=st.lists(st.sampled_from(["word", "and", "3.5", "x,", "\u4f60", "\u4f60\u597d"]),
                      min_size=1, max_size=80),
       data=st.data())
def test_pieces_stay_short_and_independent_of_deltas(words: list[str], data: st.DataObject) -> None:
    text = " ".join(words)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=10))
    spans = spans_fed_in_pieces(text, cuts)
    assert spans == spans_fed_in_pieces(text, [])
    assert "".join(text[start:end] for start, end in spans) == text
    for index, (start, end) in enumerate(spans):
        limit = FIRST_PIECE_MAX_WORDS if index == 0 else MAX_PIECE_WORDS
        assert _word_count(text[start:end]) <= limit
        assert end == len(text) or text[end - 1].isspace() or "\u4f60" in text[end - 1 : end + 1]


@pytest.mark.parametrize(("text", "words", "rest"), [
    ("The first half of", "The first half ", "of"),
    ("The first half of ", "The first half of ", ""),
    ("Hel", "", "Hel"),
    ("  ", "", "  "),
    ("One two 三四", "One two 三", "四"),
])
def test_a_paused_reply_gives_its_complete_words(text: str, words: str, rest: str) -> None:
    """flush_words ends between written tokens: an unfinished last token stays for later."""
    segmenter = SpeechSegmenter()
    assert segmenter.feed(text) == []
    spans = segmenter.flush_words()
    assert [text[start:end] for start, end in spans] == ([words] if words else [])
    assert [text[start:end] for start, end in segmenter.flush()] == ([rest] if rest else [])


CODE_REPLY = ("Here is code:\n\n```python\nimport os\nprint(os.getcwd())\n```\n\n"
              "That prints the directory. Done.")


@pytest.mark.parametrize("step", [1, 3, 7, len(CODE_REPLY)])
def test_a_fenced_code_block_is_one_span_however_it_streams(step: int) -> None:
    segmenter = SpeechSegmenter()
    spans = [span for index in range(0, len(CODE_REPLY), step)
             for span in segmenter.feed(CODE_REPLY[index:index + step])] + segmenter.flush()
    assert [CODE_REPLY[start:end] for start, end in spans] == [
        "Here is code:\n\n", "```python\nimport os\nprint(os.getcwd())\n```\n\n",
        "That prints the directory. ", "Done."]


def test_a_stall_inside_a_code_block_speaks_nothing_of_it() -> None:
    segmenter = SpeechSegmenter()
    assert segmenter.feed("```python\nimport os\nprint(") == []
    assert segmenter.flush_words() == []
