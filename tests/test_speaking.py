"""Speaking a reply's segments (`server.speaking.Speaker`), on a real server on loopback with the
uniform test voice (400 ms per word, exact), slowed where a test needs synthesis to take time:

- every segment's audio reaches the client whole, at the session's rate: the reply's audio is
  exactly its words' length, however many segments it comes in;
- a cancelled reply gives the voice back as soon as its worker thread returns (the stop signal
  ends the piece), and another session's reply gets it;
- a continuation piece that holds the voice before its first chunk gives it up to another
  reply's first piece, and is synthesized again afterwards: nothing of it lost or doubled.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from server.connection import Connection
from tests.realtime_client import RealtimeClient
from tests.test_faults import play_fully, until

WORD_MS = 400
RATE_HZ = 24000
SENTENCES = 8
LONG_REPLY = "say: " + " ".join("One two three." for _ in range(SENTENCES))
"""8 segments of 3 words: 9.6 s of audio."""
TALKER_SENTENCES = 4
TALKER_REPLY = "say: " + " ".join("One two three." for _ in range(TALKER_SENTENCES))


def pcm16_bytes(words: int) -> int:
    """Bytes of PCM16 at `RATE_HZ` that `words` words of the uniform voice take."""
    return words * WORD_MS * RATE_HZ // 1000 * 2


async def test_every_segments_audio_arrives_whole_at_the_sessions_rate(
    start_server: Any,
) -> None:
    server = await start_server(tts="uniform")
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt(LONG_REPLY)
        done = await play_fully(client, response_id)
    assert done["response"]["status"] == "completed"
    assert len(client.audio_bytes(response_id)) == pcm16_bytes(SENTENCES * 3)


async def test_a_cancelled_reply_gives_the_voice_back_to_the_next(start_server: Any) -> None:
    server = await start_server(tts="uniform", tts_delay_s=1.0)  # slower than real time
    voice = server.demo.services.tts_turn
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt(LONG_REPLY)
        await client.wait_audio_until(response_id, 400, timeout=30)
        await until(voice.locked, 5, "the reply synthesizes its next segment")
        await client.send({"type": "response.cancel"})
        await client.wait_for("response.done")
        await until(lambda: not voice.locked(), 5, "the voice is free")
    async with RealtimeClient.connect(server.ws_url) as other:
        other_id, _ = await other.prompt("say: My turn now.")
        done = await play_fully(other, other_id)
    assert done["response"]["status"] == "completed"
    assert len(other.audio_bytes(other_id)) == pcm16_bytes(3)


async def test_a_continuation_gives_the_voice_to_a_first_piece_and_is_redone_whole(
    start_server: Any, served_connections: list[Connection],
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr("server.speaking.PREEMPTIBLE_AHEAD_MS", 0)  # every continuation
    caplog.set_level(logging.DEBUG, logger="server.speaking")
    # 1 s before each piece's chunk, about real time: the talker's continuation pieces hold
    # the voice, before their chunk, nearly all the time and never wait for room
    server = await start_server(tts="uniform", tts_delay_s=1.0)
    async with RealtimeClient.connect(server.ws_url) as talker:
        talker_id, _ = await talker.prompt(TALKER_REPLY)
        await talker.wait_audio_until(talker_id, 400, timeout=30)
        voice = server.demo.services.tts_turn
        await until(voice.locked, 5, "a continuation piece holds the voice")
        async with RealtimeClient.connect(server.ws_url) as other:
            other_id, _ = await other.prompt("say: My turn now.")
            other_done, talker_done = await asyncio.gather(play_fully(other, other_id),
                                                           play_fully(talker, talker_id))
    assert other_done["response"]["status"] == "completed"
    assert talker_done["response"]["status"] == "completed"
    assert "a continuation piece gave the voice to a first piece" in caplog.text
    assert len(talker.audio_bytes(talker_id)) == pcm16_bytes(TALKER_SENTENCES * 3)
    assert len(other.audio_bytes(other_id)) == pcm16_bytes(3)
    assert len(served_connections) == 2
