"""Heard-text calibration policies: marks, asr, ratio and the `auto` stack (DESIGN.md section 5).

Every policy returns a `HeardCut` (an exclusive code-point offset into the original reply text,
always on a unit boundary with attached punctuation, see `units.cut_after_units`) or None to
keep the session's conservative history. None of them ever writes TTS or ASR strings into
history, and the original text is never given to ASR.
"""

from __future__ import annotations

import asyncio
import logging
import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from calibration import align, spoken_time, units
from calibration.arguments import positive_seconds
from calibration.asr import TimedWord, Transcriber, Transcript
from calibration.history_calibration import HeardCut, HeardTextSnapshot, HistoryCalibrationPolicy
from calibration.units import TextUnit
from calibration.word_marks import WordMark

logger = logging.getLogger(__name__)

ASR_SAFETY_MARGIN_MS = 40
"""Audio withheld from ASR at the cut. REFERENCE.md 5.2 step 1 withholds 160 ms AND the final
recognised unit, which leaves the result a word short in a third of the cuts. Measured on the
corpus of benchmarks/bench_calibration.py (1301 cuts, deterministic Piper, faster-whisper
tiny.en, the rules of `asr_evidence` and `align.align_prefix`): with 0 / 20 / 40 / 60 ms withheld,
4 / 4 / 0 / 0 results claimed a word that had not started (tiny.en writes the next word, e.g.
"see" -> "see it", when the cut is just before it), and 95.6 / 93.6 / 92.2 / 91.2 % of the
answered cuts landed between fully played and started: 40 ms is the smallest safe margin."""

ASR_MIN_AUDIO_MS = 500
"""Shortest audio (after the margin) worth transcribing (REFERENCE.md 5.2 step 2)."""

ASR_WINDOW_MS = 8_000
"""Only the last 8 s of the played audio are transcribed: whisper's cost grows with the words
it writes (0.5 s for 8 s, 0.9 s for 20 s, 2.75 s for 60 s on 2 cores), and 8 s (about 25
words) anchor the transcript in the reply as well as longer windows do."""

ASR_COMPLETION_MS = 40
"""Recognised words at the end of the transcript that start within the last 40 ms of the
audio are not evidence: whisper squeezes a word it completed from context (heard nothing of)
into the last 20-30 ms ("July 4." with "fourth" not yet spoken), and a word that began so late
may have been cut in half anyway. Measured as for ASR_SAFETY_MARGIN_MS (40 ms margin): with 0 /
20 / 30 / 40 ms, 2 / 2 / 1 / 0 results past the started word, 93.7 / 93.7 / 93.0 / 92.2 %
inside. Measured again with the rules of `align.align_prefix` that count a misheard final word
(same corpus, every 250 ms cut of the short replies + 12 per long reply, 1311 cuts): with 20 /
30 / 40 / 60 ms, 3 / 1 / 0 / 0 past the started word, 95.6 / 95.2 / 94.5 / 94.3 % inside."""

ASR_TAIL_GUARD_MS = 120
"""Audio after the end of the last recognised word (per the recogniser's word timings) that
may still belong to that word (tiny.en ends words early by up to about 100 ms)."""

ASR_TAIL_SPEECH_MS = 40
"""Speech after ASR_TAIL_GUARD_MS that the transcript must account for: at least 40 ms of
ASR_TAIL_FRAME_MS frames within ASR_TAIL_SPEECH_DB of the loudest frame of the transcribed audio."""

ASR_TAIL_SPEECH_DB = 25.0
"""Level, in dB below the loudest frame of the transcribed audio, above which a frame is
speech (Piper's quietest voiced frames are about 20 dB below its peak, pauses 40 dB and more)."""

ASR_MS_PER_SYLLABLE = 150
"""Shortest time, in ms per syllable, in which a TTS says a word whole (fast speech is about
6.5 syllables/s; Piper's joe voice says about 4.5)."""

ASR_TAIL_FRAME_MS = 20
"""Frame length, in ms, of the level measurement of `next_unit_left_untranscribed`."""

