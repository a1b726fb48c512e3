"""`semantic_vad` (OpenAI's GA turn detection judged by meaning), `idle_timeout_ms`, and turns
that arrive together: on real Piper / espeak-ng speech, over a real server on loopback.

Issue 24's examples: "I want to book a table for… (700 ms pause) two people tonight" was
answered after its first half (the answer cut 280 ms later by the rest), and two turns in one
append were both transcribed but only the first answered.
"""

from __future__ import annotations

import asyncio
import base64
import re

import numpy as np
import pytest

from server.listening import smart_turn
from server.listening.semantic_vad import TurnEndJudge, TurnEndVerdict, transcript_unfinished
from server.listening.server_vad_settings import TurnDetection
from server.listening.silero_vad import WINDOW_MS
from server.listening.turn_events import SpeechPaused, SpeechStopped
from server.listening.vad import TurnDetectionConfig, TurnDetector
from server.realtime.session import Session
from tests import speech_fixtures
from tests.realtime_client import RealtimeClient
from tests.test_server_vad import SERVER_VAD, mic_pcm16, receive_while, stream_mic

SEMANTIC_VAD = {"type": "semantic_vad", "eagerness": "auto", "create_response": True,
                "interrupt_response": True}
MID_PAUSE_MS = 700
"""The pause inside the sentence (issue 24, failing input 5)."""

VOICES = [("piper", None), ("espeak", "en-us"), ("espeak", "en-gb-x-rp")]
TURN_WAIT_S = 60.0
"""Longest wait for a transcript or a reply (s): the machine may be loaded."""


def paused_sentence(first: str, rest: str, engine: str, voice: str | None,
                    pause_ms: float = MID_PAUSE_MS) -> np.ndarray:
    """`first`, `pause_ms` of silence, `rest`: 16 kHz speech with a pause inside a phrase."""
    return np.concatenate([speech_fixtures.speech(first, engine, voice),
                           speech_fixtures.silence(pause_ms),
                           speech_fixtures.speech(rest, engine, voice)])


# ------------------------------------------------------------------ sans-I/O parts


@pytest.mark.parametrize("text", [
    "I want to book a table for", "I want to book a table for...", "What is the capital of",
    "Could you remind me about the", "I'll take the soup and", "So, um,", "Tell me about a",
    "I was wondering if", "Let me think, uh", "Can I have the?", "I want to book a table for.",
    "What is the capital of?", "What's the best part of?", "How do I get to the top of?",
])
def test_a_transcript_ending_on_a_word_that_announces_more_is_unfinished(text: str) -> None:
    assert transcript_unfinished(text)


@pytest.mark.parametrize("text", [
    "I want to book a table for two people tonight.", "What is the capital of France?",
    "Turn it off.", "Where are you from?", "What is it for?", "", "Okay.",
    "What is it made of?", "What are you afraid of?", "What is this made of?",
    "What do you think of?", "What is the capital of France?",
])
def test_a_transcript_ending_on_a_complete_phrase_is_not_unfinished(text: str) -> None:
    assert not transcript_unfinished(text)


def test_the_judge_needs_both_verdicts_on_the_same_pause_in_any_order() -> None:
    judge = TurnEndJudge()
    assert judge.probability("item_1", 1200, 0.9) is None
    assert judge.transcript("item_1", None, "Set a timer for ten minutes.") == TurnEndVerdict(
        1200, sounds_finished=True)
    assert judge.transcript("item_1", 2000, "Set a timer for") is None
    assert judge.probability("item_1", 2000, 0.95) is None
    assert judge.transcript("item_1", 3000, "Set a timer for ten minutes.") is None
    assert judge.probability("item_1", 3000, 0.3) == TurnEndVerdict(3000, sounds_finished=False)
    assert judge.transcript("item_1", 4000, "Done.") is None
    judge.resumed()
    assert judge.transcript("item_1", None, "Set a timer for ten minutes.") is None
    assert judge.probability("item_1", 4000, 0.9) is None


@pytest.mark.parametrize(("eagerness", "finished_ms", "unsure_ms"), [
    ("low", 2000, 4000), ("medium", 1000, 2000), ("high", 500, 1000), ("auto", 1000, 2000)])
