"""G.711 (`audio/pcmu`, `audio/pcma`) input and output are converted, not refused (issue 25).

The codec against the standard's fixed points and its own inverse; then a whole spoken turn
over a real server on loopback: Piper's voice asking a question, sent as 8 kHz mu-law at real
time, is transcribed by faster-whisper and answered, and the reply comes back as 8 kHz A-law
whose length matches its `audio_end_ms` and in which faster-whisper reads the reply's words.
"""

from __future__ import annotations

import asyncio
import base64
import re

import numpy as np

from calibration.local_asr import LocalWhisperTranscriber
from server.listening.pcm16 import pcm16_to_float
from server.realtime import audio_formats, g711
from server.speech.resampling import resample
from tests import speech_fixtures
from tests.realtime_client import RealtimeClient
from tests.test_server_vad import receive_while

ALL_SAMPLES = np.arange(-32768, 32768, dtype="<i2").tobytes()


def test_the_laws_fixed_points() -> None:
    """Silence, full scale and the sign, as G.711 transmits them (bits inverted)."""
    pcm = np.array([0, 32767, -32768, 1000, -1000], dtype="<i2").tobytes()
    assert list(g711.encode(pcm, "audio/pcmu")) == [0xFF, 0x80, 0x00, 0xCE, 0x4E]
    assert list(g711.encode(pcm, "audio/pcma")) == [0xD5, 0xAA, 0x2A, 0xFA, 0x7A]


def test_every_code_decodes_to_a_value_that_encodes_back_to_it() -> None:
    """encode(decode(c)) == c for all 256 codes (mu-law's negative zero 0x7F comes back as
    +0, 0xFF), and decoding is monotonic within each sign."""
    for law in g711.LAWS:
        codes = bytes(range(256))
        back = g711.encode(g711.decode(codes, law), law)
        expected = bytes(0xFF if (law, c) == ("audio/pcmu", 0x7F) else c for c in codes)
        assert back == expected, law


def test_quantization_error_stays_within_the_segment_step() -> None:
    """Every 16-bit sample comes back within half a step of its segment (mu-law 14-bit
    steps of up to 256 (8 << 5), A-law 13-bit of up to 1024 (16 << 6) of the 16-bit
    scale), and small samples come back nearly exact."""
    samples = np.frombuffer(ALL_SAMPLES, dtype="<i2").astype(np.int64)
    for law, worst in (("audio/pcmu", 1024), ("audio/pcma", 1024)):
        decoded = np.frombuffer(g711.decode(g711.encode(ALL_SAMPLES, law), law), dtype="<i2")
        error = np.abs(decoded.astype(np.int64) - samples)
        assert error.max() <= worst, law
        small = np.abs(samples) < 256
        assert error[small].max() <= 16, law


def test_the_output_stream_holds_back_at_most_max_held_ms() -> None:
    """A reply's deltas of any size, through the 24 -> 8 kHz A-law stream: the G.711 bytes sent
    trail the PCM16 taken by at most `MAX_HELD_MS`, and never run ahead of it."""
    wire = audio_formats.WireAudio(voice="v")
    wire.configure(None, {"type": "audio/pcma"})
    rng = np.random.default_rng(7)
    taken_samples = sent_bytes = 0
    for _ in range(300):
        samples = int(rng.integers(50, 7200))
        pcm = (rng.standard_normal(samples) * 3000).astype("<i2").tobytes()
        sent_bytes += len(wire.encode_output("resp_1", pcm))
        taken_samples += samples
        held_ms = taken_samples / 24 - sent_bytes / 8
        assert 0 <= held_ms <= audio_formats.MAX_HELD_MS, held_ms


