"""Scheduling benchmark: first audio while other sessions speak, the person's transcript while
calibration ASR runs, and what Piper costs per speaking session.

Starts real `server.app.DemoServer`s with the default services (`--tts piper --calibration
auto`, `server.config.build_services`) in this process on 127.0.0.1 and drives them with
`session_client.BenchClient` sessions in the same process (one clock for every timestamp). Prints
the command, the machine facts and these tables with their targets and PASS/FAIL:

1. **First audio while long replies synthesize.** A session prompts `say:` and topic prompts
   alternately (`bench_server` table 1's prompts; each reply stopped by `barge_in` at its first
   audio, the next prompt `GAP_S` later): idle, then while 1 and 3 other sessions stream long
   topic replies with real-time ACKs (so their continuation pieces keep asking for the voice).
   Target: p95 <= idle p95 + 100 ms (issue 12). A diagnosis run repeats the 3-stream condition
   with first-come turns and no preemption (`FifoTurns`: the scheduling before `VoiceTurns`).
2. **Speech stopped -> transcript while cross-checks run.** A server-VAD session streams a
   spoken question in real time (Piper speech, 40 ms appends); timed in the client from
   `input_audio_buffer.speech_stopped` to `conversation.item.input_audio_transcription
   .completed`. Idle, and while 2 other sessions barge into Piper replies 400 ms before the
   question's speech ends (each barge-in starts an `auto` marks result and its ASR
   cross-check; the question's appends pause until the barge-ins are sent, then go on in real
   time). Target: p95 <= 900 ms (issue 13). A diagnosis run uses the layout before the
   ASR queue: calibration ASR at the person's priority, on the person's 2-thread model.
3. **Piper cost per speaking session.** The demo topic replies synthesized sentence by
   sentence on one thread (Piper alone, no server; `--cost-audio-s` of audio, default 60):
   process CPU s and wall s per second of audio. A session that speaks all the time needs
   that CPU share; `nproc / cpu RTF` is how many such sessions
   the cores hold at most (no headroom for the event loop, ASR or first-audio latency).

4. **Diagnosis: what bench_server table 1's first audio is made of.** For each of its 40
   prompts, the first synthesis piece of the demo reply as the server segments it, synthesized
   alone (no server): words, seconds of audio, ms to the first chunk. Synthesis time grows
   with the piece's length; the server adds the event loop and the socket on top.

The cancel -> voice free measure (target 150 ms) is `benchmarks.bench_faults` table 2.

Run from the project root: `.venv/bin/python -m benchmarks.bench_scheduling` (about 6 minutes
on an idle 2-core machine; `--prompts`, `--turns` make it shorter).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

from benchmarks.measuring import cpu_snapshot, other_load, percentile, print_run_header, verdict
from benchmarks.prompts import LONG_PROMPTS, SAY_PROMPTS, TOPIC_PROMPTS
from benchmarks.session_client import BenchClient, serving
from benchmarks.tables import print_table
from calibration.local_asr import LocalWhisperTranscriber
from calibration.policies import auto_policy
from server.app import DemoServer
from server.config import ServerConfig, build_services
from server.responders.demo import DemoResponder
from server.responders.demo_topics import TOPICS
from server.responders.prompt import ConversationTurn, Prompt
from server.sending import wait_set
from server.services import Services
from server.speech.resampling import resample
from server.speech.segmenter import SpeechSegmenter
from server.voice_turns import VoiceTurns
from tests import speech_fixtures

SLACK_MS = 100.0
"""Target of table 1: p95 while others speak <= idle p95 + this (issue 12)."""
TRANSCRIPT_P95_MS = 900.0
"""Target of table 2 (issue 13)."""
GAP_S = 1.0
"""Pause between a stopped reply and the next prompt in table 1."""
INPUT_RATE_HZ = 24_000
APPEND_MS = 40
SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
              "silence_duration_ms": 500, "create_response": False, "interrupt_response": True}
QUESTIONS = ("What time does the museum open tomorrow?", "Tell me about the planets.",
             "How long does the bread need to rise?", "Can you read that back to me?")
BARGED_REPLY = ("say: The river rises in the hills and runs past the old mill, the bridge and "
                "the market square before it reaches the sea at the harbour.")


class FifoTurns(VoiceTurns):
    """Diagnosis: turns at the voice in arrival order, whatever the piece, never preempted
    (as before `VoiceTurns`)."""

    async def acquire(self, *, first: bool, ahead_ms: int = 0) -> None:
        """Wait for the voice as a continuation with nothing buffered: arrival order (and a
        continuation never preempts)."""
        await super().acquire(first=False, ahead_ms=0)


class EventClock(BenchClient):
    """A `BenchClient` that also keeps the arrival time of every event type (`arrivals`)."""

    def __init__(self, websocket: Any) -> None:
        super().__init__(websocket)
        self.arrivals: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        self.changed = asyncio.Event()

    def on_event(self, event: dict[str, Any], now: float) -> None:
        """Record the event's arrival, then let `BenchClient` track audio."""
        self.arrivals.setdefault(event["type"], []).append((now, event))
        self.changed.set()
        super().on_event(event, now)

    async def next_of(self, kind: str, after: int, timeout: float = 60) -> tuple[float, dict]:
        """The arrival (time, event) of the event of `kind` number `after` (0-based)."""
        deadline = time.perf_counter() + timeout
        while len(self.arrivals.get(kind, ())) <= after:
            self.changed.clear()
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"no {kind} within {timeout} s")
            await wait_set(self.changed, remaining)
        return self.arrivals[kind][after]


