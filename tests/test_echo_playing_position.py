"""The playing position the session estimates for each microphone append (the position the
echo detector maps the microphone to): from the first audio sent, through ACKs and late
appends, for `ECHO_TAIL_MS` after the reply played out.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import numpy as np
import pytest

from server.listening.echo import ECHO_TAIL_MS
from server.realtime.session import Session, SessionConfig


def silent_reply(lead_ms: int, audio_ms: int) -> tuple[Session, str]:
    """A session under server VAD (`lead_ms` of lead, 100 ms jitter buffer and frames) with one
    reply of `audio_ms` of silence at 24 kHz, generated whole: (the session, its id)."""
    session = Session(SessionConfig(lead_ms=lead_ms, jitter_ms=100, frame_ms=100))
    session.receive(json.dumps({"type": "session.update", "session": {"audio": {"input": {
        "turn_detection": {"type": "server_vad"}}}}}))
    session.receive(json.dumps({"type": "response.create"}))
    response_id = session.current_response_id
    assert response_id is not None
    session.generation.on_text(response_id, "Hello there.")
    session.generation.on_speech(response_id, 12, b"\x00\x00" * 24 * audio_ms, [])
    session.generation.on_done(response_id)
    session.take_effects()
    return session, response_id


def test_the_session_maps_appends_to_the_playing_position() -> None:
    session, response_id = silent_reply(400, 3000)

    heard = [0.0]  # ms of microphone audio appended

    def append_at(clock_ms: float, late_ms: float = 0.0) -> tuple[str | None, int | None]:
        """Append the microphone up to `clock_ms` less `late_ms` (a continuous stream)."""
        session.set_clock(clock_ms)
        samples = max(round((clock_ms - late_ms - heard[0]) * 24), 2)
        heard[0] += samples / 24
        session.receive(json.dumps({"type": "input_audio_buffer.append", "audio": (
            base64.b64encode(b"\x00\x00" * samples).decode())}))
        effect = session.take_effects()[-1]
        return effect.response_id, effect.playback_ms  # type: ignore[union-attr]

    assert append_at(0.0) == (None, None)  # nothing sent yet
    session.pull_outbound(1000.0)
    assert append_at(1050.0) == (response_id, 0)  # the jitter buffer is filling
    assert append_at(1300.0) == (response_id, 200)
    session.set_clock(1400.0)
    session.receive(json.dumps({"type": "playback.ack", "response_id": response_id,
                                "played_ms": 250}))
    assert append_at(1460.0) == (response_id, 310)
    # Audio that arrives 150 ms later than the stream so far: what played when it was captured.
    assert append_at(1700.0, late_ms=150.0) == (response_id, 400)
    assert append_at(5000.0) == (response_id, 500)  # at most what was sent
    session.pull_outbound(5000.0)
    session.set_clock(6000.0)
    session.receive(json.dumps({"type": "playback.ack", "response_id": response_id,
                                "played_ms": 3000}))
    assert append_at(6000.0 + ECHO_TAIL_MS) == (response_id, 3000)  # the echo tail
    assert append_at(6001.0 + ECHO_TAIL_MS) == (None, None)


PLAYS_FROM_MS = 1100.0
"""When the simulated client starts playing the reply (clock ms); it plays in real time."""
VAD_MS = 15.0
"""How long the server's receiver takes over an append (its server VAD runs before the next
frame is read: `server.receiving.Receiver`)."""


def stream_positions(read_ms: Callable[[float], float], ack_offset_ms: float = 0.0,
                     from_ms: int = 1500) -> dict[int, tuple[int, int]]:
    """A page streaming 40 ms appends (sent when their audio ends, clock = microphone ms) and
    ACKing its real played position every 150 ms, `ack_offset_ms` after an append was sent (0:
    right after it, as `tests/echo_room.py` does; otherwise on a timer of its own, as the page
    does); the server reads the event the client sent at clock t at `read_ms(t)`, never before
    it is done with the one before (`VAD_MS` after an append). Returns, for each append ending
    from `from_ms` on, (the position the session estimated, the position really playing when
    its audio ended: negative before the client started playing)."""
    session, response_id = silent_reply(5000, 6000)
    session.pull_outbound(1000.0)
    sent: list[tuple[float, str, float]] = [(float(end), "append", float(end))
                                            for end in range(40, 6000, 40)]
    sent += [(at, "ack", at - PLAYS_FROM_MS)
             for at in np.arange(1200.0 + ack_offset_ms, 6000.0, 150.0)]
    sent.sort(key=lambda event: (event[0], event[1] == "ack"))
    positions: dict[int, tuple[int, int]] = {}
    free_at = 0.0  # when the server can read the next event
    for at, kind, value in sent:
        read_at = max(free_at, read_ms(at))
        free_at = read_at + (VAD_MS if kind == "append" else 0.0)
        session.set_clock(read_at)
        if kind == "ack":
            session.receive(json.dumps({"type": "playback.ack", "response_id": response_id,
                                        "played_ms": int(value)}))
            continue
        session.receive(json.dumps({"type": "input_audio_buffer.append", "audio": (
            base64.b64encode(b"\x00\x00" * 24 * 40).decode())}))
        playback_ms = session.take_effects()[-1].playback_ms  # type: ignore[union-attr]
        if value >= from_ms:
            positions[int(value)] = (playback_ms, int(value - PLAYS_FROM_MS))
    return positions


def stalled(at_ms: float) -> float:
    """The server's event loop, blocked 50-400 ms every 100-800 ms (seeded), reads what was
    sent during a stall when it ends (as `tests/test_echo_stalled_loop.py` stalls it)."""
    rng = np.random.default_rng(5)
    start = 0.0
    while True:
        start += rng.uniform(100, 800)
        end = start + rng.uniform(50, 400)
        if at_ms < start:
            return at_ms
        if at_ms < end:
            return end
        start = end


@pytest.mark.parametrize("ack_offset_ms", [0.0, 7.0, 23.0])
def test_acks_are_placed_in_audio_time_however_late_the_server_reads_them(
        ack_offset_ms: float) -> None:
    """The position estimated for every append is what really played when its audio ended,
    whether the server reads each event when it is sent or its event loop stalls (50-400 ms
    every 100-800 ms) and reads them late and in bursts: within one append (40 ms), as an ACK
    is placed between the appends the client sent before and after it.
    Before, an ACK read late was taken as sent when read (the receiver runs
    an append's server VAD before it reads the next frame, so even one sent with an append
    was read more than `BURST_MS` after it): positions went back by up to the stall (209 ms
    in one measured run) and the reply's echo alone started turns."""
    on_time = stream_positions(lambda at: at, ack_offset_ms)
    late = stream_positions(stalled, ack_offset_ms)
    assert sum(stalled(at) > at for at in on_time) > 10  # many appends were read late
    for estimates in (on_time, late):
        errors = {end: estimate - truth for end, (estimate, truth) in estimates.items()}
        assert all(abs(error) <= 40 for error in errors.values()), errors


def test_a_server_falling_seconds_behind_never_places_the_reply_ahead() -> None:
    """The server reads ever later from 0.2 s on (twice the time the client took) until it is
    3 s behind, as a server whose event loop stalls over and over on a loaded machine did
    (3.7 s behind after 4 s of a session at load 11 on 2 cores). Before the first ACK the
    position is never ahead of the client (it was placed by how late the latest appends came:
    over a second ahead here, and as the echo detector takes the loudspeaker never to go back,
    every later position with it); from the first ACK on, within one append."""
    def behind(at_ms: float) -> float:
        return at_ms + min(max(at_ms - 200.0, 0.0) * 2, 3000.0)

    positions = stream_positions(behind, 7.0, from_ms=1000)
    first_ack_ms = 1200 + 7
    before = {end: estimate - max(truth, 0) for end, (estimate, truth) in positions.items()
              if end < first_ack_ms}
    after = {end: estimate - truth for end, (estimate, truth) in positions.items()
             if end > first_ack_ms + 40}
    assert before and all(error <= 0 for error in before.values()), before
    assert all(abs(error) <= 40 for error in after.values()), after
