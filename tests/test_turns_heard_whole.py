"""Issue 24 over the protocol, on a real server (server VAD, the in-process tiny.en): a turn's
transcript keeps its first word (failing input 2: "Wait, stop, I have a question." was
transcribed "Stop, I have a question."), in Piper and three espeak-ng voices over a -60 dBFS
pink floor; and a turn longer than the input buffer never makes the session deaf (failing
input 3: after babble held a turn for 600 s, every append got `input_audio_buffer_full`).

`tests/test_first_word.py` checks the turn's start on 24 utterances with the server's VAD
classes; `tests/test_rooms.py` the room gate and `max_turn_ms` on the protocol."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests import room_sounds as rs
from tests import speech_fixtures as fx
from tests.echo_room import words
from tests.realtime_client import RealtimeClient
from tests.test_rooms import FLOOR_DBFS, PERSON_DBFS, mic_pcm16, stream
from tests.test_server_vad import SERVER_VAD, receive_while

TRANSCRIPT_WAIT_S = 60.0
"""Longest wait for a turn's transcript (s; a loaded CI machine)."""


async def spoken(server: object, mic_16k: np.ndarray, turns: int) -> RealtimeClient:
    """Stream `mic_16k` in real time to a server VAD session on `server` and wait for `turns`
    transcripts; return the client with every event it received."""
    async with RealtimeClient.connect(server.ws_url) as client:
        await client.send({"type": "session.update",
                           "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
        await client.wait_for("session.updated")
        await receive_while(client, asyncio.create_task(stream(client, mic_pcm16(mic_16k))))
        async with asyncio.timeout(TRANSCRIPT_WAIT_S):
            while len(client.of_type(
                    "conversation.item.input_audio_transcription.completed")) < turns:
                await client.drain(0.2)
        await client.drain(0.5)
    return client


@pytest.mark.parametrize(("text", "engine", "voice"), [
    ("Wait, stop, I have a question.", "piper", None),
    ("Wait, one more thing.", "espeak", "en-gb-x-rp"),
    ("Hold on, what time is it?", "espeak", "en-029"),
    ("Sorry, say that again.", "espeak", "en-us+f3")])
async def test_the_turn_s_transcript_keeps_its_first_word(start_server, text: str, engine: str,
                                                         voice: str | None) -> None:
    """An utterance that opens with a short word and a pause, at -6 dBFS peak 1 s into a
    -60 dBFS pink floor: one turn, and its transcript opens with that word."""
    server = await start_server(tts="uniform", calibration="marks")
    said = fx.at_peak_dbfs(fx.speech(text, engine, voice), -6.0)
    mic = fx.with_noise_floor(fx.place(said, 1000, 2500), np.random.default_rng(3), -60.0)
    client = await spoken(server, mic, 1)
    [transcript] = client.of_type("conversation.item.input_audio_transcription.completed")
    assert words(transcript["transcript"])[:1] == words(text)[:1], transcript["transcript"]
    assert len(client.of_type("input_audio_buffer.speech_started")) == 1


LONG_TURN = ("I would like to know whether the museum on the other side of the river is open "
             "on Sunday mornings and how much the tickets cost for two adults and a child.")
"""A question of about 8 s with no pause long enough to end the turn (Piper)."""


async def test_a_turn_longer_than_the_input_buffer_never_makes_the_session_deaf(
        start_server) -> None:
    """A 3 s input buffer: the person's 8 s question holds a turn past the buffer's size;
    appends drop its oldest audio instead of failing (`input_audio_buffer_full` made the
    session deaf), the turn commits its newest audio and is transcribed; the next question
    (3 s later) is the next turn, transcribed. Piper at -20 dBFS RMS over a -70 dBFS RMS
    pink floor; no error event at all."""
    server = await start_server(tts="uniform", calibration="marks", max_input_audio_s=3)
    long_turn, question = (rs.at_rms_dbfs(fx.speech(text), PERSON_DBFS)
                           for text in (LONG_TURN, "What time is it in Paris?"))
    assert long_turn.size > 6 * fx.RATE_HZ
    sounds = np.concatenate((fx.silence(1000), long_turn, fx.silence(3000), question,
                             fx.silence(3000)))
    floor_ms = sounds.size * 1000 // fx.RATE_HZ + 1
    floor = rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(7), floor_ms), FLOOR_DBFS)
    client = await spoken(server, (sounds + floor[:sounds.size]).astype(np.float32), 2)
    assert not client.of_type("error"), client.of_type("error")
    first, second = (e["transcript"].lower() for e in client.of_type(
        "conversation.item.input_audio_transcription.completed"))
    assert "child" in first and "museum" not in first, first
    assert "paris" in second, second
    assert len(client.of_type("input_audio_buffer.committed")) == 2