# ---------------------------------------------------------------------------------- table 1


async def _stream_long(url: str, index: int, started: asyncio.Event,
                       stop: asyncio.Event) -> None:
    """Stream long topic replies with real-time ACKs until `stop`."""
    client = await BenchClient.open(url)
    turn = index
    while not stop.is_set():
        response_id, _ = await client.prompt(LONG_PROMPTS[turn % len(LONG_PROMPTS)])
        turn += 1
        track = client.tracks[response_id]
        async with asyncio.timeout(120):
            await track.first_audio.wait()
        started.set()
        while not stop.is_set() and not track.done.is_set():
            await client.ack(response_id, track.played_ms(time.perf_counter()))
            await wait_set(stop, 0.15)
    await client.close()


@contextlib.asynccontextmanager
async def streaming(url: str, sessions: int) -> AsyncIterator[None]:
    """`sessions` sessions (0: none) stream long replies while the block runs."""
    if not sessions:
        yield
        return
    stop = asyncio.Event()
    started = [asyncio.Event() for _ in range(sessions)]
    tasks = [asyncio.create_task(_stream_long(url, index, started[index], stop))
             for index in range(sessions)]
    try:
        async with asyncio.timeout(120):
            await asyncio.gather(*(event.wait() for event in started))
        await asyncio.sleep(1.0)
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)


async def first_audio_samples(url: str, prompts: int) -> list[float]:
    """ms from `response.create` to the first audio delta, for `prompts` prompts (say: and
    topic alternately) in one session, each stopped at its first audio."""
    client = await BenchClient.open(url)
    texts = [text for pair in zip(SAY_PROMPTS, TOPIC_PROMPTS, strict=True) for text in pair]
    samples = []
    for text in texts[:prompts]:
        response_id, sent_at = await client.prompt(text)
        track = client.tracks[response_id]
        async with asyncio.timeout(60):
            await track.first_audio.wait()
        assert track.first_audio_at is not None
        samples.append((track.first_audio_at - sent_at) * 1000)
        await client.barge_in(response_id, 0)
        async with asyncio.timeout(10):
            await track.done.wait()
        await asyncio.sleep(GAP_S)
    await client.close()
    return samples


async def measure_first_audio(services: Services, prompts: int) -> None:
    """Table 1."""
    load = cpu_snapshot()
    runs: dict[str, list[float]] = {}
    for label, turns, others in (("idle", VoiceTurns(), 0),
                                 ("while 1 long reply streams", VoiceTurns(), 1),
                                 ("while 3 long replies stream", VoiceTurns(), 3),
                                 ("diagnosis, first-come turns: while 3 stream", FifoTurns(), 3)):
        async with (serving(DemoServer(replace(services, tts_turn=turns))) as url,
                    streaming(url, others)):
            await first_audio_samples(url, 1)
            runs[label] = await first_audio_samples(url, prompts)
    idle_p95 = percentile(runs["idle"], 95)
    rows = []
    for label, values in runs.items():
        p95 = percentile(values, 95)
        judged = label.startswith("while")
        rows.append([label, len(values), percentile(values, 50), p95, max(values),
                     p95 - idle_p95, f"p95<=idle p95+{SLACK_MS:.0f}" if judged else "info",
                     verdict(p95 <= idle_p95 + SLACK_MS) if judged else "-"])
    print_table(
        "1. First audio (response.create -> first audio delta, ms) of a session while other "
        "sessions stream long topic replies with real-time ACKs (piper, auto); say: and topic "
        f"prompts alternately, each stopped at its first audio, {GAP_S:.0f} s apart; "
        + other_load(load),
        ["condition", "n", "p50 ms", "p95 ms", "max ms", "p95 - idle p95 ms", "target",
         "PASS/FAIL"], rows)


