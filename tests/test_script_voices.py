"""Text the English voice cannot speak (Chinese, Japanese kana, Korean, Cyrillic...) is spoken
by an espeak-ng voice of its language, with exact marks, so a cut inside it stays exact (issue
12: the English voice read each Chinese character as "Chinese letter")."""
# ruff: noqa: RUF001  (full-width CJK punctuation and Greek letters are the test data)

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from calibration.units import text_units
from server.speech.script_voices import ScriptVoiceSynthesizer, script_runs, voice_of
from server.speech.synthesizer import SpeechChunk, SpeechSynthesizer, StopSignal
from tests.conftest import loaded_synthesizer
from tests.realtime_client import RealtimeClient

MIXED = "The word is 谢谢你的帮助，我们明天见。Then ありがとう。 Bye."


class RecordingVoice:
    """A real voice that keeps every text it was given."""

    def __init__(self, inner: SpeechSynthesizer) -> None:
        self.inner = inner
        self.name = inner.name
        self.sample_rate_hz = inner.sample_rate_hz
        self.texts: list[str] = []

    def warm_up(self) -> None:
        self.inner.warm_up()

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        self.texts.append(text)
        yield from self.inner.synthesize(text, stop)


def other_script(text: str) -> list[str]:
    return [char for char in text if voice_of(char) is not None]


@pytest.mark.parametrize(("text", "runs"), [
    ("Hello 你好, world.", [("Hello ", None), ("你好, ", "cmn"), ("world.", None)]),
    ("“你好”, he said.", [("“你好”, ", "cmn"), ("he said.", None)]),
    ("東京に行きます", [("東京", "cmn"), ("に", "ja"), ("行", "cmn"), ("きます", "ja")]),
    ("안녕하세요 세계!", [("안녕하세요 세계!", "ko")]),
    ("I use iPhone是好的 and привет мир.", [("I use iPhone", None), ("是好的 ", "cmn"),
                                          ("and ", None), ("привет мир.", "ru")]),
    ("Γειά σου, 42!", [("Γειά σου, 42!", "el")]),
    ("$42.50 - 3/4", [("$42.50 - 3/4", None)]),
    ("", []),
])
def test_text_splits_into_runs_of_one_voice(text: str, runs: list[tuple[str, str | None]]) -> None:
    found = script_runs(text)
    assert [(text[run.start:run.end], run.voice) for run in found] == runs
    assert "".join(text[run.start:run.end] for run in found) == text


@pytest.mark.parametrize("engine", ["piper", "espeak"])
def test_the_english_voice_never_gets_cjk_and_the_cjk_marks_are_exact(engine: str) -> None:
    router = loaded_synthesizer(engine)
    assert isinstance(router, ScriptVoiceSynthesizer)
    main = RecordingVoice(router.main)
    tts = ScriptVoiceSynthesizer(main)
    text = "Hello there, 你好世界，今天天气很好。こんにちは、ありがとう。안녕하세요. Goodbye."
    chunks = list(tts.synthesize(text))
    assert main.texts == ["Hello there, ", "Goodbye."]
    assert all(chunk.pcm.dtype.name == "float32" for chunk in chunks)
    marks = [mark for chunk in chunks for mark in chunk.marks]
    assert not [mark for mark in marks if mark.estimated]
    # Every written grapheme of the other scripts is covered by exactly one mark ...
    foreign = [unit for unit in text_units(text) if other_script(text[unit.start:unit.end])]
    for unit in foreign:
        covering = [mark for mark in marks if mark.char_start <= unit.start
                    and unit.end <= mark.char_end]
        assert len(covering) == 1, text[unit.start:unit.end]
    # ... and spoken: 2.5 s of audio at least for the 10 Chinese characters (measured: 2.95 s;
    # "Chinese letter" for each one would be over 6 s, silence 0).
    chinese = next(chunk for chunk in chunks if chunk.marks and
                   text[chunk.marks[0].char_start] == "你")
    seconds = chinese.pcm.size / tts.sample_rate_hz
    assert 2.0 <= seconds <= 4.5
    assert float(abs(chinese.pcm).max()) > 0.1
    # Within a chunk, marks follow each other in time and in the text.
    for chunk in chunks:
        for before, after in zip(chunk.marks, chunk.marks[1:], strict=False):
            assert before.char_end <= after.char_start and before.end_ms <= after.start_ms


