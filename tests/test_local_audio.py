"""`duplex-demo talk`, the local-audio client: its playback ledger and barge-in detector on real
audio, and the command itself on a real PortAudio stream against a real server on loopback.

The machine has no sound card: an `.asoundrc` under a temporary `HOME` makes ALSA's `null` PCM
the default device, which gives PortAudio one device with input and output. It consumes frames
as fast as the callback produces them, so the checks are on positions (what was ACKed against
the frames the callback consumed), never on timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import re
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from server.listening.band_envelope import EchoReference
from server.local_audio import client as client_module
from server.local_audio.capture import MIN_SPEECH_MS, BargeInDetector, RealTimeGate
from server.local_audio.client import TalkClient, TalkOptions
from server.local_audio.playback import PlaybackLedger
from server.speech.resampling import resample
from tests import speech_fixtures

ROOT = Path(__file__).resolve().parent.parent

TALK_FROM_A_TERMINAL = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from server.__main__ import main; main(['talk', *sys.argv[1:]])")
"""`python -m server talk` as an interactive shell starts it: with Python's SIGINT handler even
when this test run was started with SIGINT ignored (a background job of a shell without job
control, e.g. `(make test &)`), which a child inherits and Python keeps (Ctrl-C then never
reached `talk`: three tests failed on "talk did not stop on SIGINT" in such a run)."""
RATE = 24_000
NULL_ASOUNDRC = "pcm.!default { type null  hint { show on } }\n"
ACK_LINE = re.compile(r"(ack|barge_in) (\S+) .*?played_ms=(\d+) played_frames=(\d+) "
                      r"rendered_frames=(\d+) latency_frames=(\d+) block=(\d+)")


# ---------------------------------------------------------------------------- the ledger

def test_played_position_is_rendered_frames_minus_the_output_latency() -> None:
    ledger = PlaybackLedger(RATE)
    ledger.enqueue("r1", np.full(1000, 0.5, dtype=np.float32))
    block = np.empty((256, 1), dtype=np.float32)
    ledger.render(block)
    assert np.all(block == 0.5)
    assert ledger.rendered_frames("r1") == 256
    assert ledger.played_frames("r1", latency_frames=100) == 156
    for _ in range(2):
        ledger.render(block)
    assert ledger.rendered_frames("r1") == 768
    ledger.render(block)  # the last 232 frames, then silence
    assert np.all(block[:232] == 0.5) and np.all(block[232:] == 0.0)
    assert ledger.rendered_frames("r1") == 1000
    assert ledger.played_frames("r1", latency_frames=100) == 1000 - 100 + 24
    ledger.render(block)  # silence pushes the end past the latency: all of it was heard
    assert ledger.played_frames("r1", latency_frames=100) == 1000


def test_an_underrun_does_not_count_as_played_audio() -> None:
    ledger = PlaybackLedger(RATE)
    block = np.empty((100, 1), dtype=np.float32)
    ledger.enqueue("r1", np.ones(50, dtype=np.float32))
    ledger.render(block)
    for _ in range(5):  # 500 frames of silence: the audio had not arrived
        ledger.render(block)
    ledger.enqueue("r1", np.ones(100, dtype=np.float32))
    ledger.render(block)
    assert ledger.stream_frames == 700
    assert ledger.played_frames("r1", latency_frames=0) == 150
    assert ledger.played_frames("r1", latency_frames=50) == 100  # stream 650: 50 into piece 2
    assert ledger.played_frames("r1", latency_frames=200) == 50  # inside the underrun


def test_stop_and_a_newer_response_silence_a_reply_at_once() -> None:
    ledger = PlaybackLedger(RATE)
    block = np.empty((100, 1), dtype=np.float32)
    ledger.enqueue("r1", np.ones(1000, dtype=np.float32))
    ledger.render(block)
    assert ledger.enqueue("r2", np.full(300, 0.25, dtype=np.float32)) == "r1"
    ledger.enqueue("r1", np.ones(100, dtype=np.float32))  # late audio of r1 is dropped
    ledger.render(block)
    assert np.all(block == 0.25)
    assert ledger.rendered_frames("r1") == 100 and ledger.received_frames("r1") == 1000
    ledger.stop("r2")
    ledger.render(block)
    assert np.all(block == 0.0)
    assert ledger.rendered_frames("r2") == 100
    ledger.enqueue("r2", np.ones(100, dtype=np.float32))  # late audio of a stopped reply
    ledger.render(block)
    assert np.all(block == 0.0) and ledger.rendered_frames("r2") == 100


def test_the_gate_passes_real_time_and_drops_what_runs_ahead_of_the_clock() -> None:
    now = [0.0]
    gate = RealTimeGate(RATE, clock=lambda: now[0])
    assert gate.admit(RATE) == RATE // 2  # 500 ms slack at the start
    assert gate.admit(RATE) == 0
    now[0] = 1.0
    assert gate.admit(RATE) == RATE
    assert gate.dropped == RATE + RATE // 2
    now[0] = 0.0
    device = RealTimeGate(RATE, clock=lambda: now[0])
    for step in range(1, 1001):  # a real device: 10 ms blocks, late or early by 5 ms
        now[0] = step / 100 + (0.005 if step % 2 else -0.005)
        assert device.admit(RATE // 100) == RATE // 100
    assert device.dropped == 0


# ---------------------------------------------------------------------------- barge-in rules

def to_24k(pcm_16k: np.ndarray) -> np.ndarray:
    return resample(pcm_16k, speech_fixtures.RATE_HZ, RATE)


def run_detector(mic: np.ndarray, reply: np.ndarray | None) -> int | None:
    """Feed `mic` (24 kHz) in 40 ms pieces while `reply` (24 kHz, the same timeline: reply
    sample k plays when mic sample k is captured) plays; the ms at which it barged in."""
    detector = BargeInDetector(RATE)
    reference = None
    if reply is not None:
        reference = EchoReference(RATE)
        reference.append(reply)
    piece = RATE * 40 // 1000
    for start in range(0, mic.size - piece + 1, piece):
        playing_ms = (start + piece) * 1000 // RATE if reply is not None else None
        if detector.feed(mic[start:start + piece], playing_ms, reference):
            return (start + piece) * 1000 // RATE
    return None


def test_a_person_talking_over_the_assistant_barges_in_after_the_pages_200_ms() -> None:
    person = to_24k(speech_fixtures.speech("Wait, stop, that is not what I asked."))
    reply = to_24k(speech_fixtures.speech(
        "The history of radio begins with the work of many inventors across the world, "
        "and the first broadcasts reached ships at sea."))
    lead = RATE  # the person starts 1 s into the reply
    mic = np.concatenate((np.zeros(lead, dtype=np.float32), person))
    echo = np.concatenate((reply, np.zeros(max(0, mic.size - reply.size), dtype=np.float32)))
    mic = mic + 0.05 * echo[:mic.size]
    onset_ms = 1000 + speech_fixtures.active_span_ms(
        speech_fixtures.speech("Wait, stop, that is not what I asked."))[0]
    fired = run_detector(mic, echo[:mic.size])
    assert fired is not None
    assert onset_ms + MIN_SPEECH_MS - 40 <= fired <= onset_ms + 600


def test_the_assistants_own_voice_from_the_speaker_does_not_barge_in() -> None:
    reply = to_24k(speech_fixtures.speech(
        "Tides rise and fall twice a day, pulled by the moon and the sun."))
    delay = RATE * 120 // 1000  # the microphone hears the speaker 120 ms late
    mic = np.concatenate((np.zeros(delay, dtype=np.float32), 0.5 * reply))
    assert run_detector(mic, np.concatenate((reply, np.zeros(delay, dtype=np.float32)))) is None


def test_speech_with_no_reply_playing_is_a_turn_for_the_server_not_a_barge_in() -> None:
    person = to_24k(speech_fixtures.speech("Tell me about the planets."))
    assert run_detector(np.concatenate((np.zeros(RATE // 2, dtype=np.float32), person)),
                        None) is None


# ---------------------------------------------------------------------------- the command

@pytest.fixture
def null_audio_home(tmp_path: Path) -> Path:
    """A HOME whose `.asoundrc` makes ALSA's null PCM the default device."""
    (tmp_path / ".asoundrc").write_text(NULL_ASOUNDRC, encoding="utf-8")
    return tmp_path