# ---------------------------------------------------------------------------------- table 2


def _mic(question: str) -> tuple[bytes, int]:
    """A spoken question as the page sends it (PCM16 at 24 kHz: 300 ms lead, 1.2 s tail),
    and the byte offset where its speech ends."""
    speech = speech_fixtures.speech(question)
    end_ms = 300 + speech_fixtures.active_span_ms(speech)[1]
    placed = speech_fixtures.place(speech, lead_ms=300, tail_ms=1200)
    pcm16 = speech_fixtures.to_pcm16(resample(placed, speech_fixtures.RATE_HZ, INPUT_RATE_HZ))
    return pcm16, int(end_ms) * INPUT_RATE_HZ * 2 // 1000


async def _append(client: BenchClient, pcm16: bytes) -> None:
    """Append microphone audio in 40 ms frames, in real time."""
    frame = INPUT_RATE_HZ * 2 * APPEND_MS // 1000
    for start in range(0, len(pcm16), frame):
        await client.send({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(pcm16[start:start + frame]).decode()})
        await asyncio.sleep(APPEND_MS / 1000)


async def _barge_into_reply(client: BenchClient) -> None:
    """Prompt BARGED_REPLY, let 2.2 s of it play (real-time ACKs) and barge in."""
    response_id, _ = await client.prompt(BARGED_REPLY)
    track = client.tracks[response_id]
    async with asyncio.timeout(60):
        await track.first_audio.wait()
    while (played := track.played_ms(time.perf_counter())) < 2200:
        await client.ack(response_id, played)
        await asyncio.sleep(0.1)
    await client.ack(response_id, played)
    await client.barge_in(response_id, played)


