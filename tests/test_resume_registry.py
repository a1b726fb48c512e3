"""The parked-session registry alone (sans-I/O, the clock passed in): tokens are single-use,
bound to their owner, expire with the window, and memory stays bounded in count and time."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from server.resume_registry import (
    REFUSALS,
    TOKEN_PATTERN,
    Live,
    Refused,
    Resumed,
    ResumeRegistry,
    owner_fingerprint,
)

OWNER = owner_fingerprint("key-a")


def parked(registry: ResumeRegistry[str], name: str, now_s: float,
           owner: str | None = OWNER) -> str:
    token = registry.issue(name, owner)
    registry.park(token, name, now_s)
    return token


def test_a_parked_session_is_claimed_once() -> None:
    registry: ResumeRegistry[str] = ResumeRegistry(60.0, 4)
    token = parked(registry, "sess_a", 0.0)
    assert registry.claim(token, OWNER, 59.9) == Resumed("sess_a", "sess_a")
    assert registry.claim(token, OWNER, 60.0) == Refused("resume_token_used", REFUSALS["used"])
    assert registry.parked == 0


def test_a_live_token_names_its_session_and_changes_nothing() -> None:
    registry: ResumeRegistry[str] = ResumeRegistry(60.0, 4)
    token = registry.issue("sess_a", OWNER)
    assert registry.claim(token, OWNER, 1.0) == Live("sess_a")
    registry.park(token, "sess_a", 2.0)
    assert isinstance(registry.claim(token, OWNER, 3.0), Resumed)


def test_another_owner_is_refused_and_leaves_the_token_as_it_was() -> None:
    registry: ResumeRegistry[str] = ResumeRegistry(60.0, 4)
    token = parked(registry, "sess_a", 0.0)
    for owner in (owner_fingerprint("key-b"), None):
        refused = registry.claim(token, owner, 1.0)
        assert isinstance(refused, Refused) and refused.code == "resume_token_wrong_key"
    open_token = parked(registry, "sess_b", 0.0, owner=None)
    assert registry.claim(open_token, OWNER, 1.0).code == "resume_token_wrong_key"
    assert registry.claim(token, OWNER, 1.0) == Resumed("sess_a", "sess_a")
    assert registry.claim(open_token, None, 1.0) == Resumed("sess_b", "sess_b")


def test_expiry_evicted_ended_unknown_and_malformed_are_told_apart() -> None:
    registry: ResumeRegistry[str] = ResumeRegistry(10.0, 1)
    old = parked(registry, "sess_old", 0.0)
    late = parked(registry, "sess_late", 1.0)  # evicts sess_old (max_parked 1)
    ended = registry.issue("sess_ended", OWNER)
    registry.end(ended)
    codes = {name: registry.claim(token, OWNER, 20.0).code for name, token in
             {"old": old, "late": late, "ended": ended, "unknown": "B" * 32,
              "malformed": "no good"}.items()}
    assert codes == {"old": "resume_token_evicted", "late": "resume_token_expired",
                     "ended": "resume_token_ended", "unknown": "resume_token_unknown",
                     "malformed": "resume_token_malformed"}


def test_park_returns_what_it_evicts_and_expire_what_expired() -> None:
    registry: ResumeRegistry[str] = ResumeRegistry(10.0, 2)
    parked(registry, "a", 0.0)
    parked(registry, "b", 1.0)
    token = registry.issue("c", OWNER)
    assert registry.park(token, "c", 2.0) == ["a"]
    assert registry.next_expiry_s() == 11.0
    assert registry.expire(11.5) == ["b"]
    assert registry.expire(12.0) == ["c"]
    assert registry.next_expiry_s() is None and registry.parked == 0


def test_a_token_carries_its_route_and_is_well_formed() -> None:
    registry: ResumeRegistry[str] = ResumeRegistry(10.0, 2)
    route = "0123456789abcdef0123456789abcdef"
    routed = registry.issue("a", None, route)
    assert routed.startswith(route + ".") and TOKEN_PATTERN.fullmatch(routed)
    for bad_route in ("not hex!", "ab", None):
        plain = registry.issue("a", None, bad_route)
        assert "." not in plain and TOKEN_PATTERN.fullmatch(plain)


def test_parking_a_token_twice_or_an_unknown_one_raises() -> None:
    registry: ResumeRegistry[str] = ResumeRegistry(10.0, 2)
    token = parked(registry, "a", 0.0)
    with pytest.raises(KeyError):
        registry.park(token, "a", 1.0)
    with pytest.raises(KeyError):
        registry.park("C" * 32, "x", 1.0)
    with pytest.raises(ValueError):
        ResumeRegistry(0.0, 1)


@given(st.lists(st.tuples(st.sampled_from(["park", "claim", "expire"]),
                          st.floats(0.0, 5.0)), max_size=60))
@example([("park", 0.0), ("park", 3.0), ("park", 5.0)])  # found by the CI profile
def test_memory_stays_bounded_in_count_and_time(steps: list[tuple[str, float]]) -> None:
    registry: ResumeRegistry[int] = ResumeRegistry(3.0, 4, max_remembered=8)
    now_s, expired_by_s, tokens = 0.0, 0.0, []
    for index, (action, advance_s) in enumerate(steps):
        now_s += advance_s
        if action == "park":
            token = registry.issue(f"s{index}", OWNER)
            registry.park(token, index, now_s)
            tokens.append((token, now_s))
        elif action == "claim" and tokens:
            token, parked_at = tokens.pop(0)
            outcome = registry.claim(token, OWNER, now_s)
            if now_s >= parked_at + 3.0:
                assert outcome.code in ("resume_token_expired", "resume_token_evicted")
            elif isinstance(outcome, Refused):
                assert outcome.code == "resume_token_evicted"
        else:
            registry.expire(now_s)
            expired_by_s = now_s
        assert registry.parked <= 4
        assert len(registry._gone) <= 8
        # The caller expires at `next_expiry_s`: after each expire nothing overdue is left.
        expiry = registry.next_expiry_s()
        assert expiry is None or expiry > expired_by_s
    registry.expire(now_s + 3.0)
    assert registry.parked == 0