def test_the_wait_after_words_that_look_finished_follows_the_eagerness(
        eagerness: str, finished_ms: int, unsure_ms: int) -> None:
    detection = TurnDetection(type="semantic_vad", eagerness=eagerness)
    assert detection.end_wait_ms(sounds_finished=True) == finished_ms
    assert detection.end_wait_ms(sounds_finished=False) == unsure_ms
    assert TurnDetection(silence_duration_ms=700).end_wait_ms(sounds_finished=False) == 700


def test_end_turn_stops_a_turn_still_silent_after_that_speech_at_the_shortest_wait() -> None:
    detector = TurnDetector(TurnDetectionConfig(silence_duration_ms=4000, pause_ms=300))
    events = [detector.process(i * WINDOW_MS, 0.9 if i <= 20 else 0.01) for i in range(1, 32)]
    pause = next(e for e in events if isinstance(e, SpeechPaused))
    assert detector.end_turn(pause.audio_end_ms - WINDOW_MS, 1000) is None
    assert detector.end_turn(pause.audio_end_ms, 1000) is None
    silent = [(i * WINDOW_MS, detector.process(i * WINDOW_MS, 0.01)) for i in range(32, 60)]
    stops = [(end_ms, e) for end_ms, e in silent if e is not None]
    assert stops == [(52 * WINDOW_MS, SpeechStopped(pause.audio_end_ms))]
    assert 52 * WINDOW_MS - pause.audio_end_ms >= 1000 > 51 * WINDOW_MS - pause.audio_end_ms
    assert detector.end_turn(pause.audio_end_ms, 1000) is None


