"""Shared fixtures: a real demo server on loopback, with voices loaded once per test run."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import settings

from calibration.asr import Transcriber
from server.app import DemoServer
from server.config import ServerConfig, build_services, server_options
from server.connection import Connection
from server.responders.demo import DemoResponder
from server.responders.prompt import Prompt
from server.speech.engines import create_synthesizer
from server.speech.synthesizer import SpeechChunk, SpeechSynthesizer, StopSignal

# Hypothesis profiles, chosen by the environment variable HYPOTHESIS_PROFILE. "ci" (the default)
# replays the same examples on every run and machine, with no example database, so a fresh
# clone tests exactly what a developer's checkout tests. "fuzz" draws new random examples, many
# of them (HYPOTHESIS_MAX_EXAMPLES, default 5000), and keeps failures in .hypothesis/ to replay
# them: `make fuzz-properties`. Neither has a deadline: the properties are about state, not
# time, and on a shared 2-core machine one example can take far over hypothesis's 200 ms.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True,
                          deadline=None)
settings.register_profile("fuzz", derandomize=False, print_blob=True, deadline=None,
                          max_examples=int(os.environ.get("HYPOTHESIS_MAX_EXAMPLES", "5000")))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@functools.cache
def loaded_synthesizer(name: str) -> SpeechSynthesizer:
    """A warmed synthesizer, loaded once per test process (Piper is deterministic here)."""
    synthesizer = create_synthesizer(name, deterministic=True)
    synthesizer.warm_up()
    return synthesizer


class RecordingResponder:
    """The real demo responder, keeping every prompt it was given (tests read them)."""

    def __init__(self) -> None:
        self.inner = DemoResponder()
        self.prompts: list[Prompt] = []

    def respond(self, prompt: Prompt) -> Any:
        self.prompts.append(prompt)
        return self.inner.respond(prompt)


class SlowSynthesizer:
    """A real synthesizer whose every segment takes `delay_s` longer (a busy TTS server)."""

    def __init__(self, inner: SpeechSynthesizer, delay_s: float) -> None:
        self.inner = inner
        self.delay_s = delay_s
        self.name = inner.name
        self.sample_rate_hz = inner.sample_rate_hz

    def warm_up(self) -> None:
        self.inner.warm_up()

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        for chunk in self.inner.synthesize(text, stop):
            time.sleep(self.delay_s)
            yield chunk


class RunningServer:
    """A started demo server: its URLs and the responder that records prompts (None for a
    server whose replies come from an LLM: `llm_url`)."""

    def __init__(self, demo: DemoServer, responder: RecordingResponder | None) -> None:
        self.demo = demo
        self.responder = responder
        self.http_url = f"http://127.0.0.1:{demo.port()}"
        self.ws_url = f"ws://127.0.0.1:{demo.port()}/v1/realtime"


@pytest.fixture
async def start_server() -> AsyncIterator[Callable[..., Any]]:
    """Factory: `await start_server(tts="uniform", calibration="marks", lead_ms=...)`.

    Starts a real `DemoServer` on 127.0.0.1 (free port) in this test's event loop; stops every
    server it started when the test ends. `tts_delay_s` wraps the voice in `SlowSynthesizer`,
    `wrap_tts` in whatever it returns for the loaded voice (fault injection, observation);
    `input_transcriber` replaces the ASR of the person's turns (`build_services`); with
    `llm_url` the replies come from that LLM server (`LLMResponder`), not the demo responder.
    """
    started: list[DemoServer] = []

    async def start(tts: str = "uniform", tts_delay_s: float = 0.0,
                    input_transcriber: Transcriber | None = None,
                    wrap_tts: Callable[[SpeechSynthesizer], SpeechSynthesizer] | None = None,
                    **overrides: Any) -> RunningServer:
        config = replace(ServerConfig(port=0, tts=tts, calibration="marks",
                                      deterministic=True), **overrides)
        synthesizer = await asyncio.to_thread(loaded_synthesizer, tts)
        if tts_delay_s:
            synthesizer = SlowSynthesizer(synthesizer, tts_delay_s)
        if wrap_tts is not None:
            synthesizer = wrap_tts(synthesizer)
        responder = None if overrides.get("llm_url") else RecordingResponder()
        services = await asyncio.to_thread(
            build_services, config, synthesizer=synthesizer, responder=responder,
            input_transcriber=input_transcriber)
        demo = DemoServer(services, config.allow_origin, server_options(config))
        await demo.start("127.0.0.1", 0)
        started.append(demo)
        return RunningServer(demo, responder)

    yield start
    for demo in started:
        assert demo.server is not None
        demo.server.close()
        await demo.server.wait_closed()


@pytest.fixture
def served_connections(monkeypatch: pytest.MonkeyPatch) -> list[Connection]:
    """Every `Connection` the test's servers run, in the order their sessions started, kept
    after they end: tests watch a session's parts (`Connection.receiver`, `sender`,
    `generations`, `speaker`, `turns`) from outside."""
    connections: list[Connection] = []
    run = Connection.run

    async def run_and_keep(connection: Connection) -> None:
        connections.append(connection)
        await run(connection)

    monkeypatch.setattr(Connection, "run", run_and_keep)
    return connections
