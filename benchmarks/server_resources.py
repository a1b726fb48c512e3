"""`bench_server` tables 4 and 5: server CPU per streaming session and RSS of a fresh process.

Table 4 runs streaming sessions (clients in a child process) and measures the server process's
CPU over a window, split into its event loop and its worker threads (TTS, ASR), per second of
audio synthesized. Table 5 loads what the server loads, step by step, in a fresh child process
(`--role rss`) and reads its VmRSS.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from benchmarks.measuring import PROJECT_ROOT, cpu_snapshot, other_load, proc_field, verdict
from benchmarks.server_clients import ACK_INTERVAL_S, CHILD
from benchmarks.session_client import run_clients, serving
from benchmarks.tables import print_table
from calibration.local_asr import LocalWhisperTranscriber
from server.app import DemoServer
from server.config import ServerConfig, build_services
from server.responders.demo_topics import TOPICS
from server.services import Services
from server.speech.synthesizer import SpeechChunk, SpeechSynthesizer, StopSignal

CPU_PCT_PER_SESSION = 1.0
CPU_SETTLE_S = 2.0
"""Wait after every streaming session got its first audio before the CPU window opens."""


class CountingSynthesizer:
    """A `SpeechSynthesizer` passing another one's chunks through, counting their samples
    (`samples`, at the inner synthesizer's rate; updated under a lock, from worker threads)."""

    def __init__(self, inner: SpeechSynthesizer) -> None:
        self.inner = inner
        self.name = inner.name
        self.sample_rate_hz = inner.sample_rate_hz
        self.samples = 0
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Warm up the inner synthesizer."""
        self.inner.warm_up()

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        """The inner synthesizer's chunks for `text` (stopped by `stop`), counted."""
        for chunk in self.inner.synthesize(text, stop):
            with self._lock:
                self.samples += len(chunk.pcm)
            yield chunk


async def _cpu_window(seconds: float, counter: CountingSynthesizer,
                      window: dict[str, float]) -> None:
    """Wait CPU_SETTLE_S, then measure this process for `seconds`: fills `window` with cpu
    (process CPU s), loop (main-thread CPU s, the event loop), audio (s synthesized) and
    wall (s)."""
    await asyncio.sleep(CPU_SETTLE_S)
    cpu, loop, wall = time.process_time(), time.thread_time(), time.perf_counter()
    samples = counter.samples
    await asyncio.sleep(seconds)
    window.update(cpu=time.process_time() - cpu, loop=time.thread_time() - loop,
                  wall=time.perf_counter() - wall,
                  audio=(counter.samples - samples) / counter.sample_rate_hz)


async def _drain_after_close(counter: CountingSynthesizer) -> tuple[float, float]:
    """After every session closed: (seconds until this process used < 0.1 core over a 0.5 s
    interval, at most 60 s; audio seconds synthesized meanwhile, for nobody)."""
    closed, samples = time.perf_counter(), counter.samples
    while time.perf_counter() - closed < 60:
        cpu = time.process_time()
        await asyncio.sleep(0.5)
        if time.process_time() - cpu < 0.05:
            break
    busy_s = max(0.0, time.perf_counter() - closed - 0.5)
    return busy_s, (counter.samples - samples) / counter.sample_rate_hz


async def _stream_run(services: Services, sessions: int, seconds: float,
                      seed: int) -> dict[str, Any]:
    """One CPU run: the `_cpu_window` figures plus per-session client stats ("sessions") and
    the drain after close ("drain_s", "drain_audio_s")."""
    window: dict[str, Any] = {}
    counter = CountingSynthesizer(services.synthesizer)
    async with serving(DemoServer(replace(services, synthesizer=counter))) as url:
        result = await run_clients(CHILD, {"mode": "stream", "url": url, "seed": seed,
                                           "sessions": sessions},
                                   functools.partial(_cpu_window, seconds, counter, window))
    window["drain_s"], window["drain_audio_s"] = await _drain_after_close(counter)
    window["sessions"] = result["sessions"]
    return window


async def measure_cpu(engines: dict[str, Services], sessions: int, seconds: float,
                      seed: int) -> None:
    """Table 4: server process CPU per streaming session (clients in a child process)."""
    rows = []
    per_session: dict[str, float] = {}
    load = cpu_snapshot()
    for label, services in engines.items():
        run = await _stream_run(services, sessions, seconds, seed)
        share = 100 * run["cpu"] / (sessions * run["wall"])
        per_session[label] = share
        other = run["cpu"] - run["loop"]
        tts = f"{100 * other / run['audio']:.1f}" if run["audio"] >= 1 else "-"
        held = (f"{len(os.sched_getaffinity(0)) * run['audio'] / other:.0f}"
                if run["audio"] >= 1 and other > 0 else "-")
        is_uniform = label.startswith("uniform")
        rows.append([
            label, sessions, run["wall"], run["cpu"], run["loop"], other, run["audio"], share,
            100 * run["loop"] / (sessions * run["wall"]), tts, held,
            max(s["underrun_ms"] for s in run["sessions"]),
            sum(s["errors"] for s in run["sessions"]), run["drain_s"], run["drain_audio_s"],
            f"<={CPU_PCT_PER_SESSION:.0f} %" if is_uniform else "info (TTS incl.)",
            verdict(share <= CPU_PCT_PER_SESSION) if is_uniform else "-"])
    labels = list(per_session)
    rows.append([f"{labels[1]} - {labels[0]} (TTS share)", "", "", "", "", "", "",
                 per_session[labels[1]] - per_session[labels[0]], "", "", "", "", "", "", "",
                 "info", "-"])
    print_table(
        f"4. Server CPU per streaming session: {sessions} concurrent long replies, real-time "
        f"ACKs every {ACK_INTERVAL_S * 1000:.0f} ms, window opens {CPU_SETTLE_S:.0f} s after all "
        "got audio; CPU = time.process_time() of the server process (loop = main-thread "
        "time.thread_time(), other = worker threads: TTS, ASR; TTS %/RT session = other cpu s "
        "per s of audio synthesized in the window; RT sessions held = cores / (other cpu s per "
        "s of audio): sessions speaking all the time that the cores could synthesize for, "
        "nothing left over; after close = server still busy once every client disconnected, "
        "and audio synthesized then); " + other_load(load),
        ["tts (calibration)", "sessions", "wall s", "cpu s", "loop cpu s", "other cpu s",
         "audio synth s", "% core/session", "loop %/session", "TTS %/RT session",
         "RT sessions held",
         "max underrun ms", "errors", "busy after close s", "audio after close s", "target",
         "PASS/FAIL"], rows)


def rss_mb(key: str = "VmRSS") -> float:
    """This process's /proc/self/status `key` (VmRSS, VmHWM, ...) in MiB."""
    return int(proc_field("/proc/self/status", key).split()[0]) / 1024


def rss_main() -> None:
    """Child role: load what the server loads, step by step; print JSON [(stage, MiB)]."""
    rows = [("python + imports (server, calibration, numpy, websockets, faster_whisper)",
             rss_mb())]
    services = build_services(ServerConfig(port=0, tts="piper", calibration="marks"))

    async def start_and_measure() -> None:
        async with serving(DemoServer(services)):
            rows.append(("server started, Piper voice loaded + warmed (--calibration marks)",
                         rss_mb()))

    asyncio.run(start_and_measure())
    reply = TOPICS[1].text
    rate = services.synthesizer.sample_rate_hz
    pcm = np.concatenate([chunk.pcm for chunk in services.synthesizer.synthesize(reply)])
    rows.append((f"+ one {len(reply)}-char reply synthesized ({len(pcm) / rate:.0f} s of audio)",
                 rss_mb()))
    transcriber = LocalWhisperTranscriber()
    transcriber.load()
    rows.append(("+ whisper tiny.en loaded (what the default --calibration auto adds)",
                 rss_mb()))
    transcriber.transcribe_blocking(pcm[: rate * 10], rate)
    rows.append(("+ one 10 s transcription", rss_mb()))
    rows.append(("peak (VmHWM)", rss_mb("VmHWM")))
    print(json.dumps(rows), flush=True)


async def measure_rss() -> None:
    """Table 5: resident memory of a fresh process loading the server's models."""
    process = await asyncio.create_subprocess_exec(
        *CHILD, "--role", "rss", cwd=PROJECT_ROOT, stdout=asyncio.subprocess.PIPE)
    async with asyncio.timeout(180):
        output, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError("rss child process failed")
    rows = [[stage, mib, "info", "-"] for stage, mib in
            json.loads(output.decode().strip().splitlines()[-1])]
    print_table("5. RSS of a fresh process (VmRSS from /proc/self/status, MiB)",
                ["stage", "VmRSS MiB", "target", "PASS/FAIL"], rows)
