"""Calibration over partial evidence (issue 12 items 3 and 5): marks keep what their exact part
proves, no policy or fallback claims a word that had not started."""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibration import units
from calibration.history_calibration import HeardCut, HeardTextSnapshot
from calibration.policies import auto_policy, marks_evidence, marks_policy, ratio_policy
from calibration.word_marks import WordMark
from server.speech.segmenter import SpeechSegmenter
from tests.conftest import loaded_synthesizer
from tests.realtime_client import RealtimeClient


class SlowTranscriber:
    """An ASR that never answers within the auto policy's budget."""

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        await asyncio.sleep(5)
        return "never"


def snapshot(text: str, played_ms: int, marks: tuple[WordMark, ...], *,
             complete: int | None = None, pcm_ms: int = 0) -> HeardTextSnapshot:
    rate = 16_000
    return HeardTextSnapshot(
        response_id="resp_1", text=text,
        pcm_f32le=np.full(rate * pcm_ms // 1000, 0.1, dtype="<f4").tobytes(),
        sample_rate_hz=rate if pcm_ms else 0, played_ms=played_ms,
        complete_audio_duration_ms=complete, word_marks=marks,
    )


def started_cut(text: str, marks: tuple[WordMark, ...], played_ms: int) -> int:
    """End of the last word that had started by `played_ms` (true timings), 0 when none."""
    return max((m.char_end for m in marks if m.start_ms < played_ms), default=0)


def played_cut(text: str, marks: tuple[WordMark, ...], played_ms: int) -> int:
    """Cut after the words fully played by `played_ms` (true timings)."""
    end = 0
    for mark in sorted(marks, key=lambda m: m.char_start):
        if mark.end_ms > played_ms:
            break
        end = mark.char_end
    return units.snap_down(text, end)


async def cut_of(policy: object, snap: HeardTextSnapshot) -> int | None:
    result = await policy.calibrate(snap)
    return None if result is None else int(result)


def word_marks(text: str, durations: list[int]) -> tuple[WordMark, ...]:
    """Marks for the whitespace-separated words of `text`, back to back with `durations`."""
    marks, position, now = [], 0, 0
    for word, duration in zip(text.split(" "), durations, strict=True):
        marks.append(WordMark(position, position + len(word), now, now + duration))
        position += len(word) + 1
        now += duration
    return tuple(marks)


# ------------------------------------------------------------------ marks over partial evidence

async def test_marks_keep_the_exact_prefix_before_an_estimated_stretch() -> None:
    text = "It is fixed. Read CVE-2024-3094 now."
    marks = (WordMark(0, 2, 0, 200), WordMark(3, 5, 200, 400), WordMark(6, 12, 400, 800),
             WordMark(13, 17, 900, 1200, True), WordMark(18, 31, 1200, 3000, True),
             WordMark(32, 36, 3000, 3400, True))
    cut = await cut_of(marks_policy(), snapshot(text, 1247, marks))
    assert text[:cut] == "It is fixed."


async def test_estimated_words_count_once_a_later_exact_word_started() -> None:
    text = "one two three four five"
    marks = (WordMark(0, 3, 0, 300), WordMark(4, 7, 300, 600, True),
             WordMark(8, 13, 600, 900, True), WordMark(14, 18, 1000, 1300),
             WordMark(19, 23, 1300, 1600))
    assert text[: await cut_of(marks_policy(), snapshot(text, 950, marks))] == "one"
    assert text[: await cut_of(marks_policy(), snapshot(text, 1001, marks))] == "one two three"
    evidence = marks_evidence(snapshot(text, 950, marks))
    assert evidence is not None and not evidence.exact
    assert text[: evidence.started] == "one two three"


async def test_auto_with_asr_timing_out_keeps_only_what_marks_prove() -> None:
    """Issue 12 item 5: the played-share fallback claimed words that had not started."""
    text = " ".join(["word"] * 40)
    true = word_marks(text, [300 + 200 * (index < 20) for index in range(40)])
    marks = tuple(dataclasses.replace(m, estimated=index >= 5) for index, m in enumerate(true))
    policy = auto_policy(SlowTranscriber(), asr_timeout_s=0.05)
    snap = snapshot(text, 9000, marks, complete=true[-1].end_ms, pcm_ms=9000)
    result = await policy.calibrate(snap)
    assert isinstance(result, HeardCut) and result.method == "marks"
    assert int(result) <= started_cut(text, true, 9000)


@pytest.mark.parametrize("calibration", ["marks", "auto"])
async def test_piper_barge_in_after_read_keeps_the_fully_played_sentence(
    start_server, calibration: str
) -> None:
    """Issue 12 item 3: `It is fixed. Read CVE-2024-3094 now.`, Piper, barge-in at 1247 ms
    (after "Read") gave "" instead of "It is fixed."."""
    server = await start_server(tts="piper", calibration=calibration)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt("say: It is fixed. Read CVE-2024-3094 now.")
        await client.wait_for("response.output_audio.delta")
        await client.ack(response_id, 0)  # at once: a client that reports playback
        await client.wait_audio_until(response_id, 1247, timeout=60)
        await client.ack(response_id, 1247)
        await client.barge_in(response_id, 1247)
        heard = await client.heard(item_id, lambda e: e["method"] != "none", timeout=30)
    assert heard["text"] in ("It is fixed.", "It is fixed. Read")


# ------------------------------------------------------------------ a long run-on on real Piper

RUN_ON = " ".join(
    ["the", "river", "kept", "rising", "past", "old", "stone", "walls", "near", "town"] * 25
)


@pytest.fixture(scope="module")
def run_on_marks() -> tuple[tuple[WordMark, ...], int]:
    """Reply-timeline marks of RUN_ON as the server speaks it (segmenter pieces, real Piper),
    and the reply's audio duration in ms."""
    piper = loaded_synthesizer("piper")
    segmenter = SpeechSegmenter()
    marks: list[WordMark] = []
    samples = 0
    for start, end in segmenter.feed(RUN_ON) + segmenter.flush():
        for chunk in piper.synthesize(RUN_ON[start:end]):
            offset = samples * 1000 // piper.sample_rate_hz
            marks += [mark.shifted(start, offset) for mark in chunk.marks]
            samples += len(chunk.pcm)
    return tuple(marks), samples * 1000 // piper.sample_rate_hz


@pytest.mark.parametrize("played_ms", [1000, 13_500, 27_000, 51_000])
async def test_no_policy_passes_the_started_cut_on_a_250_word_run_on(
    run_on_marks: tuple[tuple[WordMark, ...], int], played_ms: int
) -> None:
    """Issue 12 item 5: up to 7 words past the started cut at 27 s (auto, ASR timed out)."""
    marks, complete = run_on_marks
    assert len(marks) == 250 and not any(mark.estimated for mark in marks)
    started = started_cut(RUN_ON, marks, played_ms)
    played = played_cut(RUN_ON, marks, played_ms)
    assert await cut_of(marks_policy(), snapshot(RUN_ON, played_ms, marks)) == played
    blurred = tuple(dataclasses.replace(m, estimated=True) for m in marks)
    slow = auto_policy(SlowTranscriber(), asr_timeout_s=0.05)
    for snap in (snapshot(RUN_ON, played_ms, (), complete=complete),
                 snapshot(RUN_ON, played_ms, blurred, complete=complete, pcm_ms=played_ms),
                 snapshot(RUN_ON, played_ms, (), complete=complete, pcm_ms=played_ms)):
        for policy in (ratio_policy(), auto_policy(None), slow):
            cut = await cut_of(policy, snap)
            assert cut is None or cut <= started, (policy, RUN_ON[started:cut])


# ------------------------------------------------------------------ properties

_WORDS = st.sampled_from(["a", "word", "$9.05", "example.com", "4\u20136", "CVE-2024-3094",
                          "it's", "\u4f60", "Dr."])


@st.composite
def replies(draw: st.DrawFn) -> tuple[str, tuple[WordMark, ...], tuple[WordMark, ...], int]:
    """(text, true marks, marks as a TTS reported them, played_ms): reported marks are the true
    ones, some flagged estimated with times shifted anywhere within their neighbours."""
    words = draw(st.lists(_WORDS, min_size=1, max_size=30))
    text = " ".join(words)
    durations = draw(st.lists(st.integers(50, 900), min_size=len(words), max_size=len(words)))
    true = word_marks(text, durations)
    reported = []
    for index, mark in enumerate(true):
        if draw(st.booleans()):
            low = true[index - 1].start_ms if index else 0
            high = true[index + 1].end_ms if index + 1 < len(true) else mark.end_ms + 500
            start = draw(st.integers(low, high))
            end = draw(st.integers(start, high))
            mark = WordMark(mark.char_start, mark.char_end, start, end, True)
        reported.append(mark)
    played_ms = draw(st.integers(0, true[-1].end_ms + 100))
    return text, true, tuple(reported), played_ms


@given(reply=replies())
async def test_marks_and_auto_never_pass_the_started_cut_and_marks_keep_the_proven_words(
    reply: tuple[str, tuple[WordMark, ...], tuple[WordMark, ...], int],
) -> None:
    text, true, reported, played_ms = reply
    started = started_cut(text, true, played_ms)
    complete = true[-1].end_ms
    marks_cut = await cut_of(marks_policy(), snapshot(text, played_ms, reported))
    assert marks_cut is not None and marks_cut <= started
    exact_prefix = 0
    for mark, seen in zip(true, reported, strict=True):
        if mark.end_ms > played_ms or seen.estimated:
            break
        exact_prefix = mark.char_end
    assert marks_cut >= units.snap_down(text, exact_prefix)
    for policy in (auto_policy(None), auto_policy(SlowTranscriber(), asr_timeout_s=0.01)):
        snap = snapshot(text, played_ms, reported, complete=complete, pcm_ms=600)
        cut = await cut_of(policy, snap)
        assert cut is None or cut <= started


@given(
    words=st.lists(_WORDS, min_size=1, max_size=40),
    drift=st.lists(st.integers(-2, 2), min_size=40, max_size=40),
    share=st.integers(0, 1000),
)
async def test_ratio_never_passes_the_started_cut_within_two_percent_of_the_timing_rule(
    words: list[str], drift: list[int], share: int
) -> None:
    """Ratio's shortfall covers any per-word speech rate within +-2 % of the uniform timing
    rule (every spoken word 400 ms, a CJK unit 250 ms)."""
    text = " ".join(words)
    text_units = units.text_units(text)
    durations = []
    for word, percent in zip(text.split(" "), drift, strict=False):
        rule = sum(250 if unit.cjk else 400 * len(unit.spoken)
                   for unit in units.text_units(word))
        durations.append(rule * (100 + percent) // 100)
    true = word_marks(text, durations)
    played_ms = true[-1].end_ms * share // 1000
    assert text_units
    for policy in (ratio_policy(), auto_policy(None)):
        cut = await cut_of(policy, snapshot(text, played_ms, (), complete=true[-1].end_ms))
        assert cut is None or cut <= started_cut(text, true, played_ms)
