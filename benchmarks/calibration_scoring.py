"""Scoring and printing of `bench_calibration`'s offline tables: each row's results judged
against the ground truth of its cuts (inside, short, past the started cut, words beyond and
lost, wall time), the history cut the controller stores, the word marks' coverage.
"""

from __future__ import annotations

import sys
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks.calibration_corpus import (
    Cut,
    SpokenReply,
    heard_bounds,
    text_units,
    unit_count,
    unit_ends,
)
from benchmarks.calibration_methods import Method, RecordingTranscriber
from benchmarks.tables import print_table
from calibration import align, units
from calibration.policies import ASR_SAFETY_MARGIN_MS, ASR_WINDOW_MS, asr_evidence

CONTROLLER_BUDGET_MS = 1_000.0
"""The server's default per-calibration deadline (`--calibration-timeout-ms`)."""


@dataclass
class Outcome:
    """One method's result on one cut: the cut (code points or None) and the call's wall time."""

    cut: Cut
    result: int | None
    elapsed_ms: float


@dataclass
class Score:
    """Aggregates of a row (see benchmarks/README.md for the definitions)."""

    cuts: int
    refused_pct: float
    inside_answered_pct: float
    inside_history_pct: float
    past_started_pct: float
    words_beyond: float
    words_lost: float
    p50_ms: float
    p95_ms: float
    over_budget: int
    short_by_one: int
    short: int


def score(outcomes: Sequence[Outcome]) -> Score:
    """Aggregate outcomes; a refusal counts as the empty history it leaves behind."""
    answered = [o for o in outcomes if o.result is not None]
    inside = [o for o in answered if o.cut.fully <= o.result <= o.cut.started]
    short = [o for o in answered if o.result < o.cut.fully]
    past = [o for o in answered if o.result > o.cut.started]
    history_inside = sum(o.cut.fully <= (o.result or 0) <= o.cut.started for o in outcomes)
    beyond, lost = [], []
    for o in outcomes:
        kept = unit_count(o.cut, o.result or 0)
        heard = unit_count(o.cut, o.cut.fully)
        beyond.append(max(0, kept - heard))
        lost.append(max(0, heard - kept))
    one_word = sum(unit_count(o.cut, o.cut.fully) - unit_count(o.cut, o.result) == 1
                   for o in short)
    elapsed = [o.elapsed_ms for o in outcomes]
    total = max(len(outcomes), 1)
    return Score(
        cuts=len(outcomes),
        refused_pct=100.0 * (len(outcomes) - len(answered)) / total,
        inside_answered_pct=100.0 * len(inside) / max(len(answered), 1),
        inside_history_pct=100.0 * history_inside / total,
        past_started_pct=100.0 * len(past) / total,
        words_beyond=float(np.mean(beyond)) if beyond else 0.0,
        words_lost=float(np.mean(lost)) if lost else 0.0,
        p50_ms=float(np.percentile(elapsed, 50)) if elapsed else 0.0,
        p95_ms=float(np.percentile(elapsed, 95)) if elapsed else 0.0,
        over_budget=sum(e > CONTROLLER_BUDGET_MS for e in elapsed),
        short_by_one=one_word,
        short=len(short),
    )


async def run_method(name: str, method: Method, cuts: Sequence[Cut]) -> list[Outcome]:
    """Call `method` on every cut in order, timing each call (wall clock, ms)."""
    outcomes: list[Outcome] = []
    started = time.perf_counter()
    for index, cut in enumerate(cuts):
        before = time.perf_counter()
        result = await method(cut)
        outcomes.append(Outcome(cut, None if result is None else int(result),
                                (time.perf_counter() - before) * 1000.0))
        if index % 100 == 99:
            progress(f"{name}: {index + 1}/{len(cuts)} cuts, {time.perf_counter() - started:.0f} s")
    return outcomes


def asr_diagnosis(outcomes: Sequence[Outcome], recorder: RecordingTranscriber) -> dict[str, int]:
    """Why asr results miss the [fully played, started] window.

    Refusals: "short_audio" when no transcription ran (under 500 ms after the margin), else the
    reason `align.align_prefix` gives for the recorded transcript as the policy aligns it
    (`policies.asr_evidence`, the policy's window hint: units heard per the marks at
    played_ms - ASR_SAFETY_MARGIN_MS), or "word left untranscribed" when the matcher accepted
    (`policies.next_unit_left_untranscribed` refused). Short results: "short: margin" when the
    result keeps every unit fully played by played_ms - ASR_SAFETY_MARGIN_MS (the missing words
    ended inside the margin withheld from ASR), else "short: recognition" (the recogniser missed
    or misheard a word it had whole).
    """
    counts: dict[str, int] = {}
    for o in outcomes:
        text, played = o.cut.spoken.reply.text, o.cut.played_ms
        evidence_ms = played - ASR_SAFETY_MARGIN_MS
        if o.result is None:
            recorded = recorder.transcripts.get((o.cut.spoken.reply.id, played))
            if recorded is None:
                reason = "refused: short_audio"
            else:
                heard = heard_bounds(text, o.cut.spoken.marks, evidence_ms)[0]
                evidence, withhold_last = asr_evidence(*recorded)
                reason = align.align_prefix(
                    text, evidence, expected_unit=bisect_right(unit_ends(text), heard),
                    from_start=evidence_ms <= ASR_WINDOW_MS, withhold_last=withhold_last,
                ).reason
                reason = "refused: " + ("word left untranscribed" if reason == "accepted"
                                        else reason)
        elif o.result < o.cut.fully:
            heard = unit_count(o.cut, heard_bounds(text, o.cut.spoken.marks, evidence_ms)[0])
            floor = units.cut_after_units(text, text_units(text), heard)
            reason = "short: margin" if o.result >= floor else "short: recognition"
        elif o.result > o.cut.started:
            reason = "past started"
        else:
            reason = "inside"
        counts[reason] = counts.get(reason, 0) + 1
    return counts


