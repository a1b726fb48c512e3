"""`ReasoningFilter`: reasoning spans never reach the reply, however the stream is split."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.responders.reasoning import ReasoningFilter

CASES = [
    ("<think>The user greets me.</think>\n\nHello there!", "Hello there!"),
    ("Sure. <thinking>count: 3</thinking> Three.", "Sure. Three."),
    ("<reasoning>a</reasoning>B <think>c</think>D", "B D"),
    ("a < b and <thin ice>", "a < b and <thin ice>"),
    ("Answer first <think>and a span that never closes", "Answer first "),
    ("Ends on <thi", "Ends on <thi"),
    ("x <think></think>y", "x y"),
]


def filtered(deltas: list[str]) -> str:
    reasoning = ReasoningFilter()
    return "".join(reasoning.feed(delta) for delta in deltas) + reasoning.flush()


@pytest.mark.parametrize(("content", "reply"), CASES)
def test_reasoning_spans_are_cut_out(content: str, reply: str) -> None:
    assert filtered([content]) == reply


@given(st.sampled_from(CASES), st.lists(st.integers(0, 60), max_size=8))
def test_any_split_into_deltas_gives_the_same_reply(case: tuple[str, str],
                                                    cuts: list[int]) -> None:
    content, reply = case
    bounds = sorted({min(cut, len(content)) for cut in cuts})
    pieces = [content[start:end] for start, end in
              zip([0, *bounds], [*bounds, len(content)], strict=True)]
    assert filtered(pieces) == reply