def test_a_stop_between_runs_ends_the_synthesis() -> None:
    tts = loaded_synthesizer("piper")
    stop = StopSignal()
    chunks = []
    for chunk in tts.synthesize("Hello there, 你好世界。Goodbye.", stop):
        chunks.append(chunk)
        stop.set()
    assert len(chunks) == 1


async def test_a_barge_in_inside_chinese_cuts_between_graphemes_at_the_heard_mark(
    start_server,
) -> None:
    """A mixed English/Chinese/Japanese reply on the real server with Piper: the English voice
    gets no CJK, the Chinese marks are exact, and a barge-in inside a Chinese word keeps the
    graphemes whose marks ended, in history and in `conversation.item.heard`."""
    voices: list[RecordingVoice] = []

    def observe(router: SpeechSynthesizer) -> SpeechSynthesizer:
        assert isinstance(router, ScriptVoiceSynthesizer)
        voices.append(RecordingVoice(router.main))
        return ScriptVoiceSynthesizer(voices[-1])

    server = await start_server(tts="piper", calibration="marks", wrap_tts=observe)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt(f"say: {MIXED}")
        acked = 0
        chinese = []
        while not chinese:  # ACK at TTS speed until the Chinese clause's marks arrive
            delta = await client.wait_for("response.output_audio.delta",
                                          lambda e: e["response_id"] == response_id)
            chinese = [mark for mark in delta.get("marks", []) if "帮" in mark["text"]]
            if not chinese and delta["audio_end_ms"] > acked:
                acked = delta["audio_end_ms"]
                await client.ack(response_id, acked)
        clause = list(delta["marks"])
        target = chinese[0]
        assert not [mark for mark in clause if mark["estimated"]]
        # Spoken as Mandarin syllables (measured 137-307 ms a character), not as "Chinese
        # letter" (about 700 ms a character in English).
        for mark in clause:
            per_char = (mark["end_ms"] - mark["start_ms"]) / len(mark["text"])
            assert 80 <= per_char <= 500, mark
        before = clause[clause.index(target) - 1]
        cut_ms = (target["start_ms"] + target["end_ms"]) // 2
        assert acked < cut_ms
        await client.wait_audio_until(response_id, cut_ms, timeout=60)
        await client.ack(response_id, cut_ms)
        await client.barge_in(response_id, cut_ms)
        heard = await client.heard(item_id, lambda e: e["method"] == "marks", timeout=30)
    assert heard["text"] == MIXED[:before["char_end"]] == "The word is 谢谢你的"
    assert heard["full_text"] == MIXED
    assert voices and all(not other_script(text) for text in voices[-1].texts)
    assert voices[-1].texts[0] == "The word is "


async def test_a_mixed_reply_played_in_full_has_exact_marks_on_every_cjk_grapheme(
    start_server,
) -> None:
    server = await start_server(tts="piper", calibration="marks")
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt(f"say: {MIXED}")
        acked = 0
        for _ in range(600):  # play at TTS speed (ACK all audio sent), for at most 60 s
            if client.of_type("response.done"):
                break
            sent = max((e["audio_end_ms"] for e in client.of_type(
                "response.output_audio.delta", response_id=response_id)), default=0)
            if sent > acked:
                acked = sent
                await client.ack(response_id, acked)
            await client.drain(0.1)
        assert client.of_type("response.done")
        sent = client.of_type("response.output_audio.delta", response_id=response_id)
        await client.ack(response_id, sent[-1]["audio_end_ms"])
        item = await client.retrieve(item_id)
    marks = [mark for event in sent for mark in event.get("marks", [])]
    assert marks and not [mark for mark in marks if mark["estimated"]]
    for unit in text_units(MIXED):
        if other_script(MIXED[unit.start:unit.end]):
            covering = [m for m in marks
                        if m["char_start"] <= unit.start and unit.end <= m["char_end"]]
            assert len(covering) == 1, MIXED[unit.start:unit.end]
    # Marks run forward on the reply timeline (a chunk's last mark may end 1 ms after the
    # next chunk starts: ends round up, a chunk's start on the timeline rounds down), and the
    # audio reaches past the last of them.
    overlaps = [(a["text"], a["end_ms"], b["text"], b["start_ms"])
                for a, b in itertools.pairwise(marks) if a["end_ms"] > b["start_ms"] + 1]
    assert not overlaps
    assert sent[-1]["audio_end_ms"] >= marks[-1]["end_ms"]
    assert item["content"][0]["transcript"] == MIXED