def test_end_turn_stops_at_once_after_the_shortest_wait_and_never_after_speech() -> None:
    detector = TurnDetector(TurnDetectionConfig(silence_duration_ms=4000, pause_ms=300))
    for i in range(1, 60):
        detector.process(i * WINDOW_MS, 0.9 if i <= 20 else 0.01)
    assert detector.end_turn(20 * WINDOW_MS, 1000) == SpeechStopped(20 * WINDOW_MS)
    for i in range(60, 90):
        detector.process(i * WINDOW_MS, 0.9 if i <= 70 else 0.01)
    assert detector.end_turn(70 * WINDOW_MS, 3000) is None
    detector.process(90 * WINDOW_MS, 0.9)
    later = [detector.process(i * WINDOW_MS, 0.01) for i in range(91, 250)]
    assert [e for e in later if isinstance(e, SpeechStopped)] == [
        SpeechStopped(90 * WINDOW_MS)]
    assert later.index(SpeechStopped(90 * WINDOW_MS)) + 91 == 90 + -(-4000 // WINDOW_MS)


def session_with(turn_detection: object) -> Session:
    session = Session()
    session.open()
    session.receive(f'{{"type": "session.update", "session": {{"audio": {{"input": '
                    f'{{"turn_detection": {turn_detection}}}}}}}}}')
    return session


@pytest.mark.parametrize(("eagerness", "wait_ms"), [
    ("low", 8000), ("medium", 4000), ("high", 2000), ("auto", 4000)])
def test_semantic_vad_is_accepted_with_each_eagerness(eagerness: str, wait_ms: int) -> None:
    session = session_with(f'{{"type": "semantic_vad", "eagerness": "{eagerness}"}}')
    updated = session.take_events()[-1]
    assert updated["type"] == "session.updated"
    assert updated["session"]["audio"]["input"]["turn_detection"] == {
        "type": "semantic_vad", "eagerness": eagerness, "create_response": True,
        "interrupt_response": True}
    assert session.turn_detection == TurnDetection(type="semantic_vad", eagerness=eagerness)
    assert session.turn_detection.end_silence_ms == wait_ms


@pytest.mark.parametrize(("setting", "param"), [
    ('{"type": "semantic_vad", "eagerness": "eager"}', "eagerness"),
    ('{"type": "semantic_vad", "silence_duration_ms": 500}', "silence_duration_ms"),
    ('{"type": "semantic_vad", "create_response": 1}', "create_response"),
    ('{"type": "server_vad", "eagerness": "low"}', "eagerness"),
    ('{"type": "server_vad", "idle_timeout_ms": 4999}', "idle_timeout_ms"),
    ('{"type": "server_vad", "idle_timeout_ms": 30001}', "idle_timeout_ms"),
    ('{"type": "server_vad", "idle_timeout_ms": true}', "idle_timeout_ms"),
    ('{"type": "vad"}', None),
])
def test_bad_turn_detection_is_refused_and_changes_nothing(setting: str,
                                                           param: str | None) -> None:
    before = Session().turn_detection
    session = session_with(setting)
    error = session.take_events()[-1]
    assert error["type"] == "error"
    expected = "session.audio.input.turn_detection"
    assert error["error"]["param"] == (f"{expected}.{param}" if param else expected)
    assert session.turn_detection == before


def test_server_vad_keeps_its_fields_and_takes_idle_timeout_ms() -> None:
    session = session_with('{"type": "server_vad", "idle_timeout_ms": 6000}')
    wire = session.take_events()[-1]["session"]["audio"]["input"]["turn_detection"]
    assert wire == {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
                    "silence_duration_ms": 500, "idle_timeout_ms": 6000,
                    "create_response": True, "interrupt_response": True}


def test_smart_turn_runs_from_the_wheel_on_real_speech() -> None:
    assert smart_turn.model_path().name == "smart-turn-v3.2-cpu.onnx"
    whole = speech_fixtures.speech("What is the capital of France?")
    probability = smart_turn.end_of_turn_probability(
        np.concatenate([whole, speech_fixtures.silence(300)]))
    assert 0.5 < probability <= 1.0
    long = np.tile(whole, 6)
    assert smart_turn.end_of_turn_probability(long) == pytest.approx(
        smart_turn.end_of_turn_probability(long[-smart_turn.WINDOW_SAMPLES:]))


# ------------------------------------------------------------------ over the protocol


async def spoken_turns(server: object, turn_detection: dict[str, object],
                       mic: bytes) -> RealtimeClient:
    """Connect, set `turn_detection`, stream `mic` (PCM16 at 24 kHz) in real time, then read
    events until every committed turn has its transcript (or was deleted: no words) and a
    reply was created (at most `TURN_WAIT_S`: the machine may be loaded), and 1 s more;
    returns the client with what it got."""
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": turn_detection}}}})
        await client.wait_for("session.updated")
        await receive_while(client, asyncio.create_task(stream_mic(client, mic)))
        async with asyncio.timeout(TURN_WAIT_S):
            while True:
                await client.drain(0.2)
                committed = client.of_type("input_audio_buffer.committed")
                settled = client.of_type(
                    "conversation.item.input_audio_transcription.completed") + client.of_type(
                    "conversation.item.deleted")
                if committed and len(settled) >= len(committed) and client.of_type(
                        "response.created"):
                    break
        await client.drain(1.0)
        return client


@pytest.mark.parametrize(("engine", "voice"), VOICES)
async def test_a_pause_inside_a_sentence_keeps_it_one_turn_answered_once(
        start_server, engine: str, voice: str | None) -> None:
    """Issue 24, input 5: the sentence is one user turn with every word, answered once, and
    no reply is cut."""
    server = await start_server(tts="uniform", calibration="marks")
    utterance = paused_sentence("I want to book a table for", "two people tonight.",
                                engine, voice)
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=800, tail_ms=5000))
    client = await spoken_turns(server, SEMANTIC_VAD, mic)
    transcripts = [e["transcript"].lower() for e in client.of_type(
        "conversation.item.input_audio_transcription.completed")]
    assert len(transcripts) == 1, transcripts
    assert re.search(r"table for .*\b(two|2) people", transcripts[0]), transcripts
    assert len(client.of_type("response.created")) == 1
    assert not client.of_type("output_audio_buffer.cleared")
    assert all(e["response"]["status"] == "completed" for e in client.of_type("response.done"))


async def test_a_finished_sentence_ends_its_turn_before_the_longest_wait(start_server) -> None:
    """The microphone's silence after the sentence (2.5 s) is shorter than medium's longest
    wait (4 s): only the end-of-turn verdict can stop the turn."""
    server = await start_server(tts="uniform", calibration="marks")
    utterance = speech_fixtures.speech("What is the capital of France?")
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=800, tail_ms=2500))
    client = await spoken_turns(server, SEMANTIC_VAD, mic)
    stopped = client.of_type("input_audio_buffer.speech_stopped")
    assert len(stopped) == 1
    transcript = client.of_type("conversation.item.input_audio_transcription.completed")
    assert "france" in transcript[0]["transcript"].lower()
    assert client.of_type("response.created")


TWO_TURNS = ("What time is it in Paris?", "And how is the weather there?")


