"""`duplex-demo talk`: one realtime session through the sound card.

The client connects to `/v1/realtime` with `websockets`, plays each response's audio through the
default output device (`PlaybackLedger` fed from the stream callback), sends `playback.ack` with
the played position every `ACK_INTERVAL_MS` while a response plays and once when it stops or
drains, streams the microphone to the server (server VAD turns it into the person's turns)
and barges in (`barge_in` with the exact played position) when `BargeInDetector` hears the
person over the assistant or when Enter is pressed. A typed line is sent as a prompt (after
stopping a reply still playing). The conversation is printed as it goes: the person's turns
(typed or transcribed), the assistant's text, and each cut (`conversation.item.heard` of an
interrupted reply once calibrated, `method` other than `none`: what was heard, what was not, by
which method).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import logging
import sys
import threading
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from server.listening.band_envelope import EchoReference
from server.listening.pcm16 import pcm16_to_float
from server.local_audio.capture import BargeInDetector, RealTimeGate
from server.local_audio.devices import check_devices, open_stream
from server.local_audio.playback import PlaybackLedger
from server.local_audio.transcript import TranscriptPrinter
from server.speech.resampling import resample

log = logging.getLogger("duplex_demo.talk")

ACK_INTERVAL_MS = 100
"""Period of `playback.ack` while a response plays (the protocol asks for every 100-250 ms)."""

APPEND_MS = 40
"""Microphone audio per `input_audio_buffer.append`, as the page sends it."""

SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
              "silence_duration_ms": 500, "create_response": True, "interrupt_response": True}
"""Turn detection asked for while the microphone is on: the page's (`web/mic-control.js`)."""

DEFAULT_RATE_HZ = 24_000
"""Audio rate before the session names one (OpenAI Realtime's)."""


class ConnectionFailed(Exception):
    """The server could not be reached or closed the session; `str()` is one line."""


@dataclass(slots=True)
class _Reply:
    """A response this client plays: its item, whether all audio arrived, what was ACKed."""

    item_id: str | None = None
    audio_done: bool = False
    acked_ms: int = -1
    reference: EchoReference | None = None
    finished: bool = False
    cut: str | None = None


@dataclass
class TalkOptions:
    """What `duplex-demo talk` was asked to do.

    Attributes:
        url: the server's realtime WebSocket URL.
        microphone: capture the microphone (else output only; Enter still barges in).
        api_key: sent as `Authorization: Bearer` when set.
    """

    url: str
    microphone: bool = True
    api_key: str | None = None


