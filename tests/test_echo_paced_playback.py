"""Echo detection (server/listening/echo.py) when the server paces a reply whose synthesis falls
behind: the client plays like the page (silent when it runs dry), ACKs at any interval or
never, and its appends may be held up by stalls; the echo never starts a turn, a person over a
loud paced echo does.
"""

from __future__ import annotations

import pytest

from server.speech.resampling import resample
from tests import speech_fixtures as fx
from tests.echo_microphone import OUTPUT_RATE_HZ, PEOPLE, paced_playback
from tests.echo_room import Room


@pytest.mark.parametrize("lag_ms", [300, 400])
@pytest.mark.parametrize("ack_every_ms", [None, 40, 120, 500])
def test_the_tester_s_echo_never_starts_a_turn(ack_every_ms: int | None, lag_ms: int) -> None:
    """The tester's room: `MOON` at -6 dB (gain 0.5), 300-400 ms late, over a -60 dBFS floor
    (their Gaussian sigma 30 in PCM16 is -61 dBFS), synthesis falling 480 ms behind. With ACKs
    every 120 ms the echo started a turn in 7 of 22 protocol runs ("pulls the seat."): the
    estimate ran on from the last ACK while the client waited for audio, and the echo detector
    mapped the microphone to the reply by one offset, which the stall breaks. Offline before
    the fix, 4 of these 8 started one (300 ms at every ACK interval, 400 ms with ACKs every
    500 ms; the protocol's timing varies from run to run, this simulation's does not)."""
    assert paced_playback(Room(-6.0, lag_ms, -60.0), ack_every_ms) == []


PACED_ROOMS = [Room(gain, lag, noise) for gain in (-40.0, -20.0, -6.0, 0.0)
               for lag in (0, 300, 500) for noise in (-60.0, None)]


@pytest.mark.parametrize(("ack_every_ms", "late_ms"), [(120, 0), (500, 0), (120, 500)])
def test_a_paced_echo_never_starts_a_turn_at_any_ack_interval(ack_every_ms: int,
                                                              late_ms: int) -> None:
    """The kind: the echo at -40..0 dB, 0-500 ms late, over a -60 dBFS floor or none, the
    client ACKing every 120 or 500 ms, synthesis falling behind, and appends held up to 500 ms
    by stalls: no room starts a turn. Before the fix 18 of these 24 rooms did at each interval
    without stalls; the whole grid (benchmarks/README.md "Echo benchmark") went from 125 of
    200 rooms to none."""
    started = {room.describe(): turns for room in PACED_ROOMS
               if (turns := paced_playback(room, ack_every_ms, late_ms=late_ms))}
    assert started == {}


@pytest.mark.parametrize("text", [person[0] for person in PEOPLE])
@pytest.mark.parametrize("room", [Room(-6.0, 400, -60.0), Room(0.0, 500, None)],
                         ids=Room.describe)
def test_a_person_over_a_paced_loud_echo_starts_a_turn(text: str, room: Room) -> None:
    """A person (`PEOPLE`'s sentences and voices) at -6 dBFS peak speaking 2.5 s into the paced
    reply (ACKs every 500 ms, appends held up to 500 ms by stalls) over its echo at -6 or
    0 dB: one turn, from 350 ms before their voice to 1.5 s after it. Measured over these
    rooms, ACKs every 120 and 500 ms, three times each (espeak-ng's audio differs by a few
    samples from call to call), and with stalls of up to 100-500 ms: always one turn, 277 ms
    before to 1099 ms after the voice (the late ones: "Wait, stop" and "Hold on", whose start
    the echo gate holds back; 969 ms before the fix too); before the fix the 0 dB echo started
    its own turn 0.5-0.95 s before the person."""
    _, engine, voice, _ = next(person for person in PEOPLE if person[0] == text)
    person = resample(fx.at_peak_dbfs(fx.speech(text, engine, voice), -6.0), fx.RATE_HZ,
                      OUTPUT_RATE_HZ)
    onset_ms = 2500 + fx.active_span_ms(person)[0]
    started = paced_playback(room, 500, person, 2500, late_ms=500)
    assert len(started) == 1
    assert onset_ms - 350 <= started[0].audio_start_ms <= onset_ms + 1500


PICKUP_ROOMS = [Room(-10.0, 250, -60.0, rt60_ms=400.0), Room(-6.0, 400, -50.0, rt60_ms=300.0),
                Room(-20.0, 150, None, rt60_ms=400.0), Room(-6.0, 300, -60.0), Room(0.0, 0, None)]
"""`tests.test_echo_interruptions.ECHO_ROOMS`' loud reverberant ones, the tester's room and a
loud echo with no lag."""


@pytest.mark.parametrize("pickup_late_ms", [250, 400])
@pytest.mark.parametrize("room", PICKUP_ROOMS, ids=Room.describe)
def test_a_late_resume_after_the_client_ran_dry_never_starts_a_turn(room: Room,
                                                                   pickup_late_ms: int) -> None:
    """The kind behind `tests/test_echo_stalled_loop.py`'s turns: the client (ACKs every
    150 ms whether it moved or not, as that test's `RoomPage`) runs dry while synthesis falls
    behind, and its event loop, stalled as the next audio comes, hands that audio to its player
    250-400 ms after the server sent it. The server's estimate ran on from the ACK that
    repeated the dry position, that far ahead of the loudspeaker until the next ACK, and the
    echo alone started turns; it now stands at that ACK until one shows the client playing
    again (`ResponseState.played_at_audio_ms`)."""
    assert paced_playback(room, 150, pickup_late_ms=pickup_late_ms, ack_repeats=True) == []