def two_turns_mic(gap_ms: float, engine: str = "piper", voice: str | None = None) -> bytes:
    """TWO_TURNS `gap_ms` apart, 800 ms of silence before and 5 s after, as PCM16 at 24 kHz."""
    first, second = (speech_fixtures.speech(text, engine, voice) for text in TWO_TURNS)
    return mic_pcm16(np.concatenate([speech_fixtures.place(first, 800, gap_ms),
                                     speech_fixtures.place(second, 0, 5000)]))


async def answered_turns(server: object, client: RealtimeClient, turns: int) -> list[str]:
    """Wait for `turns` transcripts and a reply that started after the last of them played
    its first audio; return the user turns of the latest prompt (the reply that goes on)."""
    for _ in range(turns):
        await client.wait_for("conversation.item.input_audio_transcription.completed",
                              timeout=TURN_WAIT_S)
    async with asyncio.timeout(TURN_WAIT_S):
        while True:
            await client.drain(0.1)
            created = client.of_type("response.created")
            last = created[-1]["response"]["id"] if created else None
            if last and client.of_type("response.output_audio.delta", response_id=last) and (
                    len(server.responder.prompts) == len(created)):
                break
    assert not client.of_type("output_audio_buffer.cleared", response_id=last)
    return [t.text.lower() for t in server.responder.prompts[-1].turns if t.role == "user"]


async def append_at_once(client: RealtimeClient, turn_detection: dict[str, object],
                         mic: bytes) -> None:
    """Set `turn_detection` and append `mic` (PCM16 at 24 kHz) in one event."""
    await client.send({"type": "session.update",
                       "session": {"audio": {"input": {"turn_detection": turn_detection}}}})
    await client.wait_for("session.updated")
    await client.send({"type": "input_audio_buffer.append",
                       "audio": base64.b64encode(mic).decode()})


@pytest.mark.parametrize(("engine", "voice"), VOICES[:2])
async def test_two_turns_in_one_append_are_both_answered_under_server_vad(
        start_server, engine: str, voice: str | None) -> None:
    """Issue 24, input 6: both turns transcribed, and the reply that goes on answers both."""
    server = await start_server(tts="uniform", calibration="marks")
    async with RealtimeClient.connect(server.ws_url) as client:
        await append_at_once(client, SERVER_VAD, two_turns_mic(1500, engine, voice))
        answered = await answered_turns(server, client, 2)
    transcripts = [e["transcript"].lower() for e in client.of_type(
        "conversation.item.input_audio_transcription.completed")]
    assert len(transcripts) == 2, transcripts
    assert "paris" in transcripts[0] and "weather" in transcripts[1]
    assert answered == transcripts


@pytest.mark.parametrize("turn_detection", [SERVER_VAD, SEMANTIC_VAD])
async def test_a_turn_ending_after_the_reply_to_the_one_before_started_is_answered(
        start_server, turn_detection: dict[str, object]) -> None:
    """The second turn's speech is in the append, its end (the silence) comes after the reply
    to the first turn was created with a prompt without it: that reply gives way to one that
    answers both (before: the second turn was transcribed and never answered)."""
    server = await start_server(tts="uniform", calibration="marks")
    first, second = (speech_fixtures.speech(text) for text in TWO_TURNS)
    gap_ms = 1500 if turn_detection is SERVER_VAD else 5000
    speech = mic_pcm16(np.concatenate([speech_fixtures.place(first, 800, gap_ms), second]))
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": turn_detection}}}})
        await client.wait_for("session.updated")
        await client.send({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(speech).decode()})
        first_reply = await client.wait_for("response.created", timeout=TURN_WAIT_S)
        while not server.responder.prompts:
            await client.drain(0.05)
        await client.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(
            mic_pcm16(speech_fixtures.silence(5000))).decode()})
        answered = await answered_turns(server, client, 2)
    transcripts = [e["transcript"].lower() for e in client.of_type(
        "conversation.item.input_audio_transcription.completed")]
    assert len(transcripts) == 2, transcripts
    assert client.of_type("output_audio_buffer.cleared",
                          response_id=first_reply["response"]["id"])
    assert answered == transcripts


