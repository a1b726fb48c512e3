"""A protocol client that plays replies as the page does, pauses and resumes them, and speaks.

`PausingPage` plays one response in real time (100 ms jitter buffer, an ACK every 100 ms) from
the audio the server sent: it stops rendering on `response.paused` (keeping what it has),
continues on `response.resumed` and stops for good on `output_audio_buffer.cleared` or a
cancelled `response.done`, sending its final ACK. `speak_over_reply` streams microphone audio
(PCM at 16 kHz, e.g. `tests.speech_fixtures.speech`) in real-time 40 ms appends over such a
reply and reports what happened. Used by `tests/test_backchannel_server.py` and
`benchmarks/bench_backchannel.py`.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from server.speech.resampling import resample
from tests import speech_fixtures
from tests.realtime_client import RealtimeClient

INPUT_RATE_HZ = 24000
FRAME_MS = 40
JITTER_MS = 100
SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
              "silence_duration_ms": 500, "create_response": True, "interrupt_response": True}


def mic_pcm16(pcm_16k: np.ndarray) -> bytes:
    """16 kHz float test audio as the page sends it: PCM16 LE at 24 kHz."""
    return speech_fixtures.to_pcm16(resample(pcm_16k, speech_fixtures.RATE_HZ, INPUT_RATE_HZ))


class PausingPage:
    """Plays `response_id` in real time, honouring pauses, resumes and cuts.

    Attributes:
        paused_at: loop times (s) at which playback stopped for a pause.
        resumed_at: loop times (s) at which it continued.
        stopped_at_ms: the final played position once the reply was cut, else None.
    """

    def __init__(self, client: RealtimeClient, response_id: str) -> None:
        self.client = client
        self.response_id = response_id
        self._loop = asyncio.get_running_loop()
        self._played_before_ms = 0.0
        self._since: float | None = self._loop.time()
        self.paused_at: list[float] = []
        self.resumed_at: list[float] = []
        self.stopped_at_ms: int | None = None
        self.finished = False

    def _sent_ms(self) -> int:
        return max((e["audio_end_ms"] for e in self.client.of_type(
            "response.output_audio.delta", response_id=self.response_id)), default=0)

    def played_ms(self) -> int:
        """The rendered position now (ms of the reply's audio)."""
        if self.stopped_at_ms is not None:
            return self.stopped_at_ms
        running = 0.0 if self._since is None else (self._loop.time() - self._since) * 1000
        played = self._played_before_ms + running - JITTER_MS
        return int(max(0.0, min(played, self._sent_ms())))

    def _events(self, kind: str) -> list[dict[str, Any]]:
        return self.client.of_type(kind, response_id=self.response_id)

    def _update(self) -> None:
        done = [e for e in self.client.of_type("response.done")
                if e["response"]["id"] == self.response_id]
        if self._events("output_audio_buffer.cleared") or (
                done and done[0]["response"]["status"] == "cancelled"):
            self.stopped_at_ms = self.played_ms()
            return
        pauses, resumes = len(self._events("response.paused")), len(
            self._events("response.resumed"))
        if pauses > len(self.paused_at) and self._since is not None:
            self._played_before_ms = self.played_ms() + JITTER_MS
            self._since = None
            self.paused_at.append(self._loop.time())
        if resumes > len(self.resumed_at) and self._since is None:
            self._since = self._loop.time()
            self.resumed_at.append(self._since)
        if done and self.played_ms() >= self._sent_ms():
            self.finished = True

    async def run(self) -> None:
        """ACK every 100 ms until the reply was cut or played to its end."""
        while self.stopped_at_ms is None and not self.finished:
            await asyncio.sleep(0.1)
            self._update()
            await self.client.ack(self.response_id, self.played_ms())


async def stream_mic(client: RealtimeClient, pcm16: bytes) -> None:
    """Append microphone audio in 40 ms frames, in real time."""
    frame = INPUT_RATE_HZ * 2 * FRAME_MS // 1000
    loop = asyncio.get_running_loop()
    start = loop.time()
    for index, at in enumerate(range(0, len(pcm16), frame)):
        await client.send({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(pcm16[at:at + frame]).decode()})
        await asyncio.sleep(max(0.0, start + (index + 1) * FRAME_MS / 1000 - loop.time()))


async def receive_while(client: RealtimeClient, task: asyncio.Task[Any]) -> None:
    """Keep reading server events until `task` is done."""
    while not task.done():
        await client.drain(0.05)
    await task


@dataclass
class Outcome:
    """What a reply did while the person spoke over it.

    Attributes:
        response_id, item_id: the reply.
        paused, resumed: its `response.paused` / `response.resumed` events.
        status: its final `response.done` status.
        heard: its final `conversation.item.heard` text.
        full_text: the reply's text.
        backchannels: `input_audio_buffer.backchannel` events.
        user_items: user items committed from the microphone.
        gaps_ms: per pause that resumed, the silence the listener heard (ms).
        responses: responses created after the reply.
        played_ms: the client's final played position.
        resumed_at: loop times (s) at which the client resumed playing.
    """

    response_id: str
    item_id: str
    paused: list[dict[str, Any]]
    resumed: list[dict[str, Any]]
    status: str
    heard: str
    full_text: str
    backchannels: list[dict[str, Any]]
    user_items: list[str]
    gaps_ms: list[float] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)
    played_ms: int = 0
    resumed_at: list[float] = field(default_factory=list)