class TalkProcess:
    """`python -m server talk` in a subprocess: lines in, stdout and stderr lines collected."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        assert process.stdout is not None and process.stderr is not None
        self._readers = [asyncio.create_task(self._read(process.stdout, self.stdout)),
                         asyncio.create_task(self._read(process.stderr, self.stderr))]

    @classmethod
    async def start(cls, home: Path, *args: str, api_key: str | None = None) -> TalkProcess:
        env = {**os.environ, "HOME": str(home), "PYTHONUNBUFFERED": "1"}
        env.pop("DUPLEX_API_KEY", None)
        if api_key is not None:
            env["DUPLEX_API_KEY"] = api_key
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", TALK_FROM_A_TERMINAL, *args, cwd=ROOT, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        return cls(process)

    @staticmethod
    async def _read(stream: asyncio.StreamReader, into: list[str]) -> None:
        while line := await stream.readline():
            into.append(line.decode().rstrip("\n"))

    async def type(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode() + b"\n")
        await self.process.stdin.drain()

    async def wait_line(self, lines: list[str], pattern: str, timeout: float = 30.0,
                        after: int = 0) -> re.Match[str]:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for line in lines[after:]:
                if match := re.search(pattern, line):
                    return match
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"no line matching {pattern!r} in {lines}")
            await asyncio.sleep(0.05)

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(2)  # SIGINT: the person pressed Ctrl-C
        try:
            async with asyncio.timeout(20):
                code = await self.process.wait()
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
            raise AssertionError(f"talk did not stop on SIGINT: {self.stderr[-5:]}") from None
        await asyncio.gather(*self._readers)
        return code


def acks(lines: list[str], response_id: str | None = None) -> list[tuple[str, str, int, ...]]:
    """(kind, response_id, played_ms, played, rendered, latency, block) of each debug line."""
    found = []
    for line in lines:
        if match := ACK_LINE.search(line):
            kind, rid, *numbers = match.groups()
            if response_id in (None, rid):
                found.append((kind, rid, *map(int, numbers)))
    return found


LONG = ("say: alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike "
        "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
        "zulu.")


async def test_talk_plays_acks_what_the_callback_consumed_and_barges_in_on_enter(
    start_server, null_audio_home: Path,
) -> None:
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    talk = await TalkProcess.start(null_audio_home, "--url", server.ws_url,
                                   "--log-level", "debug")
    try:
        await talk.wait_line(talk.stdout, r"^connected to ")
        await talk.type(LONG)
        first = await talk.wait_line(talk.stderr, r"ack (\S+) played_ms=([1-9]\d{3,})")
        response_id = first.group(1)
        await talk.type("")  # Enter: stop the assistant
        stop = await talk.wait_line(talk.stderr, r"barge_in (\S+) source=button played_ms=(\d+)")
        assert stop.group(1) == response_id
        cut = await talk.wait_line(talk.stdout, r"^\[cut at (\d+) ms by marks\] heard: '([^']*)'")
        await talk.type("say: Short and sweet.")
        await talk.wait_line(talk.stdout, r"^assistant: Short and sweet\.")
        await talk.wait_line(talk.stderr, rf"ack (?!{response_id})\S+ played_ms=1200 ")
        prompt_count = len(server.responder.prompts)
        await talk.type("What did you say?")
        while len(server.responder.prompts) == prompt_count:
            await asyncio.sleep(0.05)
    finally:
        code = await talk.stop()
    assert code == 0, talk.stderr
    reports = acks(talk.stderr, response_id)
    assert len(reports) >= 3
    for _, _, played_ms, played, rendered, latency, block in reports:
        # The ACKed position is what the callback consumed minus the output latency, within
        # one callback block, and never more than was consumed.
        assert latency > 0 and block > 0
        assert played <= rendered
        assert rendered - latency - block <= played <= rendered - latency + block or \
            played == rendered
        assert played_ms == played * 1000 // RATE
    barge_in = reports[-1]
    assert barge_in[0] == "barge_in"
    assert [r[2] for r in reports] == sorted(r[2] for r in reports)
    played_ms = barge_in[2]
    assert int(cut.group(1)) == played_ms
    words = LONG.removeprefix("say: ").rstrip(".").split()
    assert cut.group(2) == " ".join(words[: played_ms // 400])
    # The history the next prompt sees holds that cut, as heard.
    turns = [(t.role, t.text, t.interrupted) for t in server.responder.prompts[-1].turns]
    assert ("assistant", cut.group(2), True) in turns
    assert ("assistant", "Short and sweet.", False) in turns


async def test_a_reply_played_to_its_end_is_acked_in_full(start_server,
                                                         null_audio_home: Path) -> None:
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    talk = await TalkProcess.start(null_audio_home, "--url", server.ws_url, "--no-mic",
                                   "--log-level", "debug")
    try:
        await talk.wait_line(talk.stdout, r"^connected to ")
        await talk.type("say: one two three four five six seven eight.")
        await talk.wait_line(talk.stderr, r"ack \S+ played_ms=3200 ")
        await talk.type("say: nine.")
        await talk.wait_line(talk.stdout, r"^assistant: nine\.")
    finally:
        code = await talk.stop()
    assert code == 0
    final = next(report for report in acks(talk.stderr) if report[2] == 3200)
    assert final[3:5] == (3200 * 24, 3200 * 24)  # every frame received was consumed and heard
    assert not [line for line in talk.stdout if line.startswith("[cut")]
    turns = [(t.role, t.text, t.interrupted) for t in server.responder.prompts[-1].turns]
    assert ("assistant", "one two three four five six seven eight.", False) in turns


async def test_no_audio_device_is_one_clear_line_and_exit_code_3(tmp_path: Path) -> None:
    talk = await TalkProcess.start(tmp_path, "--url", "ws://127.0.0.1:9/v1/realtime")
    async with asyncio.timeout(30):
        code = await talk.process.wait()
    await asyncio.gather(*talk._readers)
    assert code == 3
    assert talk.stderr == [
        "duplex-demo talk: no audio output device: Error querying device -1"]


async def test_an_unreachable_server_is_one_clear_line_and_exit_code_1(
    null_audio_home: Path,
) -> None:
    talk = await TalkProcess.start(null_audio_home, "--url", "ws://127.0.0.1:9/v1/realtime")
    async with asyncio.timeout(30):
        code = await talk.process.wait()
    await asyncio.gather(*talk._readers)
    assert code == 1
    assert len(talk.stderr) == 1
    assert talk.stderr[0].startswith(
        "duplex-demo talk: cannot connect to ws://127.0.0.1:9/v1/realtime: ")


async def test_no_portaudio_library_is_one_clear_line_and_exit_code_3(tmp_path: Path) -> None:
    """A machine without libportaudio2: the library lookup of `sounddevice` finds nothing (the
    one thing simulated here; CI cannot uninstall the package), so its import raises."""
    hide = ("import ctypes.util, sys; found = ctypes.util.find_library; "
            "ctypes.util.find_library = lambda name: None if 'portaudio' in name "
            "else found(name); from server.__main__ import main; main(['talk'])")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", hide, cwd=ROOT, env={**os.environ, "HOME": str(tmp_path)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(30):
        stdout, stderr = await process.communicate()
    assert process.returncode == 3
    assert stdout == b""
    assert stderr.decode().splitlines() == [
        "duplex-demo talk: PortAudio is not installed (PortAudio library not found); install "
        "it, e.g. `sudo apt-get install libportaudio2`"]


async def test_the_api_key_comes_from_the_environment(start_server,
                                                     null_audio_home: Path) -> None:
    server = await start_server(api_key="s3cret-key")
    refused = await TalkProcess.start(null_audio_home, "--url", server.ws_url, "--no-mic")
    async with asyncio.timeout(30):
        assert await refused.process.wait() == 1
    await asyncio.gather(*refused._readers)
    assert len(refused.stderr) == 1 and "HTTP 401" in refused.stderr[0]
    talk = await TalkProcess.start(null_audio_home, "--url", server.ws_url, "--no-mic",
                                   api_key="s3cret-key")
    try:
        await talk.wait_line(talk.stdout, r"^connected to ")
    finally:
        assert await talk.stop() == 0


class SimulatedSoundCard:
    """A sound card with a clock, simulated in this process: a thread runs the client's
    callback every 10 ms of wall time with 240-frame blocks; the microphone delivers silence
    except what `say` queues. The null device cannot say anything (its capture is silence and
    has no clock), so the one test of a spoken barge-in end to end uses this; the stream code
    above it is the client's own."""

    latency = 0.02

    def __init__(self) -> None:
        self.callback = None
        self.mic_frames = 0
        self._queued = np.zeros(0, dtype=np.float32)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self, rate_hz: int, microphone: bool, callback) -> SimulatedSoundCard:
        assert rate_hz == RATE and microphone
        self.callback = callback
        return self

    def say(self, pcm: np.ndarray) -> int:
        """Queue `pcm` (24 kHz) on the microphone; returns the mic frame where it starts."""
        with self._lock:
            start = self.mic_frames + self._queued.size
            self._queued = np.concatenate((self._queued, pcm.astype(np.float32)))
            return start

    def __enter__(self) -> SimulatedSoundCard:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()

    def _run(self) -> None:
        block = RATE // 100
        start = time.monotonic()
        while not self._stop.is_set():
            while self.mic_frames + block <= (time.monotonic() - start) * RATE:
                with self._lock:
                    mic = np.zeros(block, dtype=np.float32)
                    taken = self._queued[:block]
                    mic[:taken.size] = taken
                    self._queued = self._queued[taken.size:]
                    self.mic_frames += block
                self.callback(mic.reshape(-1, 1), np.zeros((block, 1), np.float32), block,
                              None, None)
            time.sleep(0.005)