async def test_two_turns_in_one_append_are_both_answered_under_semantic_vad(
        start_server) -> None:
    """Within the longest wait the two are one turn (nothing ended it in one append before
    the second began); further apart, two; either way the reply answers both."""
    for gap_ms, turns in ((1500, 1), (5000, 2)):
        server = await start_server(tts="uniform", calibration="marks")
        async with RealtimeClient.connect(server.ws_url) as client:
            await append_at_once(client, SEMANTIC_VAD, two_turns_mic(gap_ms))
            answered = " ".join(await answered_turns(server, client, turns))
        assert "paris" in answered and "weather" in answered, (gap_ms, answered)
        assert len(client.of_type("conversation.item.input_audio_transcription.completed")) == (
            turns)


async def test_idle_timeout_ms_prompts_a_reply_after_the_last_one_played_out(
        start_server) -> None:
    """server_vad's `idle_timeout_ms` (OpenAI): no speech for that long after the reply's
    audio has played out -> `input_audio_buffer.timeout_triggered`, the silence committed as
    an input_audio item, and a response; a session without it waits on."""
    server = await start_server(tts="uniform", calibration="marks")
    idle_vad = {**SERVER_VAD, "idle_timeout_ms": 5000}
    for detection, expected in ((idle_vad, True), (SERVER_VAD, False)):
        async with RealtimeClient.connect(server.ws_url) as client:
            await client.send({"type": "session.update",
                               "session": {"audio": {"input": {"turn_detection": detection}}}})
            await client.wait_for("session.updated")
            await client.prompt("say: Hello there.")
            await client.wait_for("response.output_audio.delta")
            first_audio = asyncio.get_running_loop().time()
            done = await client.wait_for("response.done")
            played_ms = max(e["audio_end_ms"] for e in client.of_type(
                "response.output_audio.delta"))
            if not expected:
                await client.drain(7.0)
                assert not client.of_type("input_audio_buffer.timeout_triggered")
                continue
            triggered = await client.wait_for("input_audio_buffer.timeout_triggered",
                                              timeout=15)
            elapsed_ms = (asyncio.get_running_loop().time() - first_audio) * 1000
            assert elapsed_ms >= played_ms + 5000 - 100
            committed = await client.wait_for("input_audio_buffer.committed")
            assert committed["item_id"] == triggered["item_id"]
            created = await client.wait_for("response.created")
            assert created["response"]["id"] != done["response"]["id"]
            idle_reply = created["response"]["id"]
            await client.wait_for("response.output_audio.delta",
                                  lambda e, reply=idle_reply: e["response_id"] == reply)
            turns = server.responder.prompts[-1].turns
            assert [t.role for t in turns] == ["user", "assistant", "user"]


@pytest.mark.parametrize("pause_ms", [1500, 2500])
async def test_a_longer_pause_after_an_unfinished_phrase_keeps_it_one_turn(
        start_server, pause_ms: int) -> None:
    """Other members of the kind: the words before the pause end on a preposition, so the
    turn waits up to medium's longest silence (4 s), not the shortest."""
    server = await start_server(tts="uniform", calibration="marks")
    utterance = paused_sentence("Could you remind me about the", "meeting tomorrow?",
                                "piper", None, pause_ms)
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=800, tail_ms=5000))
    client = await spoken_turns(server, SEMANTIC_VAD, mic)
    transcripts = [e["transcript"].lower() for e in client.of_type(
        "conversation.item.input_audio_transcription.completed")]
    assert len(transcripts) == 1, transcripts
    assert "remind" in transcripts[0] and "meeting" in transcripts[0]
    assert len(client.of_type("input_audio_buffer.speech_stopped")) == 1


async def test_a_question_cut_off_after_of_keeps_it_one_turn(start_server) -> None:
    """A tester's Piper "What is the capital of" (1.2 s) "Australia?": whisper writes the first
    part "What is the capital of?", and the "?" made the stranded preposition look finished:
    two turns, two answers (3 of 3). "of" after a noun phrase waits (`NOUN_DETERMINERS`)."""
    server = await start_server(tts="uniform", calibration="marks")
    utterance = paused_sentence("What is the capital of", "Australia?", "piper", None, 1200)
    mic = mic_pcm16(speech_fixtures.place(utterance, lead_ms=800, tail_ms=5000))
    client = await spoken_turns(server, SEMANTIC_VAD, mic)
    transcripts = [e["transcript"].lower() for e in client.of_type(
        "conversation.item.input_audio_transcription.completed")]
    assert len(transcripts) == 1, transcripts
    assert "capital of" in transcripts[0] and "australia" in transcripts[0], transcripts
    assert len(client.of_type("response.created")) == 1