AUTO_ASR_TIMEOUT_S = 0.7
"""Budget of each ASR attempt inside `auto` (cross-check or primary), below the controller's
default 1 s so that a slow recogniser cannot cost the marks result or the ratio fallback."""

POLICY_NAMES = ("auto", "marks", "asr", "ratio", "off")


def _heard_mark_end(marks: Sequence[WordMark], end_ms: int) -> tuple[int, bool]:
    """Scan marks in text order: (char end of the heard ones, whether any of them is estimated).

    A mark is heard when its `end_ms <= end_ms`; the scan stops at the first mark that is not.
    """
    heard_end, estimated = 0, False
    for mark in sorted(marks, key=lambda m: m.char_start):
        if mark.end_ms > end_ms:
            break
        estimated = estimated or mark.estimated
        heard_end = max(heard_end, mark.char_end)
    return heard_end, estimated


@dataclass(frozen=True, slots=True)
class MarksEvidence:
    """What a reply's word marks prove about a playback position (code points into the text).

    Attributes:
        proven: cut (snapped down to a unit boundary) before which every word was fully played.
        started: cut (snapped down to a unit boundary) after which no word had started: the
            start of the first exact mark that starts at or after played_ms, else the end of
            the last mark (text after the marks was never synthesised); never below `proven`.
        exact: True when no estimated mark lies between `proven` and `started` (the marks
            decide alone); False when estimated marks leave the cut open in [proven, started].
    """

    proven: int
    started: int
    exact: bool


def marks_evidence(snapshot: HeardTextSnapshot) -> MarksEvidence | None:
    """The cut the marks prove at `snapshot.played_ms`; None when there are no marks or a mark
    lies outside the text.

    Exact marks are trusted as far as they reach: a word is fully played when its exact mark
    ends by played_ms, and so is every marked word before an exact mark that started before
    played_ms (audio is spoken in text order). An estimated mark (proportional timing) counts only
    through such a later exact mark, never by its own times: estimated stretches are bounded
    by the exact marks around them.
    """
    text, marks = snapshot.text, snapshot.word_marks
    if not marks or any(not 0 <= m.char_start <= m.char_end <= len(text) for m in marks):
        return None
    played = snapshot.played_ms
    ordered = sorted(marks, key=lambda m: m.char_start)
    proven_end = 0
    started = ordered[-1].char_end
    before_end = 0
    for mark in ordered:
        if not mark.estimated:
            if mark.end_ms <= played:
                proven_end = max(proven_end, mark.char_end)
            elif mark.start_ms < played:
                proven_end = max(proven_end, before_end)
            else:
                started = min(started, mark.char_start)
        before_end = max(before_end, mark.char_end)
    proven = units.snap_down(text, proven_end)
    exact = not any(
        m.estimated and m.char_end > proven_end and m.char_start < started for m in ordered
    )
    return MarksEvidence(proven, max(units.snap_down(text, started), proven), exact)


def _marks_cut(snapshot: HeardTextSnapshot) -> int | None:
    """The cut of policy "marks" (code points): `marks_evidence(...).proven`; None when the
    marks cannot decide (no marks, or a mark outside the text)."""
    evidence = marks_evidence(snapshot)
    return None if evidence is None else evidence.proven


def _agreeing_asr_cuts(snapshot: HeardTextSnapshot) -> set[int]:
    """The ASR cuts consistent with the marks, given the evidence ASR had.

    ASR hears up to e = played_ms - ASR_SAFETY_MARGIN_MS. With k units ended by e (per the
    marks), a correct ASR cut keeps those k units, perhaps without the last one (a withheld
    final unit, or a word dropped as completed) or with the following units that had started
    by e (a word cut in half that the recogniser caught).
    """
    text_units = units.text_units(snapshot.text)
    evidence_ms = snapshot.played_ms - ASR_SAFETY_MARGIN_MS
    unit_ends = [unit.end for unit in text_units]
    count = bisect_right(unit_ends, _heard_mark_end(snapshot.word_marks, evidence_ms)[0])
    started_end = 0
    for mark in sorted(snapshot.word_marks, key=lambda m: m.char_start):
        if mark.start_ms >= evidence_ms:
            break
        started_end = max(started_end, mark.char_end)
    started = max(count, bisect_right(unit_ends, started_end))
    return {units.cut_after_units(snapshot.text, text_units, k)
            for k in range(max(0, count - 1), started + 1)}


