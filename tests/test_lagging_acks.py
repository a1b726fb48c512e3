"""A client whose playback ACKs trail what it has played (an output latency it reports in, a
Bluetooth headset's) still receives the whole reply: pacing learns the lag (a tester's client
ACKing 500 ms or more behind stopped the reply for good at 564 ms, with no error and no
`response.done`). Sans-I/O, a simulated client that plays in real time once 100 ms is
buffered and ACKs every 100 ms."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from server.realtime.session import Session, SessionConfig
from tests.test_session import send, start_reply

STEP_MS = 20


@dataclass
class Playback:
    """What the simulated client did with one reply: ms rendered, ms it waited for audio
    after it started playing, and the clock (ms from the reply's start) of `response.done`
    (None: never)."""

    rendered_ms: int
    starved_ms: int
    done_ms: int | None


def play_reply(session: Session, ack_lag_ms: int, start_ms: float = 0.0,
               reply_ms: int = 4000) -> Playback:
    """Create a `reply_ms` reply in `session` at clock `start_ms` and play it as a client
    ACKing `ack_lag_ms` behind its real position would, for the reply's length plus 4 s."""
    response_id = start_reply(session, "a long reply", reply_ms)
    session.take_events()
    sent = rendered = starved = 0
    started = False
    last_ack = None
    done = None
    for step in range(0, reply_ms + 4000, STEP_MS):
        now = start_ms + step
        session.set_clock(now)
        session.pull_outbound(now_ms=now)
        for event in session.take_events():
            if event["type"] == "response.output_audio.delta":
                sent = event["audio_end_ms"]
            elif event["type"] == "response.done":
                done = step
        started = started or sent >= 100
        if started and rendered < reply_ms:
            if rendered + STEP_MS <= sent:
                rendered += STEP_MS
            else:
                starved += STEP_MS
        if started and (last_ack is None or now - last_ack >= 100):
            send(session, type="playback.ack", response_id=response_id,
                 played_ms=max(0, rendered - ack_lag_ms))
            last_ack = now
    return Playback(rendered, starved, done)


def lagging_session() -> Session:
    return Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100,
                                 ack_timeout_ms=1000))


@pytest.mark.parametrize("ack_lag_ms", [0, 100, 300])
def test_acks_within_the_lead_never_starve_the_client(ack_lag_ms: int) -> None:
    played = play_reply(lagging_session(), ack_lag_ms)
    assert (played.rendered_ms, played.starved_ms) == (4000, 0)
    assert played.done_ms is not None


@pytest.mark.parametrize(("ack_lag_ms", "most_starved_ms"), [(500, 600), (800, 600),
                                                             (1500, 2000)])
def test_acks_trailing_past_the_lead_still_get_the_whole_reply(
        ack_lag_ms: int, most_starved_ms: int) -> None:
    session = lagging_session()
    played = play_reply(session, ack_lag_ms)
    assert played.rendered_ms == 4000 and played.done_ms is not None
    assert played.starved_ms <= most_starved_ms
    again = play_reply(session, ack_lag_ms, start_ms=10_000.0)
    assert (again.rendered_ms, again.starved_ms) == (4000, 0), "the next reply knows the lag"
