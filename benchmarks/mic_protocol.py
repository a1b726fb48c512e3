"""The protocol part of `bench_microphone` (tables 3-5): a plain `websockets` client in a child
process (`--role client`) streams generated microphone audio in real time to a real server in
the parent, whose `time.process_time()` is then the server's CPU.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from benchmarks.measuring import PROJECT_ROOT, cpu_snapshot, other_load, percentile, verdict
from benchmarks.mic_page import LONG_PROMPT, SERVER_VAD
from benchmarks.mic_recordings import (
    ECHO_LEVELS_DBFS,
    NOISE_GAP_MS,
    Segment,
    mic_track,
    noise_recordings,
    speech_recordings,
)
from benchmarks.tables import print_table
from server.speech.resampling import resample
from tests import speech_fixtures
from tests.realtime_client import fetch_reply_audio

INPUT_RATE_HZ = 24_000
"""Microphone rate on the wire (the session's input format)."""
FRAME_MS = 40
"""Microphone audio per `input_audio_buffer.append` (as the page sends it)."""
REPLY_EXTRA_MS = 700.0
"""Target: utterance end -> first reply audio <= silence_duration_ms + this."""
ECHO_DELAY_MS = 150
"""Protocol echo run: the microphone hears the reply this long after the simulated playback
(output + input latency and the room)."""
ECHO_STREAM_S = 10.0
"""Protocol echo run: seconds of echo streamed at each of ECHO_LEVELS_DBFS."""
ECHO_PLAYBACK_MS = 100
"""Protocol echo run: the simulated client plays the reply this long after its first delta
arrived (its jitter buffer), and ACKs that position."""
PROTOCOL_UTTERANCES = 12
"""Utterances streamed in each protocol run (the first 12 of SPEECH_SENTENCES: 6 Piper,
6 espeak-ng)."""


class StreamClient:
    """A `websockets` client that records every server event with its arrival time
    (time.perf_counter() s) from a reader task."""

    def __init__(self, websocket: ClientConnection) -> None:
        self.websocket = websocket
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.on_event: Any = None
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for frame in self.websocket:
            event = json.loads(frame)
            self.events.append((time.perf_counter(), event))
            if self.on_event is not None:
                self.on_event(event)

    async def send(self, event: dict[str, Any]) -> None:
        """Send one client event."""
        await self.websocket.send(json.dumps(event))

    def of_type(self, event_type: str) -> list[tuple[float, dict[str, Any]]]:
        """(arrival s, event) of every received event of `event_type`, in order."""
        return [(t, e) for t, e in self.events if e["type"] == event_type]

    async def wait_until(self, predicate: Any, timeout_s: float) -> bool:
        """Poll `predicate()` every 10 ms; False when it stayed false for `timeout_s`."""
        deadline = time.perf_counter() + timeout_s
        while not predicate():
            if time.perf_counter() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    async def close(self) -> None:
        """Close the socket and stop the reader."""
        await self.websocket.close()
        self._reader.cancel()


def reply_16k(pcm16: bytes) -> np.ndarray:
    """A reply's PCM16 audio at INPUT_RATE_HZ (the session's output rate) as float32 at the
    16 kHz of the generated recordings."""
    pcm = np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0
    return resample(pcm, INPUT_RATE_HZ, speech_fixtures.RATE_HZ)


async def open_stream(url: str, detection: dict[str, Any]) -> StreamClient:
    """Connect, set `detection` as turn detection and wait for `session.updated`."""
    client = StreamClient(await connect(url, max_size=None))
    await client.send({"type": "session.update",
                       "session": {"audio": {"input": {"turn_detection": detection}}}})
    await client.wait_until(lambda: client.of_type("session.updated"), 10)
    return client


async def stream_track(client: StreamClient, track_16k: np.ndarray) -> float:
    """Send `track_16k` as PCM16 at 24 kHz in FRAME_MS appends, frame i when its last sample
    would have been captured (t0 + (i + 1) * FRAME_MS); returns t0 (perf_counter s)."""
    pcm16 = speech_fixtures.to_pcm16(resample(track_16k, speech_fixtures.RATE_HZ,
                                              INPUT_RATE_HZ))
    frame = INPUT_RATE_HZ * 2 * FRAME_MS // 1000
    t0 = time.perf_counter()
    for index, start in enumerate(range(0, len(pcm16), frame)):
        await asyncio.sleep(max(0.0, t0 + (index + 1) * FRAME_MS / 1000 - time.perf_counter()))
        await client.send({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(pcm16[start:start + frame]).decode()})
    return t0


def track_seconds(track: np.ndarray) -> float:
    """Duration of a 16 kHz track in s."""
    return track.size / speech_fixtures.RATE_HZ


async def client_noise(url: str, seed: int) -> dict[str, Any]:
    """Raw noise bursts and coughs, nothing playing: server VAD only (CPU + false starts)."""
    track, segments = mic_track(noise_recordings(seed), 500.0, NOISE_GAP_MS, marker=False)
    client = await open_stream(url, SERVER_VAD)
    print("start", flush=True)
    await stream_track(client, track)
    await asyncio.sleep(1.0)
    await client.close()
    return {"audio_s": track_seconds(track), "segments": len(segments),
            "speech_started": len(client.of_type("input_audio_buffer.speech_started"))}


async def client_echo(url: str, seed: int) -> dict[str, Any]:
    """The reply's own audio streamed back as the microphone while it plays (real-time ACKs
    every 150 ms, played = time since its first audio - ECHO_PLAYBACK_MS), heard ECHO_DELAY_MS
    after it played: one session per level of ECHO_LEVELS_DBFS, ECHO_STREAM_S each."""
    reply = reply_16k(await fetch_reply_audio(url, LONG_PROMPT))
    echo = reply[:round(ECHO_STREAM_S * speech_fixtures.RATE_HZ)] / float(np.max(np.abs(reply)))
    lead = speech_fixtures.silence(ECHO_PLAYBACK_MS + ECHO_DELAY_MS)
    print("start", flush=True)
    audio_s, started, interrupted = 0.0, 0, 0
    for dbfs in ECHO_LEVELS_DBFS:
        track = np.concatenate([lead, echo * 10.0 ** (dbfs / 20.0)])
        client = await open_stream(url, SERVER_VAD)
        await client.send({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": LONG_PROMPT}]}})
        await client.send({"type": "response.create"})
        await client.wait_until(lambda c=client: c.of_type("response.output_audio.delta"), 20)
        first_audio, delta = client.of_type("response.output_audio.delta")[0]
        player = asyncio.create_task(ack_in_real_time(client, delta["response_id"], first_audio))
        await stream_track(client, track)
        await asyncio.sleep(1.0)
        player.cancel()
        await client.close()
        audio_s += track_seconds(track)
        started += len(client.of_type("input_audio_buffer.speech_started"))
        interrupted += bool(client.of_type("output_audio_buffer.cleared"))
    return {"audio_s": audio_s, "segments": len(ECHO_LEVELS_DBFS), "speech_started": started,
            "interrupted": interrupted}


async def ack_in_real_time(client: StreamClient, response_id: str, first_audio: float) -> None:
    """ACK `response_id` every 150 ms as a player ECHO_PLAYBACK_MS behind its first delta
    (`first_audio`, perf_counter s) would, until the server clears its audio."""
    while not client.of_type("output_audio_buffer.cleared"):
        sent = max(e["audio_end_ms"] for _, e in client.of_type("response.output_audio.delta")
                   if e["response_id"] == response_id)
        played = min(sent, (time.perf_counter() - first_audio) * 1000 - ECHO_PLAYBACK_MS)
        await client.send({"type": "playback.ack", "response_id": response_id,
                           "played_ms": max(0, int(played))})
        await asyncio.sleep(0.15)


async def client_asr(url: str, seed: int) -> dict[str, Any]:
    """Utterances with turn detection but no responses: VAD + transcription CPU."""
    recordings = speech_recordings(PROTOCOL_UTTERANCES)
    track, _ = mic_track(recordings, 1000.0, 2500.0, marker=False)
    client = await open_stream(url, {**SERVER_VAD, "create_response": False})
    print("start", flush=True)
    await stream_track(client, track)

    def settled() -> bool:
        done = len(client.of_type("conversation.item.input_audio_transcription.completed"))
        deleted = len(client.of_type("conversation.item.deleted"))
        return done + deleted >= len(client.of_type("input_audio_buffer.committed"))

    await client.wait_until(settled, 30)
    starts = {e["item_id"]: e["audio_start_ms"]
              for _, e in client.of_type("input_audio_buffer.speech_started")}
    committed_ms = sum(e["audio_end_ms"] - starts.get(e["item_id"], e["audio_end_ms"])
                       for _, e in client.of_type("input_audio_buffer.speech_stopped"))
    await client.close()
    return {"audio_s": track_seconds(track), "utterances": len(recordings),
            "committed_s": committed_ms / 1000,
            "transcripts": len(client.of_type(
                "conversation.item.input_audio_transcription.completed"))}


async def client_reply(url: str, seed: int) -> dict[str, Any]:
    """Utterances with automatic responses: utterance end -> first reply audio. Each reply is
    stopped (`barge_in` at 0 ms) on its first audio so that the next utterance is a new turn."""
    recordings = speech_recordings(PROTOCOL_UTTERANCES)
    track, segments = mic_track(recordings, 1000.0, 3500.0, marker=False)
    client = await open_stream(url, SERVER_VAD)
    stopped: set[str] = set()
    sends: list[asyncio.Task[None]] = []

    def stop_reply(event: dict[str, Any]) -> None:
        if event["type"] == "response.output_audio.delta" and event["response_id"] not in stopped:
            stopped.add(event["response_id"])
            sends.append(asyncio.ensure_future(client.send({
                "type": "barge_in", "response_id": event["response_id"], "audio_end_ms": 0,
                "source": "button"})))

    client.on_event = stop_reply
    print("start", flush=True)
    t0 = await stream_track(client, track)
    await client.wait_until(lambda: len(stopped) >= len(segments), 15)
    await client.close()
    return {"turns": [turn_latency(client, t0, segment) for segment in segments]}


def turn_latency(client: StreamClient, t0: float, segment: Segment) -> dict[str, float | None]:
    """For one utterance: ms from its true end (t0 + offset) to the server's speech_stopped,
    the transcript and the reply's first audio delta (None when missing)."""
    end_s = t0 + segment.offset_ms / 1000

    def after(event_type: str, key: Any) -> tuple[float, dict[str, Any]] | None:
        return next(((t, e) for t, e in client.of_type(event_type) if key(t, e)), None)

    stop = after("input_audio_buffer.speech_stopped",
                 lambda _, e: abs(e["audio_end_ms"] - segment.offset_ms) <= 600)
    if stop is None:
        return {"stopped": None, "transcript": None, "audio": None}
    item = stop[1]["item_id"]
    text = after("conversation.item.input_audio_transcription.completed",
                 lambda _, e: e["item_id"] == item)
    created = after("response.created", lambda t, _: text is not None and t >= text[0])
    reply = None if created is None else created[1]["response"]["id"]
    audio = None if reply is None else after("response.output_audio.delta",
                                             lambda _, e: e["response_id"] == reply)
    return {"stopped": (stop[0] - end_s) * 1000,
            "transcript": None if text is None else (text[0] - end_s) * 1000,
            "audio": (audio[0] - end_s) * 1000 if audio else None}


CLIENT_MODES = {"noise": client_noise, "echo": client_echo, "asr": client_asr,
                "reply": client_reply}


async def protocol_run(url: str, mode: str, seed: int) -> tuple[dict[str, Any], float, str]:
    """Run client `mode` in a child process; returns (its JSON result, this process's CPU s
    from its "start" line to its result, the other-load note).

    Raises:
        RuntimeError: the child failed or did not start.
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.bench_microphone", "--role", "client", "--mode", mode,
        "--url", url, "--seed", str(seed), cwd=PROJECT_ROOT, stdout=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    async with asyncio.timeout(180):
        line = await process.stdout.readline()
    if line.strip() != b"start":
        raise RuntimeError(f"client {mode} did not start: {line!r}")
    snapshot, cpu = cpu_snapshot(), time.process_time()
    async with asyncio.timeout(300):
        output = await process.stdout.readline()
    cpu = time.process_time() - cpu
    if await process.wait() != 0 or not output:
        raise RuntimeError(f"client {mode} failed")
    return json.loads(output), cpu, other_load(snapshot)


async def report_protocol(url: str, seed: int) -> list[bool]:
    """Tables 3-5; returns the verdicts (raw noise, raw echo, reply latency)."""
    noise, noise_cpu, noise_load = await protocol_run(url, "noise", seed)
    echo, _, echo_load = await protocol_run(url, "echo", seed)
    noise_ok, echo_ok = noise["speech_started"] == 0, echo["speech_started"] == 0
    print_table(f"3. Server VAD on raw audio over the protocol (no browser processing; "
                f"{noise_load}; {echo_load})",
                ["recordings", "n", "speech_started", "reply interrupted", "target", "verdict"], [
        ("noise bursts + coughs, idle", noise["segments"], noise["speech_started"], "-", "0",
         verdict(noise_ok)),
        (f"the reply's own audio at {' / '.join(f'{d:.0f}' for d in ECHO_LEVELS_DBFS)} "
         f"dBFS peak (a session each), {ECHO_DELAY_MS} ms late", echo["segments"],
         echo["speech_started"], echo["interrupted"], "0", verdict(echo_ok)),
    ])

    reply, _, reply_load = await protocol_run(url, "reply", seed)
    turns = reply["turns"]
    totals = [t["audio"] for t in turns if t["audio"] is not None]
    target = SERVER_VAD["silence_duration_ms"] + REPLY_EXTRA_MS
    reply_ok = len(totals) == len(turns) and percentile(totals, 95) <= target

    def row(name: str, key: str) -> tuple[object, ...]:
        values = [t[key] for t in turns if t[key] is not None]
        return (name, len(values), percentile(values, 50), percentile(values, 95),
                max(values, default=float("nan")))

    print_table(f"4. Utterance end -> first reply audio, protocol client in real time "
                f"({len(turns)} utterances; {reply_load})",
                ["from the utterance's true end to", "n", "p50 ms", "p95 ms", "max ms"], [
        row("server speech_stopped received", "stopped"),
        row("transcript received", "transcript"),
        row(f"first reply audio (target p95 <= {target:.0f}) {verdict(reply_ok)}", "audio"),
    ])

    asr, asr_cpu, asr_load = await protocol_run(url, "asr", seed)
    vad_rate = noise_cpu / noise["audio_s"]
    transcribe_cpu = asr_cpu - vad_rate * asr["audio_s"]
    print_table(f"5. Server CPU per second of microphone audio ({noise_load}; {asr_load})",
                ["run", "audio s", "server CPU s", "CPU % of audio time", "per utterance s",
                 "per utterance-second s"], [
        ("VAD only (noise, no turns)", noise["audio_s"], f"{noise_cpu:.2f}",
         100 * vad_rate, "-", "-"),
        (f"VAD + ASR ({asr['utterances']} utterances, {asr['transcripts']} transcripts)",
         asr["audio_s"], f"{asr_cpu:.2f}", 100 * asr_cpu / asr["audio_s"], "-", "-"),
        ("ASR alone (difference; audio s = committed)", asr["committed_s"],
         f"{transcribe_cpu:.2f}", 100 * transcribe_cpu / asr["audio_s"],
         f"{transcribe_cpu / max(asr['utterances'], 1):.2f}",
         f"{transcribe_cpu / max(asr['committed_s'], 1e-9):.2f}"),
    ])
    return [noise_ok, echo_ok, reply_ok]
