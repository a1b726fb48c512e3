"""`SurrogateRepair`: a responder's deltas become valid Unicode however they split a pair."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.responders.unicode_repair import SurrogateRepair, repair_surrogates


@pytest.mark.parametrize(("text", "repaired"), [
    ("plain text", "plain text"),
    ("\ud83d\udc4d", "\U0001f44d"),
    ("a\ud83d b", "a\ufffd b"),
    ("\udc4d\ud83d", "\ufffd\ufffd"),
    ("\ud83d\ud83d\udc4d", "\ufffd\U0001f44d"),
])
def test_pairs_are_joined_and_lone_halves_replaced(text: str, repaired: str) -> None:
    assert repair_surrogates(text) == repaired
    repaired.encode()


@given(st.lists(st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010,
                                      exclude_categories=())
                        | st.sampled_from("ab \U0001f44d"), max_size=5), max_size=8))
def test_the_stream_repairs_as_the_whole_text_would(deltas: list[str]) -> None:
    """However the text is split into deltas, the pieces join into the repaired whole, each
    piece is valid UTF-8, and a split pair is joined."""
    repair = SurrogateRepair()
    pieces = [repair.feed(delta) for delta in deltas] + [repair.flush()]
    for piece in pieces:
        piece.encode()
    assert "".join(pieces) == repair_surrogates("".join(deltas))


def test_a_pair_split_across_two_deltas_is_one_emoji() -> None:
    repair = SurrogateRepair()
    assert (repair.feed("ok \ud83d"), repair.feed("\udc4d!"), repair.flush()) == (
        "ok ", "\U0001f44d!", "")