class TalkClient:
    """One session of `duplex-demo talk`; `run` returns when the session ends.

    Args:
        options: the URL and switches.
        out: where the conversation is printed.

    The person's lines come from stdin, read on a daemon thread (which does not hold up the
    exit while it waits for a line).
    """

    def __init__(self, options: TalkOptions, out: TextIO = sys.stdout) -> None:
        self.options = options
        self._transcript = TranscriptPrinter(out)
        self._stdin: asyncio.Queue[str] | None = None
        self._ids = itertools.count(1)
        self._replies: dict[str, _Reply] = {}
        self._websocket: ClientConnection | None = None
        self._ledger = PlaybackLedger(DEFAULT_RATE_HZ)
        self._latency_frames = 0
        self._input_rate_hz = DEFAULT_RATE_HZ
        self._captured: asyncio.Queue[np.ndarray] = asyncio.Queue()

    async def run(self) -> None:
        """Check the devices, connect, talk until the server closes the session.

        Raises:
            AudioUnavailable: PortAudio or a device is missing (before connecting).
            ConnectionFailed: the server is unreachable, refused the handshake or closed.
        """
        check_devices(self.options.microphone)
        headers = {"Authorization": f"Bearer {self.options.api_key}"} \
            if self.options.api_key else {}
        try:
            websocket = await connect(self.options.url, max_size=None,
                                      additional_headers=headers)
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as error:
            raise ConnectionFailed(f"cannot connect to {self.options.url}: {error}") from error
        self._websocket = websocket
        async with websocket:
            created = json.loads(await websocket.recv())
            audio = created.get("session", {}).get("audio", {})
            rate = audio.get("output", {}).get("format", {}).get("rate", DEFAULT_RATE_HZ)
            self._input_rate_hz = audio.get("input", {}).get("format", {}).get("rate", rate)
            self._ledger = PlaybackLedger(rate)
            loop = asyncio.get_running_loop()
            gate = RealTimeGate(rate)

            def callback(indata: Any, outdata: np.ndarray, frames: int, time: Any,
                         status: Any) -> None:
                self._ledger.render(outdata)
                if indata is not None and (keep := gate.admit(frames)):
                    loop.call_soon_threadsafe(self._captured.put_nowait,
                                              indata[:keep, 0].copy())

            detector = await asyncio.to_thread(BargeInDetector, rate) \
                if self.options.microphone else None
            stream = open_stream(rate, self.options.microphone, callback)
            self._latency_frames = round(_output_latency_s(stream) * rate)
            log.debug("stream open: %d Hz, output latency %d frames",
                      rate, self._latency_frames)
            with stream:
                self._transcript.line(f"connected to {self.options.url}: type a prompt and Enter; "
                            "Enter alone stops the assistant"
                            + ("; or just talk" if self.options.microphone else ""))
                await self._send({"type": "session.update", "session": {
                    "type": "realtime", "extensions": {"enabled": True},
                    "audio": {"input": {"turn_detection": SERVER_VAD
                                        if self.options.microphone else None}}}})
                tasks = [asyncio.create_task(self._acks()), asyncio.create_task(self._typing())]
                if detector is not None:
                    tasks.append(asyncio.create_task(self._microphone(rate, detector)))
                try:
                    await self._receive()
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ server events

    async def _receive(self) -> None:
        """Handle server events until the connection closes."""
        websocket = self._websocket
        assert websocket is not None
        with contextlib.suppress(ConnectionClosed):
            async for frame in websocket:
                await self._on_event(json.loads(frame))
        raise ConnectionFailed(f"the server closed the session: {websocket.close_code} "
                               f"{websocket.close_reason or ''}".strip())

    async def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        response_id = event.get("response_id")
        if kind == "response.output_item.added":
            reply = self._replies.setdefault(event["response_id"], _Reply())
            reply.item_id = event.get("item", {}).get("id")
        elif kind == "response.output_audio.delta":
            await self._on_audio(response_id, event["delta"])
        elif kind == "response.output_audio.done":
            self._replies.setdefault(response_id, _Reply()).audio_done = True
        elif kind == "response.output_audio_transcript.delta":
            self._transcript.assistant(response_id, event.get("delta", ""))
        elif kind == "response.done":
            self._replies.setdefault(event["response"]["id"], _Reply()).audio_done = True
            self._transcript.end_line()
        elif kind == "output_audio_buffer.cleared":
            self._ledger.stop(response_id)
            await self._finish(response_id, "the server stopped the reply")
        elif kind == "conversation.item.input_audio_transcription.completed":
            self._transcript.line(f"you: {event.get('transcript', '')}")
        elif kind == "conversation.item.heard" and event.get("interrupted") and \
                event.get("method") != "none":
            self._print_cut(self._replies.get(response_id), event)
        elif kind == "error":
            error = event.get("error", {})
            self._transcript.line(f"error: {error.get('code') or error.get('type')}: "
                        f"{error.get('message')}")

    async def _on_audio(self, response_id: str, delta: str) -> None:
        """Queue a response's audio for the speaker (and as the echo reference)."""
        reply = self._replies.setdefault(response_id, _Reply())
        if reply.finished:
            return
        pcm = pcm16_to_float(base64.b64decode(delta))
        if reply.reference is None:
            reply.reference = EchoReference(self._ledger.rate_hz)
        reply.reference.append(pcm)
        superseded = self._ledger.enqueue(response_id, pcm)
        if superseded is not None:
            await self._finish(superseded, None)

    # ------------------------------------------------------------------ playback ACKs

    def _played_ms(self, response_id: str) -> int:
        frames = self._ledger.played_frames(response_id, self._latency_frames)
        return frames * 1000 // self._ledger.rate_hz

    async def _acks(self) -> None:
        """Every `ACK_INTERVAL_MS`: ACK each reply whose played position grew; a reply whose
        audio all arrived and played gets its final ACK and is done."""
        while True:
            await asyncio.sleep(ACK_INTERVAL_MS / 1000)
            for response_id, reply in list(self._replies.items()):
                if reply.finished:
                    continue
                played = self._played_ms(response_id)
                drained = reply.audio_done and self._ledger.played_frames(
                    response_id, self._latency_frames) >= self._ledger.received_frames(
                    response_id)
                if drained:
                    await self._finish(response_id, None)
                elif played > reply.acked_ms and self._ledger.rendered_frames(response_id):
                    await self._ack(response_id, reply, played)

    async def _ack(self, response_id: str, reply: _Reply, played_ms: int) -> None:
        reply.acked_ms = played_ms
        log.debug("ack %s played_ms=%d played_frames=%d rendered_frames=%d "
                  "latency_frames=%d block=%d", response_id, played_ms,
                  self._ledger.played_frames(response_id, self._latency_frames),
                  self._ledger.rendered_frames(response_id), self._latency_frames,
                  self._ledger.last_block)
        await self._send({"type": "playback.ack", "response_id": response_id,
                          "played_ms": played_ms})

    async def _finish(self, response_id: str, note: str | None) -> None:
        """A reply stopped playing (drained, superseded or stopped by the server): send its
        final position once."""
        reply = self._replies.get(response_id)
        if reply is None or reply.finished:
            return
        if self._ledger.received_frames(response_id):
            await self._ack(response_id, reply, self._played_ms(response_id))
        reply.finished = True
        reply.reference = None
        self._ledger.forget(response_id)
        if note:
            self._transcript.line(f"[{note} at {max(reply.acked_ms, 0)} ms]")

    # ------------------------------------------------------------------ barge-in

    def _playing(self) -> str | None:
        """The reply still playing or still to play, if any."""
        for response_id, reply in reversed(self._replies.items()):
            if not reply.finished:
                return response_id
        return None

    async def _barge_in(self, source: str) -> bool:
        """Silence the reply playing now and send `barge_in` with its played position.
        Returns False when no reply plays."""
        response_id = self._playing()
        if response_id is None:
            return False
        self._ledger.stop(response_id)
        reply = self._replies[response_id]
        played = self._played_ms(response_id)
        reply.finished = True
        reply.reference = None
        log.debug("barge_in %s source=%s played_ms=%d played_frames=%d rendered_frames=%d "
                  "latency_frames=%d block=%d", response_id, source, played,
                  self._ledger.played_frames(response_id, self._latency_frames),
                  self._ledger.rendered_frames(response_id), self._latency_frames,
                  self._ledger.last_block)
        event: dict[str, Any] = {"type": "barge_in", "response_id": response_id,
                                 "audio_end_ms": played, "source": source}
        if reply.item_id:
            event["item_id"] = reply.item_id
        await self._send(event)
        self._ledger.forget(response_id)
        self._transcript.line(f"[stopped the assistant ({source}) at {played} ms]")
        return True

    async def _stdin_line(self) -> str:
        """The next line of stdin ("" at its end)."""
        if self._stdin is None:
            queue: asyncio.Queue[str] = asyncio.Queue()
            loop = asyncio.get_running_loop()

            def read() -> None:
                while True:
                    try:
                        line = sys.stdin.readline()
                    except (OSError, ValueError):  # closed or unreadable: no typing
                        line = ""
                    loop.call_soon_threadsafe(queue.put_nowait, line)
                    if not line:
                        return

            self._stdin = queue
            threading.Thread(target=read, name="talk-stdin", daemon=True).start()
        return await self._stdin.get()

    async def _typing(self) -> None:
        """Read the person's lines: Enter alone barges in, text is a prompt."""
        while line := await self._stdin_line():
            text = line.strip()
            if not text:
                if not await self._barge_in("button"):
                    self._transcript.line("[nothing is playing]")
                continue
            await self._barge_in("button")
            self._transcript.line(f"you: {text}")
            await self._send({"type": "conversation.item.create", "item": {
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}]}})
            await self._send({"type": "response.create"})

    async def _microphone(self, rate_hz: int, detector: BargeInDetector) -> None:
        """Stream the microphone to the server and barge in when the person talks over the
        assistant. The detector takes `APPEND_MS` pieces; an append carries every complete
        piece captured so far (one piece while the loop keeps up, all of them after a stall,
        so a stall never turns into a burst of events against the server's rate limit)."""
        piece = rate_hz * APPEND_MS // 1000
        pending = np.zeros(0, dtype=np.float32)
        while True:
            blocks = [pending, await self._captured.get()]
            while not self._captured.empty():
                blocks.append(self._captured.get_nowait())
            pending = np.concatenate(blocks)
            complete = pending.size // piece * piece
            if complete == 0:
                continue
            audio, pending = pending[:complete], pending[complete:]
            for start in range(0, complete, piece):
                response_id = self._playing()
                reply = self._replies.get(response_id) if response_id else None
                playing_ms = self._played_ms(response_id) if response_id else None
                if detector.feed(audio[start:start + piece], playing_ms,
                                 reply.reference if reply else None):
                    await self._barge_in("vad")
            if self._input_rate_hz != rate_hz:
                audio = resample(audio, rate_hz, self._input_rate_hz)
            pcm16 = (np.clip(audio, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
            await self._send({"type": "input_audio_buffer.append",
                              "audio": base64.b64encode(pcm16).decode("ascii")})

    # ------------------------------------------------------------------ output

    async def _send(self, event: dict[str, Any]) -> None:
        assert self._websocket is not None
        event.setdefault("event_id", f"evt_talk_{next(self._ids)}")
        with contextlib.suppress(ConnectionClosed):
            await self._websocket.send(json.dumps(event))

    def _print_cut(self, reply: _Reply | None, event: dict[str, Any]) -> None:
        """Print the heard text of a reply this client stopped playing, each version once
        (the server may announce a cut while the reply still plays here: the client caught
        up with the audio sent; that is not a cut yet)."""
        heard = event.get("text", "")
        if reply is None or not reply.finished or reply.cut == heard or \
                heard == event.get("full_text", ""):
            return
        reply.cut = heard
        self._transcript.cut(event)


def _output_latency_s(stream: Any) -> float:
    """The stream's reported output latency in seconds (a duplex stream reports a pair)."""
    latency = stream.latency
    return float(latency[1] if isinstance(latency, tuple) else latency)
