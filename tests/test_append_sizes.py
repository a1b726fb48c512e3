"""Turns and transcripts do not depend on how a client slices its microphone audio."""

from __future__ import annotations

import base64

import pytest

from tests import speech_fixtures
from tests.realtime_client import RealtimeClient
from tests.test_server_vad import SERVER_VAD, mic_pcm16

SERVER_VAD_NO_RESPONSE = {**SERVER_VAD, "create_response": False}


async def turns_for(server, pcm16: bytes, append_bytes: int,
                    then_silence_ms: int = 0) -> list[tuple[str, int, int]]:
    """Append `pcm16` in pieces of `append_bytes` (as fast as the socket takes them), then
    `then_silence_ms` of silence in 40 ms pieces (a microphone still running); return each
    committed turn as (transcript, speech start ms, speech stop ms)."""
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update", "session": {"audio": {"input": {
            "turn_detection": SERVER_VAD_NO_RESPONSE}}}})
        await client.wait_for("session.updated")
        for start in range(0, len(pcm16), append_bytes):
            await client.send({"type": "input_audio_buffer.append",
                               "audio": base64.b64encode(pcm16[start:start + append_bytes])
                               .decode()})
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
    [(transcript, _, _)] = await turns_for(server, pcm16, len(pcm16), then_silence_ms=1000)
    assert "turn on the lights" in transcript.lower().replace(",", "")


async def test_every_append_size_gives_the_same_turn(start_server) -> None:
    """The same audio in 20 ms, 40 ms, 2 s pieces and in one append (and an odd even size):
    the same speech start, stop and transcript."""
    server = await start_server(tts="uniform", calibration="off")
    utterance = speech_fixtures.speech("Please open the window")
    pcm16 = mic_pcm16(speech_fixtures.place(utterance, lead_ms=700, tail_ms=1500))
    bytes_per_ms = 48
    sizes = [20 * bytes_per_ms, 40 * bytes_per_ms, 2000 * bytes_per_ms, 1234, len(pcm16)]
    results = [await turns_for(server, pcm16, size) for size in sizes]
    assert all(result == results[0] for result in results), results
    assert "open the window" in results[0][0][0].lower()