async def transcript_samples(url: str, turns: int, checks: int) -> list[float]:
    """ms from `speech_stopped` to the transcript, for `turns` spoken questions; with `checks`
    other sessions barging into replies just before each question's speech ends."""
    person = await EventClock.open(url)
    await person.send({"type": "session.update",
                       "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}})
    others = [await EventClock.open(url) for _ in range(checks)]
    samples = []
    for turn in range(turns):
        pcm16, speech_end = _mic(QUESTIONS[turn % len(QUESTIONS)])
        cut = speech_end - INPUT_RATE_HZ * 2 * 400 // 1000
        await _append(person, pcm16[:cut])
        await asyncio.gather(*(_barge_into_reply(client) for client in others))
        await _append(person, pcm16[cut:])
        stopped_at, _ = await person.next_of("input_audio_buffer.speech_stopped", turn)
        done_at, _ = await person.next_of(
            "conversation.item.input_audio_transcription.completed", turn)
        samples.append((done_at - stopped_at) * 1000)
        await asyncio.sleep(1.5)
    for client in [person, *others]:
        await client.close()
    return samples


async def measure_transcripts(services: Services, turns: int) -> None:
    """Table 2."""
    load = cpu_snapshot()
    shared = LocalWhisperTranscriber(word_timestamps=True)
    before = replace(services, policy=auto_policy(shared))
    runs: dict[str, list[float]] = {}
    for label, served, checks in (("idle", services, 0),
                                  ("while 2 cross-checks run", services, 2),
                                  ("diagnosis, calibration ASR at the person's priority on "
                                   "their model: while 2 cross-checks run", before, 2)):
        async with serving(DemoServer(served)) as url:
            runs[label] = await transcript_samples(url, turns, checks)
    rows = []
    for label, values in runs.items():
        p95 = percentile(values, 95)
        rows.append([label, len(values), percentile(values, 50), p95, max(values),
                     f"p95<={TRANSCRIPT_P95_MS:.0f}",
                     verdict(p95 <= TRANSCRIPT_P95_MS)])
    print_table(
        "2. Speech stopped -> transcript (client: input_audio_buffer.speech_stopped -> "
        "conversation.item.input_audio_transcription.completed, ms; server VAD, Piper speech "
        "in real-time 40 ms appends; cross-checks: other sessions barge into Piper replies "
        "400 ms before the question's speech ends, piper + auto); " + other_load(load),
        ["condition", "n", "p50 ms", "p95 ms", "max ms", "target", "PASS/FAIL"], rows)


# ---------------------------------------------------------------------------------- table 3


def measure_piper_cost(services: Services, audio_s: float) -> None:
    """Table 3: sentences of the demo topics, in order, until `audio_s` s of audio."""
    synthesizer = services.synthesizer
    load = cpu_snapshot()
    segmenter = SpeechSegmenter(first_clause=False)
    text = " ".join(topic.text for topic in TOPICS)
    cpu, wall, audio = time.process_time(), time.perf_counter(), 0.0
    for start, end in segmenter.feed(text) + segmenter.flush():
        for chunk in synthesizer.synthesize(text[start:end]):
            audio += len(chunk.pcm) / synthesizer.sample_rate_hz
        if audio >= audio_s:
            break
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    cores = len(os.sched_getaffinity(0))
    print_table(
        "3. Piper cost per speaking session: the demo topic replies synthesized sentence by "
        "sentence on one thread (no server); a session speaking all the time needs cpu RTF "
        "of a core; "
        f"sessions held = {cores} cores / cpu RTF (an upper bound: nothing left for the event "
        "loop, ASR or first-audio latency); " + other_load(load),
        ["voice", "audio s", "wall s", "cpu s", "wall RTF", "cpu RTF",
         "% core per RT session", "speaking sessions held", "target", "PASS/FAIL"],
        [[synthesizer.name, audio, wall, cpu, wall / audio, cpu / audio, 100 * cpu / audio,
          cores * audio / cpu, "info", "-"]])


# ---------------------------------------------------------------------------------- table 4


def first_piece(prompt: str) -> str:
    """The first synthesis piece of the demo responder's reply to `prompt`, as the server
    segments it (`SpeechSegmenter`, first clause early)."""
    reply = DemoResponder().reply_text(Prompt("", (ConversationTurn("user", prompt),)))
    segmenter = SpeechSegmenter()
    start, end = (segmenter.feed(reply) + segmenter.flush())[0]
    return reply[start:end]


def measure_first_pieces(services: Services) -> None:
    """Table 4: what bench_server table 1's first audio is made of (no server)."""
    synthesizer = services.synthesizer
    load = cpu_snapshot()
    rows_by_kind: dict[str, list[tuple[int, float, float]]] = {"say": [], "topic": []}
    for kind, prompts in (("say", SAY_PROMPTS), ("topic", TOPIC_PROMPTS)):
        for prompt in prompts:
            text = first_piece(prompt)
            started = time.perf_counter()
            chunk = next(iter(synthesizer.synthesize(text)))
            ms = (time.perf_counter() - started) * 1000
            rows_by_kind[kind].append((len(text.split()), len(chunk.pcm)
                                       / synthesizer.sample_rate_hz, ms))
    rows = []
    for kind, samples in [*rows_by_kind.items(),
                          ("all", [s for v in rows_by_kind.values() for s in v])]:
        words, audio, ms = ([sample[i] for sample in samples] for i in range(3))
        rows.append([kind, len(samples), percentile(words, 50), percentile(words, 95),
                     percentile(audio, 50), percentile(audio, 95), percentile(ms, 50),
                     percentile(ms, 95), "info", "-"])
    print_table(
        "4. Diagnosis of bench_server table 1: the first synthesis piece of each of its prompts "
        "(the demo reply's first span from the server's segmenter), synthesized alone on this "
        "thread: its words, its audio (s) and the time to its first chunk (ms; the floor of "
        "the server's first audio, before the socket and the event loop); "
        + other_load(load),
        ["prompts", "n", "words p50", "words p95", "audio s p50", "audio s p95",
         "synth ms p50", "synth ms p95", "target", "PASS/FAIL"], rows)


# ---------------------------------------------------------------------------------- main


async def bench(args: argparse.Namespace) -> None:
    """Tables 3, 4, 1 and 2, each printed when done."""
    started = time.perf_counter()
    print_run_header()
    piper = await asyncio.to_thread(build_services, ServerConfig(port=0, tts="piper"))
    measure_piper_cost(piper, args.cost_audio_s)
    measure_first_pieces(piper)
    await measure_first_audio(piper, args.prompts)
    await measure_transcripts(piper, args.turns)
    print(f"\ntotal wall time: {time.perf_counter() - started:.0f} s")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=20,
                        help="measured prompts per condition of table 1")
    parser.add_argument("--turns", type=int, default=10,
                        help="spoken questions per condition of table 2")
    parser.add_argument("--cost-audio-s", type=float, default=60.0,
                        help="seconds of audio synthesized for table 3")
    asyncio.run(bench(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
