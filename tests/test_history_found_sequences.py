"""Sequences the history property tests' randomized runs found (tests/test_history_properties.py),
kept as examples: each runs the state machine's rules in order and checks every invariant
after each step, as hypothesis does, then what the prompts saw."""

from __future__ import annotations

from collections.abc import Iterator
from random import Random
from typing import Any

import pytest

from tests.test_history_properties import HistoryMachine, SlowHistoryMachine


@pytest.fixture(params=[HistoryMachine, SlowHistoryMachine], ids=["marks", "slow"])
def machine(request: pytest.FixtureRequest) -> Iterator[HistoryMachine]:
    """A fresh machine of each kind, torn down after the test."""
    instance = request.param()
    yield instance
    instance.teardown()


def run_steps(machine: HistoryMachine, steps: list[tuple[str, dict[str, Any]]]) -> None:
    """Run `machine`'s rules in order, checking every invariant after each (as hypothesis
    does)."""
    for name, arguments in steps:
        getattr(machine, name)(**arguments)
        machine.history_holds_only_heard_text()
        machine.announced_text_is_heard_text()
        machine.no_violation_recorded()


def assistant_turns(machine: HistoryMachine, reply_index: int) -> list[str]:
    """The assistant turns of the prompt built for the `reply_index`-th reply."""
    prompt = machine.prompts[machine.order[reply_index]]
    return [turn.text for turn in prompt.turns if turn.role == "assistant"]


PLAYING_REPLY = [
    ("new_reply", {"words": 1, "prompt_now": False, "spoken": 0, "finish": False}),
    ("interrupt", {"kind": "barge_in", "index": 0, "value": 0}),
    ("new_reply", {"words": 2, "prompt_now": True, "spoken": 2, "finish": True}),
]
"""A reply cancelled before its prompt, then "w0 w1" generated to its end and sent whole (800 ms),
nothing ACKed yet: the start of the sequence a fresh CI clone found (`TestHistoryWithMarks`)."""

NEXT_TURN = ("new_reply", {"words": 1, "prompt_now": True, "spoken": 1, "finish": True})
"""A new turn whose prompt is built at once (its wait releases every held result)."""


def test_ack_mid_playback_then_a_new_turn(machine: HistoryMachine) -> None:
    """ACK 400 ms while "w0 w1" plays, then a new turn: its prompt sees "w0".

    The periodic ACK alone calibrates nothing (history holds "" while the reply plays); the new
    turn interrupts the reply, and the prompt wait calibrates it at the 400 ms cutoff.
    """
    run_steps(machine, [
        *PLAYING_REPLY,
        ("ack", {"index": 1, "value": 400, "truncate": False, "by_item": False}),
        NEXT_TURN,
    ])
    assert assistant_turns(machine, 2) == ["w0"]  # the reply cancelled before a word: left out


def test_final_ack_after_the_next_prompt_was_built(machine: HistoryMachine) -> None:
    """The sequence a fresh CI clone found, as the server runs it: a prompt is built when its
    wait ends, not later.

    A new turn interrupts "w0 w1" before any ACK: its prompt is built at once, with "" for the
    reply (nothing was confirmed heard). The client's final position, 400 ms, arrives after
    that; it is admissible and calibrates the old reply to "w0", which the next prompt sees.
    The model used to check history against the 400 ms cutoff at `finish_prompt`, after the
    ACK, although the prompt was built before it (and it let a reply's prompt come after the
    reply was generated).
    """
    run_steps(machine, [
        *PLAYING_REPLY,
        ("new_reply", {"words": 1, "prompt_now": False, "spoken": 0, "finish": False}),
        ("start_prompt", {}),
        ("ack", {"index": 1, "value": 400, "truncate": False, "by_item": False}),
        ("finish_prompt", {"order": Random(0)}),
        ("generate", {"count": 1, "text_ahead": 0, "finish": True}),
        NEXT_TURN,
    ])
    assert assistant_turns(machine, 2) == [""]  # the reply cancelled before a word: left out
    assert assistant_turns(machine, 3)[:1] == ["w0"]


def test_stricter_cap_after_a_calibration_was_announced() -> None:
    """The randomized run's next find (`make fuzz-properties`), shrunk by hand: the model was
    wrong again, and the server right.

    "w0 w1 w2 w3" is ACKed at 1200 ms, then a new turn interrupts it and calibrates it: the
    marks calibration lands and announces "w0 w1 w2". The client's next event, on the loop step
    after the landing (whatever the number of steps a calibration takes), is an ACK with
    `truncate` at 0 ms: it caps the reply, so history and the next prompt hold "". The model
    used to check every `conversation.item.heard` of a step against the cutoff at the step's
    end, 0 ms, so that announcement, true when made, failed.
    """
    machine = HistoryMachine()
    try:
        run_steps(machine, [
            ("new_reply", {"words": 4, "prompt_now": True, "spoken": 4, "finish": True}),
            ("ack", {"index": 0, "value": "sent", "truncate": False, "by_item": False}),
        ])
        cap = machine.ack_event(0, 0, truncate=True, by_item=False)
        announce = machine._on_applied

        def deliver_cap() -> None:
            machine._take()
            assert machine._deliver(*cap)

        def announce_then_cap(response_id: str, result: int, elapsed_ms: float) -> None:
            announce(response_id, result, elapsed_ms)
            machine.loop.call_soon(deliver_cap)

        machine.controller.on_applied = announce_then_cap
        run_steps(machine, [
            ("new_reply", {"words": 1, "prompt_now": False, "spoken": 0, "finish": False}),
            ("start_prompt", {}),
            ("finish_prompt", {"order": Random(0)}),
        ])
        capped = machine.replies[machine.order[0]]
        assert capped.cutoff_ms == 0
        assert machine.session.history.get(capped.item_id).text == ""
        assert assistant_turns(machine, 1) == [""]
        assert machine.announced[capped.rid] == ["", "w0 w1 w2", ""]
    finally:
        machine.teardown()


def test_cap_before_a_held_result_lands_refuses_it() -> None:
    """The same session with a slow policy: the cap at 0 ms comes while the result for the
    1200 ms evidence is held, so the result lands after it and is refused (its evidence is no
    longer covered); history, the prompt and every announcement hold ""."""
    machine = SlowHistoryMachine()
    try:
        run_steps(machine, [
            ("new_reply", {"words": 4, "prompt_now": True, "spoken": 4, "finish": True}),
            ("ack", {"index": 0, "value": "sent", "truncate": False, "by_item": False}),
            ("new_reply", {"words": 1, "prompt_now": False, "spoken": 0, "finish": False}),
            ("start_prompt", {}),
            ("ack", {"index": 0, "value": 0, "truncate": True, "by_item": False}),
            ("finish_prompt", {"order": Random(0)}),
        ])
        capped = machine.replies[machine.order[0]]
        assert capped.cutoff_ms == 0
        assert machine.session.history.get(capped.item_id).text == ""
        assert assistant_turns(machine, 1) == [""]
        assert machine.announced[capped.rid] == [""]
    finally:
        machine.teardown()