def marks_policy() -> HistoryCalibrationPolicy:
    """Policy "marks": the TTS's own word timings from the streamed synthesis run.

    A word counts as heard when its exact mark's `end_ms <= played_ms` (marks round ends up, so
    a partly rendered word never counts), and so does every word before an exact mark that
    started; estimated marks never extend the cut by their own times (`marks_evidence`), so the
    cut is the longest prefix of fully played words the marks prove. Needs no audio. Returns
    HeardCut(method="marks"), or None when the snapshot has no marks or a mark outside the text.
    """

    async def calibrate(snapshot: HeardTextSnapshot) -> int | None:
        cut = _marks_cut(snapshot)
        return None if cut is None else HeardCut(cut, method="marks")

    return HistoryCalibrationPolicy(calibrate=calibrate, requires_audio=False)


def _ratio_cut(snapshot: HeardTextSnapshot) -> int | None:
    """The cut of policy "ratio" (code points): `spoken_time.heard_units` snapped to whole
    units; None without a complete duration."""
    complete = snapshot.complete_audio_duration_ms
    if complete is None or complete <= 0:
        return None
    count = spoken_time.heard_units(snapshot.text, snapshot.played_ms, complete)
    return units.cut_after_units(snapshot.text, units.text_units(snapshot.text), count)


def ratio_policy() -> HistoryCalibrationPolicy:
    """Policy "ratio": an estimate from the played share of the complete duration, erring short.

    Without word marks only played_ms / complete_audio_duration_ms is known. It is spread over
    the units by two timing models (`spoken_time`: every spoken word alike, as the uniform test
    voice; and spoken length in letters of the spoken form with pauses at punctuation, as Piper
    speaks), and a unit counts as heard only when both models end it before played_ms less a
    margin in ms (`spoken_time.WORD_MODEL_MARGIN_MS`; `spoken_time.RATIO_MARGIN_MS` plus
    `spoken_time.RATIO_DRIFT_PERCENT` of the distance to the nearer end of the audio). The final
    unit is always withheld (REFERENCE.md 5.3 step 5). Needs no audio. Refuses (None) when the
    complete duration is unknown: a partial duration must never be the denominator of the full
    text (REFERENCE.md 3.11). The method says "ratio": an estimate, not a measurement.
    """

    async def calibrate(snapshot: HeardTextSnapshot) -> int | None:
        cut = _ratio_cut(snapshot)
        return None if cut is None else HeardCut(cut, method="ratio")

    return HistoryCalibrationPolicy(calibrate=calibrate, requires_audio=False)