def progress(message: str) -> None:
    """A progress line on stderr (tables go to stdout)."""
    print(f"[bench_calibration] {message}", file=sys.stderr, flush=True)


ACCURACY_HEADERS = ("row", "cuts", "refused%", "inside%ans", "inside%hist", "past-start%",
                    "short", "short by 1", "beyond", "lost", "p50 ms", "p95 ms", ">1s")


def accuracy_row(name: str, s: Score) -> list[object]:
    """One row of an accuracy table (columns ACCURACY_HEADERS)."""
    return [name, s.cuts, s.refused_pct, s.inside_answered_pct, s.inside_history_pct,
            s.past_started_pct, s.short, s.short_by_one, s.words_beyond, s.words_lost, s.p50_ms,
            s.p95_ms, s.over_budget]


PRODUCT_ROWS = ("marks", "asr", "ratio", "auto", "auto: asr times out",
                "auto: no marks, asr times out", "auto: marks estimated, asr times out")


def token_whole(text: str, cut: int) -> bool:
    """True when `cut` splits no written token: it is 0 (nothing kept), or it sits at whitespace
    or just after it (a dropped token's start: `units.token_cut` keeps the space before it), or
    what follows it up to the next whitespace holds no letter or digit, or it sits before a CJK
    character (a token of its own)."""
    if (cut <= 0 or cut >= len(text) or text[cut].isspace() or text[cut - 1].isspace()
            or units.is_cjk_char(text[cut])):
        return True
    rest = text[cut:].split(maxsplit=1)[0]
    return not any(ch.isalnum() for ch in rest)


@dataclass(frozen=True, slots=True)
class HistoryScore:
    """A product row judged on the history cut (`units.token_cut` of each answered result)."""

    answered: int
    past_started: int
    inside_pct: float
    token_whole_pct: float


def history_score(outcomes: Sequence[Outcome]) -> HistoryScore:
    """Past-start count of the raw results; inside% and token-whole% of the history cuts, with
    the fully played bound token-whole too (a token counts as heard when every piece ended)."""
    answered = [o for o in outcomes if o.result is not None]
    inside = whole = 0
    for o in answered:
        text = o.cut.spoken.reply.text
        stored = units.token_cut(text, o.result)
        inside += units.token_cut(text, o.cut.fully) <= stored <= o.cut.started
        whole += token_whole(text, stored)
    total = max(len(answered), 1)
    return HistoryScore(len(answered), sum(o.result > o.cut.started for o in answered),
                        100.0 * inside / total, 100.0 * whole / total)


def print_token_whole(outcomes: dict[str, list[Outcome]]) -> None:
    """Table 1e: every product row incl. auto's fallbacks on the history cut."""
    rows = []
    for name in PRODUCT_ROWS:
        h = history_score(outcomes[name])
        rows.append([name, len(outcomes[name]), h.answered, h.past_started, h.inside_pct,
                     h.token_whole_pct])
    print_table("1e. Product rows incl. auto's fallbacks (ASR timing out): cuts past the started "
                "cut (raw result), and the history cut (token_cut) inside [fully, started] and "
                "token-whole", ("row", "cuts", "answered", "past-start", "hist inside%",
                                "token-whole%"), rows)


def mark_coverage(spoken: Sequence[SpokenReply]) -> tuple[int, int]:
    """(exact marks, all marks) of the corpus."""
    marks = [mark for item in spoken for mark in item.marks]
    return sum(not mark.estimated for mark in marks), len(marks)


def print_mark_coverage(spoken: Sequence[SpokenReply]) -> None:
    """Table 0: exact (Piper-aligned) vs estimated word marks per category."""
    by_category: dict[str, list[SpokenReply]] = {}
    for item in spoken:
        by_category.setdefault(item.reply.category, []).append(item)
    rows = []
    for category, items in [*by_category.items(), ("all", list(spoken))]:
        exact, total = mark_coverage(items)
        rows.append([category, total, exact, total - exact, 100.0 * exact / max(total, 1)])
    print_table("0. Word marks: exact (Piper's phoneme alignment) vs estimated (interpolated)",
                ("category", "marks", "exact", "estimated", "exact%"), rows)


def print_categories(spoken: Sequence[SpokenReply], outcomes: dict[str, list[Outcome]]) -> None:
    """Table 1c: marks, asr and ratio per corpus category."""
    by_category: dict[str, set[str]] = {}
    for item in spoken:
        by_category.setdefault(item.reply.category, set()).add(item.reply.id)
    rows = []
    for category, ids in by_category.items():
        picked = {name: score([o for o in outcomes[name] if o.cut.spoken.reply.id in ids])
                  for name in ("marks", "asr", "ratio")}
        rows.append([category, picked["marks"].inside_answered_pct, picked["marks"].refused_pct,
                     picked["asr"].cuts, picked["asr"].inside_answered_pct,
                     picked["asr"].refused_pct, picked["asr"].past_started_pct,
                     picked["asr"].p95_ms, picked["ratio"].inside_answered_pct,
                     picked["ratio"].past_started_pct])
    print_table("1c. By category", ("category", "marks in%", "marks ref%", "asr cuts",
                                    "asr in%ans", "asr ref%", "asr past%", "asr p95 ms",
                                    "ratio in%", "ratio past%"), rows)
