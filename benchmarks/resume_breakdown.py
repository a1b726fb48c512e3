"""Where a backchannel's pause -> resume gap goes, from the server's own clocks
(`response.resumed.timing`, `server.realtime.pause_timing`): `bench_backchannel --breakdown`.

Per resumed backchannel, the gap (`paused_ms`) is the person's speech after the pause
(`speech_ms`, input audio), the quiet the resume waits for (`silence_ms`, input audio), server
VAD's lag behind the audio (`lag_ms`: the session clock from the pause to the quiet, less the
input audio heard meanwhile), the verdict when it came after that quiet (`decided_ms` -
`quiet_ms`, else 0), and the rest (the resume itself: `paused_ms` - the larger of `quiet_ms`
and `decided_ms`). The decision's own wall time (its transcription and readings: `decided_ms` -
`asked_ms`) runs while the quiet accrues, and is shown beside. So is the gap from the end of
the person's sound (`sound end -> resume`: `paused_ms` - `speech_ms`): the pause comes about
200 ms into the sound (Silero's minimum speech duration over a reply), so a backchannel's own
length after it is part of its pause -> resume gap (a 1 s laugh cannot resume within 800 ms of
its pause), and not of this one, which is what the server controls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.measuring import percentile
from benchmarks.tables import print_table

PARTS = ("speech", "silence", "lag", "verdict after quiet", "resume", "pause -> resume",
         "sound end -> resume", "decision (ASR + readings)", "quiet -> verdict margin")
"""The rows of the breakdown, in the order they add up (the last three beside)."""


def parts(resumed: dict[str, Any]) -> dict[str, float] | None:
    """One resume's parts (ms, `PARTS`), None when it carries no complete `timing` (a resume
    other than a backchannel's, or a server without it)."""
    timing = resumed.get("timing")
    if not timing or any(timing.get(key) is None for key in (
            "speech_ms", "silence_ms", "lag_ms", "quiet_ms", "decided_ms")):
        return None
    quiet, decided = timing["quiet_ms"], timing["decided_ms"]
    asked = timing.get("asked_ms")
    return {
        "speech": timing["speech_ms"],
        "silence": timing["silence_ms"],
        "lag": timing["lag_ms"],
        "verdict after quiet": max(0, decided - quiet),
        "resume": resumed["paused_ms"] - max(quiet, decided),
        "pause -> resume": resumed["paused_ms"],
        "sound end -> resume": resumed["paused_ms"] - timing["speech_ms"],
        "decision (ASR + readings)": decided - asked if asked is not None else float("nan"),
        "quiet -> verdict margin": quiet - decided,
    }


def print_breakdown(rows: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Print the per-resume parts of `rows` ((label, the `response.resumed` event)) and their
    p50 / p95 / max."""
    measured = [(label, found) for label, resumed in rows
                if (found := parts(resumed)) is not None]
    print_table("pause -> resume breakdown per resumed backchannel (ms; server clocks)",
                ["recording", *PARTS],
                [[label, *(f"{found[name]:.0f}" for name in PARTS)]
                 for label, found in measured])
    summary = []
    for name in PARTS:
        values = [found[name] for _, found in measured if found[name] == found[name]]
        summary.append([name, f"{percentile(values, 50):.0f}", f"{percentile(values, 95):.0f}",
                        f"{max(values):.0f}" if values else "-"])
    print_table(f"pause -> resume breakdown, {len(measured)} resumes (ms)",
                ["part", "p50", "p95", "max"], summary)