async def test_talking_over_the_assistant_stops_it_through_the_clients_vad(
    start_server, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """A spoken prompt becomes a turn (server VAD, faster-whisper); a person talking over the
    reply is heard by the client's VAD, which stops playback and sends `barge_in` (source
    `vad`) no sooner than the page's 200 ms into the speech; the cut is printed."""
    server = await start_server(tts="uniform", calibration="marks")
    card = SimulatedSoundCard()
    monkeypatch.setattr(client_module, "check_devices", lambda microphone: None)
    monkeypatch.setattr(client_module, "open_stream", card.open)
    caplog.set_level(logging.DEBUG, logger="duplex_demo.talk")
    out = io.StringIO()
    talk = asyncio.create_task(TalkClient(TalkOptions(url=server.ws_url), out=out).run())

    async def until(condition, timeout: float = 60.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not condition():
            assert not talk.done(), talk
            assert asyncio.get_running_loop().time() < deadline, out.getvalue()
            await asyncio.sleep(0.02)

    def logged(pattern: str) -> list[re.Match[str]]:
        return [m for r in caplog.records if (m := re.search(pattern, r.getMessage()))]

    try:
        await until(lambda: "connected to" in out.getvalue())
        card.say(to_24k(speech_fixtures.place(
            speech_fixtures.speech("Tell me about the planets."), lead_ms=300, tail_ms=0)))
        await until(lambda: [m for m in logged(r"ack \S+ played_ms=(\d+)")
                             if int(m.group(1)) >= 1200])
        interruption = speech_fixtures.speech("Wait, stop, that is not what I asked.")
        onset = card.say(to_24k(interruption)) + round(
            speech_fixtures.active_span_ms(interruption)[0] * RATE / 1000)
        await until(lambda: logged(r"barge_in \S+ source=vad"))
        fired_by = card.mic_frames
        await until(lambda: "by marks]" in out.getvalue())
    finally:
        talk.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await talk
    printed = out.getvalue()
    assert "error:" not in printed  # e.g. no rate_limit_exceeded after the VAD model loaded
    assert re.search(r"^you: .*planet", printed, re.MULTILINE | re.IGNORECASE), printed
    assert "[stopped the assistant (vad) at" in printed
    stop = logged(r"barge_in (\S+) source=vad played_ms=(\d+)")[0]
    assert fired_by >= onset + MIN_SPEECH_MS * RATE // 1000
    cut = re.search(r"^\[cut at (\d+) ms by marks\] heard: ", printed, re.MULTILINE)
    assert cut is not None, printed
    assert int(cut.group(1)) == int(stop.group(2))
    # The reply the server answered was the spoken prompt's, and its history holds the cut.
    assert server.responder.prompts[0].turns[-1].text == re.search(
        r"^you: (.*)$", printed, re.MULTILINE).group(1)