async def speak_over_reply(client: RealtimeClient, reply: str, mic_16k: np.ndarray,
                           interruption: dict[str, Any] | None = None) -> Outcome:
    """Ask for `reply` (a `say:` prompt), play it as the page does and stream `mic_16k`
    (16 kHz float, starting when the first audio arrives) into server VAD; wait until the
    reply ended and its heard text settled."""
    session: dict[str, Any] = {"audio": {"input": {"turn_detection": SERVER_VAD}}}
    if interruption is not None:
        session["interruption"] = interruption
    await client.send({"type": "session.update", "session": session})
    await client.wait_for("session.updated")
    response_id, item_id = await client.prompt(reply)
    await client.wait_for("response.output_audio.delta")
    page = PausingPage(client, response_id)
    playing = asyncio.create_task(page.run())
    await receive_while(client, asyncio.create_task(stream_mic(client, mic_pcm16(mic_16k))))
    done = await client.wait_for("response.done",
                                 lambda e: e["response"]["id"] == response_id, timeout=60)
    while not playing.done():
        await client.drain(0.1)
    await playing
    final_ms = page.played_ms()
    heard = await client.heard(
        item_id, lambda e: e["played_ms"] >= final_ms and e["method"] != "none", timeout=30)
    await client.drain(0.3)
    gaps = [(resumed - paused) * 1000 for paused, resumed
            in zip(page.paused_at, page.resumed_at, strict=False)]
    full = [e["transcript"] for e in client.of_type("response.output_audio_transcript.done",
                                                    response_id=response_id)]
    return Outcome(
        response_id=response_id, item_id=item_id,
        paused=client.of_type("response.paused", response_id=response_id),
        resumed=client.of_type("response.resumed", response_id=response_id),
        status=done["response"]["status"], heard=heard["text"],
        full_text=full[0] if full else "",
        backchannels=client.of_type("input_audio_buffer.backchannel"),
        user_items=[e["item_id"] for e in client.of_type("input_audio_buffer.committed")],
        gaps_ms=gaps,
        responses=[e["response"]["id"] for e in client.of_type("response.created")
                   if e["response"]["id"] != response_id],
        played_ms=page.played_ms(),
        resumed_at=page.resumed_at,
    )


async def cut_over_reply(ws_url: str, reply: str, mic_16k: np.ndarray,
                         interruption: dict[str, Any] | None = None) -> Outcome:
    """`speak_over_reply` on a new connection to `ws_url`, waiting for the person's turn to be
    transcribed too; asserts what an interruption does: the reply paused once, at the speech's
    start, never resumed on a backchannel, and cancelled. The outcome, for more checks."""
    async with RealtimeClient.connect(ws_url) as client:
        outcome = await speak_over_reply(client, reply, mic_16k, interruption)
        await client.wait_for("conversation.item.input_audio_transcription.completed",
                              timeout=30)
    assert [e["reason"] for e in outcome.paused] == ["speech_started"]
    assert outcome.resumed == [] and outcome.backchannels == []
    assert outcome.status == "cancelled"
    return outcome
