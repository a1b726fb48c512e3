"""How audio deltas arrived against real time: the two gap measures the benchmarks report.

`arrivals` are (arrival clock s, cumulative `audio_end_ms`) of a reply's
`response.output_audio.delta` events, in order, on one clock.
"""

from __future__ import annotations

from collections.abc import Sequence


def gap_beyond_real_time_ms(arrivals: Sequence[tuple[float, int]]) -> float:
    """Longest wait (ms) past real time, as a listener hears it: a client playing from its
    first delta, with no buffer of its own, needs the delta that starts at `audio_end_ms` of the
    previous one at first arrival + that. 0 when audio always came in time (the server's
    pacing lead, 400 ms by default, is what keeps it there)."""
    first = arrivals[0][0]
    waits = [(arrived - first) * 1000.0 - previous_end
             for (arrived, _), (_, previous_end) in zip(arrivals[1:], arrivals[:-1], strict=True)]
    return max([0.0, *waits])


def longest_inter_arrival_gap_ms(arrivals: Sequence[tuple[float, int]]) -> float:
    """The largest (arrival - previous arrival) - (audio the previous delta carried), ms, from
    the third delta on (the first ones are the pacing lead, sent at once): how unevenly the
    deltas came, whether or not the listener's buffered audio covered it."""
    gaps = [0.0]
    for index in range(2, len(arrivals)):
        (_, end_before), (previous, end_previous), (arrival, _) = (
            arrivals[index - 2], arrivals[index - 1], arrivals[index])
        gaps.append((arrival - previous) * 1000 - (end_previous - end_before))
    return max(gaps)
