"""The benchmarks' two gap measures (`benchmarks.audio_arrival`) on hand-made arrivals."""

from benchmarks.audio_arrival import gap_beyond_real_time_ms, longest_inter_arrival_gap_ms


def test_audio_sent_ahead_then_at_real_time_has_no_gap() -> None:
    # 400 ms of lead at once, then 100 ms deltas every 100 ms
    arrivals = [(0.0, 100), (0.0, 200), (0.0, 300), (0.0, 400),
                *((0.1 * k, 400 + 100 * k) for k in range(1, 10))]
    assert gap_beyond_real_time_ms(arrivals) == 0.0
    assert longest_inter_arrival_gap_ms(arrivals) < 1e-6


def test_a_pause_the_lead_covers_is_uneven_but_not_late() -> None:
    # the lead (400 ms) sent at once, the next delta 150 ms after its last one (which carried
    # 100 ms): 50 ms uneven, while the listener still had 250 ms to play
    arrivals = [(0.0, 100), (0.0, 200), (0.0, 300), (0.0, 400), (0.15, 500), (0.2, 600)]
    assert gap_beyond_real_time_ms(arrivals) == 0.0
    assert abs(longest_inter_arrival_gap_ms(arrivals) - 50.0) < 1e-6


def test_a_stall_past_the_buffered_audio_is_late_by_the_excess() -> None:
    # 200 ms of audio, then nothing until 1.5 s: the listener waited 1300 ms
    arrivals = [(0.0, 100), (0.0, 200), (1.5, 300), (1.6, 400)]
    assert abs(gap_beyond_real_time_ms(arrivals) - 1300.0) < 1e-6
    assert abs(longest_inter_arrival_gap_ms(arrivals) - 1400.0) < 1e-6