async def test_a_spoken_turn_in_mu_law_is_answered_in_a_law(start_server) -> None:
    server = await start_server(tts="piper", calibration="marks")
    question = speech_fixtures.place(speech_fixtures.speech("Tell me about the planets."),
                                     lead_ms=600, tail_ms=1500)
    pcm8k = speech_fixtures.to_pcm16(resample(question, speech_fixtures.RATE_HZ, 8000))
    mu_law = g711.encode(pcm8k, "audio/pcmu")
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        await client.send({"type": "session.update", "session": {"type": "realtime", "audio": {
            "input": {"format": {"type": "audio/pcmu"}},
            "output": {"format": {"type": "audio/pcma"}}}}})
        updated = await client.wait_for("session.updated")
        assert updated["session"]["audio"]["input"]["format"] == {"type": "audio/pcmu"}
        assert updated["session"]["audio"]["output"]["format"] == {"type": "audio/pcma"}

        async def microphone() -> None:
            frame = 8000 * 40 // 1000  # 40 ms of 8 kHz G.711: one byte a sample
            for start in range(0, len(mu_law), frame):
                await client.send({"type": "input_audio_buffer.append",
                                   "audio": base64.b64encode(mu_law[start:start + frame])
                                   .decode()})
                await asyncio.sleep(0.04)

        await receive_while(client, asyncio.create_task(microphone()))
        created = await client.wait_for("response.created", timeout=30)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["audio_end_ms"] >= 4000, timeout=30)
        await client.send({"type": "response.cancel"})
        done = await client.wait_for("response.done", timeout=10)
    assert not client.of_type("error")
    transcribed = client.of_type("conversation.item.input_audio_transcription.completed")
    assert "planet" in transcribed[0]["transcript"].lower()
    assert done["response"]["audio"]["output"]["format"] == {"type": "audio/pcma"}
    assert created["response"]["audio"]["output"]["format"] == {"type": "audio/pcma"}
    deltas = client.of_type("response.output_audio.delta", response_id=done["response"]["id"])
    a_law = b"".join(base64.b64decode(e["delta"]) for e in deltas)
    # 8 bytes a ms; the cancelled reply's stream still held back its last few ms
    assert 0 <= deltas[-1]["audio_end_ms"] - len(a_law) / 8 <= audio_formats.MAX_HELD_MS
    reply = pcm16_to_float(g711.decode(a_law, "audio/pcma"))
    heard = await LocalWhisperTranscriber().transcribe(reply, 8000)
    said = "".join(e["delta"] for e in client.of_type(
        "response.output_audio_transcript.delta", response_id=done["response"]["id"]))
    words = set(re.findall(r"[a-z]+", said.lower()))
    recognized = set(re.findall(r"[a-z]+", str(heard).lower()))
    assert len(recognized) >= 5 and len(words & recognized) >= 0.8 * len(recognized), (
        said, heard)


def test_a_completed_replys_held_tail_is_flushed_whole() -> None:
    """Deltas of any size through the 24 -> 8 kHz stream, then the reply's end: the flushed
    tail makes the G.711 bytes exactly the PCM16 taken (8 per ms), and the stream starts
    anew for the next reply."""
    wire = audio_formats.WireAudio(voice="v")
    wire.configure(None, {"type": "audio/pcmu"})
    rng = np.random.default_rng(11)
    taken_samples = sent_bytes = 0
    for _ in range(40):
        samples = int(rng.integers(50, 7200)) // 3 * 3  # whole 8 kHz samples
        pcm = (rng.standard_normal(samples) * 3000).astype("<i2").tobytes()
        sent_bytes += len(wire.encode_output("resp_1", pcm))
        taken_samples += samples
    assert sent_bytes < taken_samples // 3, "the stream held some back"
    sent_bytes += len(wire.flush_output("resp_1"))
    assert sent_bytes == taken_samples // 3
    assert wire.flush_output("resp_1") == b"", "nothing is left to flush twice"


async def test_a_completed_g711_reply_ends_with_all_its_audio(start_server) -> None:
    """Issue 25/26: a completed mu-law reply lost its last <= 75 ms, held in the resampler,
    at every reply's end. Its bytes now match its `audio_end_ms` exactly (8 a ms), the last
    of them before `response.output_audio.done`."""
    server = await start_server(tts="uniform")
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        await client.send({"type": "session.update", "session": {"type": "realtime", "audio": {
            "output": {"format": {"type": "audio/pcmu"}}}}})
        await client.wait_for("session.updated")
        for text in ("say: One two three.", "say: Four five."):
            response_id, _ = await client.prompt(text)
            done = await client.wait_for("response.done", timeout=30)
            assert done["response"]["status"] == "completed"
            deltas = client.of_type("response.output_audio.delta", response_id=response_id)
            mu_law = b"".join(base64.b64decode(e["delta"]) for e in deltas)
            words = len(text.split()) - 1
            assert deltas[-1]["audio_end_ms"] == words * 400
            assert len(mu_law) == words * 400 * 8
            ends = [i for i, e in enumerate(client.events)
                    if e["type"] == "response.output_audio.done"
                    and e["response_id"] == response_id]
            last_delta = max(i for i, e in enumerate(client.events)
                             if e["type"] == "response.output_audio.delta"
                             and e["response_id"] == response_id)
            assert ends and ends[0] > last_delta