def _asr_audio(snapshot: HeardTextSnapshot) -> tuple[np.ndarray, int] | None:
    """The audio ASR hears: (float32 samples, start ms on the reply timeline); None if unusable.

    The played prefix minus ASR_SAFETY_MARGIN_MS (REFERENCE.md 5.2 step 1), of which only the
    last ASR_WINDOW_MS are kept. None for fewer than 500 ms of audio (REFERENCE.md 5.2 step 2),
    a bad rate or buffer, and any non-finite sample.
    """
    rate = snapshot.sample_rate_hz
    if rate <= 0 or len(snapshot.pcm_f32le) % 4:
        return None
    retained = np.frombuffer(snapshot.pcm_f32le, dtype="<f4")
    end = min(retained.size, max(0, (snapshot.played_ms - ASR_SAFETY_MARGIN_MS) * rate // 1000))
    if end < rate * ASR_MIN_AUDIO_MS // 1000:
        return None
    start = max(0, end - rate * ASR_WINDOW_MS // 1000)
    pcm = retained[start:end]
    if not np.isfinite(pcm).all():
        return None
    return pcm.astype(np.float32), start * 1000 // rate


def asr_evidence(transcript: str, duration_s: float) -> tuple[str, bool]:
    """The transcript text to align and whether its final unit must be withheld.

    `transcript` is what the recogniser returned for `duration_s` seconds of audio.
    With word timings (`asr.Transcript`), trailing words that start within the last
    ASR_COMPLETION_MS of the audio are dropped and the final remaining unit counts when it
    matches (`align.align_prefix(withhold_last=False)`). Without them the final recognised
    unit is withheld (REFERENCE.md 5.2 step 11).
    """
    words = transcript.words if isinstance(transcript, Transcript) else ()
    if not words:
        return transcript, True
    return "".join(word.text for word in _evidence_words(words, duration_s)), False


def _evidence_words(words: Sequence[TimedWord], duration_s: float) -> Sequence[TimedWord]:
    """`words` without the trailing ones that start within the last ASR_COMPLETION_MS of
    `duration_s` seconds of audio (see `asr_evidence`)."""
    latest = duration_s - ASR_COMPLETION_MS / 1000
    kept = len(words)
    while kept and words[kept - 1].start_s > latest:
        kept -= 1
    return words[:kept]


def next_unit_left_untranscribed(
    transcript: str, pcm: np.ndarray, sample_rate_hz: int, next_unit: TextUnit | None
) -> bool:
    """Whether the audio after the transcript's last word could hold `next_unit` whole.

    `transcript` is what the recogniser returned for `pcm` (float32 samples at `sample_rate_hz`
    Hz); `next_unit` is the original unit after the aligned cut (None at the end of the text).
    False without word timings (`asr.Transcript.words`) or without a next unit. Otherwise the
    words kept by `asr_evidence` end at `end_s` (0 when none is kept), and the answer is True
    when the audio after `end_s` lasts at least ASR_MS_PER_SYLLABLE per syllable of `next_unit`
    (`units.unit_syllables`) and at least ASR_TAIL_SPEECH_MS of its ASR_TAIL_FRAME_MS frames
    that start ASR_TAIL_GUARD_MS or more after `end_s` have an RMS within ASR_TAIL_SPEECH_DB of
    the loudest frame of `pcm`: the recogniser dropped a word it heard.

    Why: tiny.en drops a short word that was played whole after a pause at the very end of the
    audio ("... from the west. You" -> "... from the west."), which leaves the cut a word short.
    Measured on the corpus of benchmarks/bench_calibration.py (1311 cuts, 1034 answered before
    this rule; tiny.en; the rules of `asr_evidence`): refusing those cuts turns 30 of the 57
    short results (and 26 correct ones) into refusals, 94.5 -> 97.2 % inside of the answered
    cuts, 0 past the started word. Without the syllable rule 58 correct results were refused for
    the same gain (the start of a long number is not a whole word). At 100 / 150 / 200 / 250 ms
    per syllable: 97.3 / 97.2 / 97.0 / 96.8 % inside, 63 / 56 / 45 / 37 more refusals; guard
    80 / 120 / 160 ms and level -20 / -25 / -30 dB move the result by at most 0.3 points.
    """
    words = transcript.words if isinstance(transcript, Transcript) else ()
    if not words or next_unit is None:
        return False
    duration_s = pcm.size / sample_rate_hz
    kept = _evidence_words(words, duration_s)
    end_s = kept[-1].end_s if kept else 0.0
    if (duration_s - end_s) * 1000 < ASR_MS_PER_SYLLABLE * units.unit_syllables(next_unit):
        return False
    frame = sample_rate_hz * ASR_TAIL_FRAME_MS // 1000
    count = pcm.size // frame
    if count == 0:
        return False
    power = np.square(pcm[: count * frame].reshape(count, frame), dtype=np.float64).mean(axis=1)
    first = math.ceil((end_s * 1000 + ASR_TAIL_GUARD_MS) / ASR_TAIL_FRAME_MS)
    loud = power[first:] > power.max() * 10 ** (-ASR_TAIL_SPEECH_DB / 10)
    return int(loud.sum()) * ASR_TAIL_FRAME_MS >= ASR_TAIL_SPEECH_MS


def _expected_unit(snapshot: HeardTextSnapshot, end_ms: int) -> int | None:
    """Estimated number of units spoken by `end_ms` (a window hint for the aligner).

    From the marks when there are any, else from the complete duration; None when neither.
    """
    text_units = units.text_units(snapshot.text)
    if snapshot.word_marks:
        heard = [m.char_end for m in snapshot.word_marks if m.end_ms <= end_ms]
        end = max(heard, default=0)
        return bisect_right([unit.end for unit in text_units], end)
    complete = snapshot.complete_audio_duration_ms
    if complete is not None and complete > 0:
        return spoken_time.expected_units(snapshot.text, end_ms, complete)
    return None


async def _asr_attempt(
    snapshot: HeardTextSnapshot, transcriber: Transcriber
) -> tuple[str | None, int | None]:
    """Transcribe the played audio and align it: (transcript, cut), each None when absent."""
    audio = _asr_audio(snapshot)
    if audio is None:
        return None, None
    pcm, start_ms = audio
    transcript = await transcriber.transcribe(pcm, snapshot.sample_rate_hz)
    duration_ms = pcm.size * 1000 // snapshot.sample_rate_hz
    heard, withhold_last = asr_evidence(transcript, pcm.size / snapshot.sample_rate_hz)
    result = await asyncio.to_thread(
        align.align_prefix, snapshot.text, heard,
        expected_unit=_expected_unit(snapshot, start_ms + duration_ms),
        from_start=start_ms == 0, withhold_last=withhold_last,
    )
    if result.char_end is None:
        return transcript, None
    text_units = units.text_units(snapshot.text)
    next_unit = text_units[result.heard_units] if result.heard_units < len(text_units) else None
    if next_unit_left_untranscribed(transcript, pcm, snapshot.sample_rate_hz, next_unit):
        return transcript, None
    return transcript, result.char_end


def asr_policy(transcriber: Transcriber) -> HistoryCalibrationPolicy:
    """Policy "asr": transcribe the played audio and align the transcript to the original.

    The retained PCM is cut at played_ms - ASR_SAFETY_MARGIN_MS and only its last
    ASR_WINDOW_MS are transcribed (refused below 500 ms or when non-finite), WITHOUT the
    original text. The transcript (`asr_evidence`: without words that start in the last
    ASR_COMPLETION_MS when word timings are known, else with its final unit withheld) is
    aligned with `align.align_prefix` (edit-distance prefix matcher on spoken-form words,
    REFERENCE.md 5.2; a window of the played audio that does not start at 0 is aligned without
    the start anchor) given an expected unit estimated from the marks or the complete duration.
    Refuses when the audio after the transcript's last word holds speech and could hold the
    next original unit whole (`next_unit_left_untranscribed`: the recogniser dropped a word it
    heard, so the cut would be short). Returns
    HeardCut(method="asr", asr_text=the transcript) or None when the audio is unusable, speech
    is left untranscribed or the matcher refuses. Transcriber errors propagate (the controller
    logs their class and keeps the old history).
    """

    async def calibrate(snapshot: HeardTextSnapshot) -> int | None:
        transcript, cut = await _asr_attempt(snapshot, transcriber)
        if cut is None:
            return None
        return HeardCut(cut, method="asr", asr_text=transcript)

    return HistoryCalibrationPolicy(calibrate=calibrate, requires_audio=True)


def auto_policy(
    transcriber: Transcriber | None, *, asr_timeout_s: float = AUTO_ASR_TIMEOUT_S
) -> HistoryCalibrationPolicy:
    """Policy "auto": marks when they decide, else ASR (if configured) within the marks'
    bounds, else the marks' proven cut, else ratio.

    Every ASR attempt here is bounded by `asr_timeout_s` seconds (keep it below the
    controller's `timeout_s`); a failure or timeout counts as a refusal.
    With a transcriber (audio is then retained), a marks result is returned at once and
    cross-checked by ASR in the background (`HeardCut.cross_check`, awaited by the session
    layer): `marks_agree` reports whether the ASR cut agrees with the marks for the same
    evidence (`_agreeing_asr_cuts`: the marks at played_ms - ASR_SAFETY_MARGIN_MS), None when
    ASR refused. When estimated marks leave the cut open (`MarksEvidence.exact` False), ASR
    decides, clamped to [proven, started] of `marks_evidence`; when it refuses or times out,
    the proven cut stands (method "marks"): no fallback claims a word the marks do not prove.
    Without marks, ASR decides; when it refuses, ratio decides (erring short, None without a
    complete duration). Raises ValueError for a non-positive or non-finite budget.
    """
    positive_seconds("asr_timeout_s", asr_timeout_s)

    async def calibrate(snapshot: HeardTextSnapshot) -> int | None:
        evidence = marks_evidence(snapshot)
        has_audio = transcriber is not None and bool(snapshot.pcm_f32le)
        if evidence is not None and (evidence.exact or not has_audio):
            if not has_audio:
                return HeardCut(evidence.proven, method="marks")
            cross_check = asyncio.ensure_future(
                _cross_check(snapshot, transcriber, asr_timeout_s)
            )
            return HeardCut(evidence.proven, method="marks", cross_check=cross_check)
        if has_audio:
            transcript, asr_cut = await _bounded_asr(snapshot, transcriber, asr_timeout_s)
            if asr_cut is not None and evidence is not None:
                asr_cut = min(max(asr_cut, evidence.proven), evidence.started)
            if asr_cut is not None:
                return HeardCut(asr_cut, method="asr", asr_text=transcript)
        if evidence is not None:
            return HeardCut(evidence.proven, method="marks")
        ratio_cut = _ratio_cut(snapshot)
        return None if ratio_cut is None else HeardCut(ratio_cut, method="ratio")

    return HistoryCalibrationPolicy(calibrate=calibrate, requires_audio=transcriber is not None)


async def _cross_check(
    snapshot: HeardTextSnapshot, transcriber: Transcriber, timeout_s: float
) -> tuple[str | None, bool | None]:
    """ASR of the played audio checked against a marks cut: (transcript, marks_agree).

    `marks_agree` is None when ASR refused, failed or timed out (`_bounded_asr`).
    """
    transcript, asr_cut = await _bounded_asr(snapshot, transcriber, timeout_s)
    return transcript, None if asr_cut is None else asr_cut in _agreeing_asr_cuts(snapshot)


async def _bounded_asr(
    snapshot: HeardTextSnapshot, transcriber: Transcriber, timeout_s: float
) -> tuple[str | None, int | None]:
    """`_asr_attempt` within `timeout_s` seconds; (None, None) on failure or timeout.

    A failure is logged by exception class name only.
    """
    try:
        async with asyncio.timeout(timeout_s):
            return await _asr_attempt(snapshot, transcriber)
    except Exception as exc:
        logger.info(
            "auto asr attempt failed response=%s error=%s",
            snapshot.response_id,
            type(exc).__name__,
        )
        return None, None


def make_policy(name: str, transcriber: Transcriber | None) -> HistoryCalibrationPolicy | None:
    """Build the policy called `name` ("auto" | "marks" | "asr" | "ratio" | "off").

    "off" gives None (calibration disabled). "asr" needs a transcriber; "auto" uses one when
    given. Raises ValueError for an unknown name or "asr" without a transcriber.
    """
    match name:
        case "auto":
            return auto_policy(transcriber)
        case "marks":
            return marks_policy()
        case "asr":
            if transcriber is None:
                raise ValueError('policy "asr" needs a transcriber')
            return asr_policy(transcriber)
        case "ratio":
            return ratio_policy()
        case "off":
            return None
    raise ValueError(f"unknown calibration policy {name!r}; expected one of {POLICY_NAMES}")


__all__ = [
    "ASR_COMPLETION_MS",
    "ASR_MIN_AUDIO_MS",
    "ASR_MS_PER_SYLLABLE",
    "ASR_SAFETY_MARGIN_MS",
    "ASR_TAIL_FRAME_MS",
    "ASR_TAIL_GUARD_MS",
    "ASR_TAIL_SPEECH_DB",
    "ASR_TAIL_SPEECH_MS",
    "ASR_WINDOW_MS",
    "AUTO_ASR_TIMEOUT_S",
    "POLICY_NAMES",
    "MarksEvidence",
    "asr_evidence",
    "asr_policy",
    "auto_policy",
    "make_policy",
    "marks_evidence",
    "marks_policy",
    "next_unit_left_untranscribed",
    "ratio_policy",
]
