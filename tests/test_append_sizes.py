"""Turns and transcripts do not depend on how a client slices its microphone audio."""

from __future__ import annotations

import base64
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import speech_fixtures
from tests.realtime_client import RealtimeClient
from tests.test_server_vad import SERVER_VAD, mic_pcm16

SERVER_VAD_NO_RESPONSE = {**SERVER_VAD, "create_response": False}


def pieces_of(pcm16: bytes, append_bytes: int) -> list[bytes]:
    """`pcm16` cut into appends of `append_bytes` (the last one shorter)."""
    return [pcm16[start:start + append_bytes] for start in range(0, len(pcm16), append_bytes)]


async def turns_for(server, pieces: list[bytes],
                    then_silence_ms: int = 0) -> list[tuple[str, int, int]]:
    """Append `pieces` one `input_audio_buffer.append` each (as fast as the socket takes them),
    then `then_silence_ms` of silence in 40 ms pieces (a microphone still running); return each
    committed turn as (transcript, speech start ms, speech stop ms)."""
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update", "session": {"audio": {"input": {
            "turn_detection": SERVER_VAD_NO_RESPONSE}}}})
        await client.wait_for("session.updated")
        for piece in pieces:
            await client.send({"type": "input_audio_buffer.append",
                               "audio": base64.b64encode(piece).decode()})
        silence = mic_pcm16(speech_fixtures.silence(40.0))
        for _ in range(then_silence_ms // 40):
            await client.send({"type": "input_audio_buffer.append",
                               "audio": base64.b64encode(silence).decode()})
        started = await client.wait_for("input_audio_buffer.speech_started", timeout=30)
        stopped = await client.wait_for("input_audio_buffer.speech_stopped", timeout=30)
        done = await client.wait_for(
            "conversation.item.input_audio_transcription.completed", timeout=30)
        await client.drain(0.3)
        assert len(client.of_type("input_audio_buffer.speech_started")) == 1
        return [(done["transcript"], started["audio_start_ms"], stopped["audio_end_ms"])]


@pytest.mark.parametrize("silence_ms", [400, 800, 1500])
async def test_one_large_append_keeps_the_whole_utterance(start_server, silence_ms) -> None:
    """The issue's input: one append holding "Turn on the lights" and 400 / 800 / 1500 ms of
    silence gave "on the lights." / "white." / no turn (the buffer was trimmed to its last
    1.3 s before the VAD saw the append). The microphone goes on with silence after it."""
    server = await start_server(tts="uniform", calibration="off")
    utterance = speech_fixtures.speech("Turn on the lights")
    pcm16 = mic_pcm16(speech_fixtures.place(utterance, lead_ms=0, tail_ms=silence_ms))
    [(transcript, _, _)] = await turns_for(server, [pcm16], then_silence_ms=1000)
    assert "turn on the lights" in transcript.lower().replace(",", "")


async def test_every_append_size_gives_the_same_turn(start_server) -> None:
    """The same audio in 20 ms, 40 ms, 2 s pieces and in one append (and an odd even size):
    the same speech start, stop and transcript."""
    server = await start_server(tts="uniform", calibration="off")
    utterance = speech_fixtures.speech("Please open the window")
    pcm16 = mic_pcm16(speech_fixtures.place(utterance, lead_ms=700, tail_ms=1500))
    bytes_per_ms = 48
    sizes = [20 * bytes_per_ms, 40 * bytes_per_ms, 2000 * bytes_per_ms, 1234, len(pcm16)]
    results = [await turns_for(server, pieces_of(pcm16, size)) for size in sizes]
    assert all(result == results[0] for result in results), results
    assert "open the window" in results[0][0][0].lower()


@pytest.fixture
async def window_turns(start_server) -> tuple[object, bytes, list[tuple[str, int, int]]]:
    """A server (uniform voice, no calibration), the utterance of
    `test_every_append_size_gives_the_same_turn` (PCM16 at the input rate) and the turn the
    server finds in it sent in 20 ms appends: the reference for any other slicing."""
    server = await start_server(tts="uniform", calibration="off")
    utterance = speech_fixtures.speech("Please open the window")
    pcm16 = mic_pcm16(speech_fixtures.place(utterance, lead_ms=700, tail_ms=1500))
    return server, pcm16, await turns_for(server, pieces_of(pcm16, 20 * 48))


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cuts=st.lists(st.floats(0.0, 1.0, exclude_min=True, exclude_max=True), max_size=60))
async def test_any_slicing_gives_the_turn_of_20_ms_appends(window_turns, cuts: list[float]) -> None:
    """Appends cut anywhere on a sample boundary (`cuts`: fractions of the audio; any even byte
    sizes, from 2 bytes to the whole 3.8 s, one session per slicing): the same speech start,
    stop and transcript as 20 ms appends. Deterministic in CI (the "ci" profile,
    tests/conftest.py)."""
    server, pcm16, expected = window_turns
    samples = len(pcm16) // 2
    edges = sorted({0, len(pcm16), *(2 * int(cut * samples) for cut in cuts)})
    pieces = [pcm16[start:end] for start, end in itertools.pairwise(edges)]
    assert await turns_for(server, pieces) == expected
