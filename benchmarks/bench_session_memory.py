"""Session memory benchmark: the resident memory one session adds to a real server after
N client events of the largest size the default limits allow.

Starts `python -m server --port 0 --tts uniform --calibration marks --max-input-speed 0`
(every limit of memory at its default; the input speed bound, a rate and not a memory limit,
off: the maximal appends below come at 80 times real time, which the default bound would
throttle and close with 1008 after 10 s) as a child process, opens one session and reads the
process's RSS (`VmRSS` of /proc/PID/status) once the idle session is open. Then sends N
events over that session at `EVENTS_PER_S` (under `--max-events-per-s`, 200; see
`SYNC_EVERY`), cycling through the kinds that make a session hold something, each as large as
it may be (or larger, to be refused):

- `input_audio_buffer.append` of the largest frame (1,048,576 characters of base64: 786 kB of
  PCM16), one event in `APPEND_EVERY`, until the buffer is full (`--max-input-audio-s`) and
  refused after that;
- `conversation.item.create` with a 64-character id and 4,000 characters of text, until the
  history is full (`--max-history-chars`), refused after that;
- `session.update` with 32,768 characters of instructions;
- `response.create` with 32,768 characters of instructions and metadata of 16 pairs of 64 and
  512 characters (a reply when none is playing and the history has room);
- frames that are refused whole: an id of 60,000 characters, a field name of 60,000, 500 kB
  of nesting.

Once the server answered every event (a probe), it reads the RSS again, closes the session and
reads it a last time. Prints one table; exit status 1 when the growth is over `TARGET_MB`.

A second table (`--cycles`, default 2000; 0: none) measures what a deleted reply leaves behind:
a new session of the same server runs `response.create`, `response.cancel` and
`conversation.item.delete` of the reply's item, one cycle after the other, and the RSS is read
after the first 200 cycles (warm-up) and after the rest: growth per cycle (bytes), target
`CYCLE_TARGET_BYTES`. `--root` runs the server of another checkout (the same Python), for a
before/after side by side.

Run from the project root: `.venv/bin/python -m benchmarks.bench_session_memory`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect

from benchmarks.measuring import print_run_header
from benchmarks.tables import print_table
from server.realtime.openai_schema import METADATA_LIMITS
from server.realtime.protocol import MAX_FRAME_CHARS, MAX_ID_CHARS, MAX_INSTRUCTIONS_CHARS

ROOT = Path(__file__).resolve().parent.parent
EVENTS_PER_S = 100
SYNC_EVERY = 50
"""Events sent at most this many per second (each at least 1 / EVENTS_PER_S s after the one
before: a late one is not made up for with a burst), and after every `SYNC_EVERY` a wait for
the server to have answered them all (a probe): a busy server that falls behind would
otherwise apply a backlog at once, past the default `--max-events-per-s` (200)."""
APPEND_EVERY = 20
"""One event in this many is a maximal audio append (the others are small next to it)."""
TARGET_MB = 50.0
"""Issue 26's target: one session adds at most this much (MB) to an idle session's RSS."""
CYCLE_TARGET_BYTES = 1024
"""Most RSS growth (bytes) per create / cancel / delete cycle: nothing of a deleted reply stays
(allocator noise over 1,800 cycles is well under this; a kept response was about 8.7 kB)."""
CYCLES_PER_S = 40
"""Pace of the cycles (3 events each: under `--max-events-per-s`, 200)."""
CYCLE_WARM_UP = 200
"""Cycles run before the first RSS reading of the cycle table (the heap's working size)."""
SETTLE_S = 2.0
"""Wait (s) before each RSS reading, for the server to finish what the events started."""


def rss_mb(pid: int) -> float:
    """Resident memory of process `pid` (MB)."""
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert match, status
    return int(match.group(1)) / 1024


async def read_all(websocket: ClientConnection, answers: Counter[str],
                   probed: asyncio.Event) -> None:
    """Read every server event (a client that stops reading is closed); count the `error`
    events by code and the responses; set `probed` at the probe's error."""
    async for message in websocket:
        event = json.loads(message)
        if event["type"] == "error" and event["error"]["event_id"] == "probe":
            probed.set()
        elif event["type"] == "error":
            answers[f"error {event['error']['code']}"] += 1
        elif event["type"] in ("response.done", "conversation.item.done", "session.updated"):
            answers[event["type"]] += 1


def events(count: int) -> list[str]:
    """`count` frames, cycling through the kinds of the module docstring."""
    audio = base64.b64encode(b"\x01\x00" * ((MAX_FRAME_CHARS - 100) * 3 // 8)).decode()
    instructions = "i" * MAX_INSTRUCTIONS_CHARS
    pairs, key_chars, value_chars = METADATA_LIMITS
    metadata = {f"{index:02d}" + "k" * (key_chars - 2): "v" * value_chars
                for index in range(pairs)}
    small = [
        lambda n: {"type": "conversation.item.create", "item": {
            "id": f"{n:08d}" + "x" * (MAX_ID_CHARS - 8), "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "t" * 4000}]}},
        lambda n: {"type": "session.update", "session": {"instructions": instructions}},
        lambda n: {"type": "response.create",
                   "response": {"instructions": instructions, "metadata": metadata}},
        lambda n: {"type": "conversation.item.retrieve", "item_id": "y" * 60_000},
        lambda n: {"type": "response.cancel", "z" * 60_000: 1},
    ]
    deep = '{"type": "playback.ack", "x": ' + "[" * 250_000 + "]" * 250_000 + "}"
    frames = []
    for n in range(count):
        if n % APPEND_EVERY == 0:
            frames.append(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
        elif n % (len(small) + 1) == len(small):
            frames.append(deep)
        else:
            frames.append(json.dumps(small[n % (len(small) + 1)](n)))
    return frames


async def cycle(websocket: ClientConnection) -> None:
    """One `response.create`, `response.cancel`, `conversation.item.delete` of its item;
    returns once the item is deleted (every other event is read and dropped)."""
    await websocket.send(json.dumps({"type": "response.create"}))
    item_id = None
    while item_id is None:
        event = json.loads(await websocket.recv())
        if event["type"] == "response.created":
            item_id = event["response"]["output"][0]["id"] if event["response"]["output"] \
                else None
        if event["type"] == "response.output_item.added":
            item_id = event["item"]["id"]
    await websocket.send(json.dumps({"type": "response.cancel"}))
    await websocket.send(json.dumps({"type": "conversation.item.delete", "item_id": item_id}))
    while True:
        event = json.loads(await websocket.recv())
        if event["type"] == "error":
            raise RuntimeError(f"cycle refused: {event}")
        if event["type"] == "conversation.item.deleted":
            return


async def paced_cycles(websocket: ClientConnection, count: int) -> None:
    """`count` cycles, each taking at least 1 / `CYCLES_PER_S` s (a slow one is not made up
    for with a burst: the server counts events in any 1 s)."""
    for _ in range(count):
        started = time.perf_counter()
        await cycle(websocket)
        await asyncio.sleep(max(0.0, started + 1 / CYCLES_PER_S - time.perf_counter()))


async def measure_cycles(url: str, pid: int, cycles: int) -> list[tuple[str, object]]:
    """The cycle table's rows (module docstring) over a new session at `url`."""
    async with connect(url, max_size=None) as websocket:
        await websocket.recv()
        await paced_cycles(websocket, CYCLE_WARM_UP)
        await asyncio.sleep(SETTLE_S)
        before = rss_mb(pid)
        started = time.perf_counter()
        await paced_cycles(websocket, cycles - CYCLE_WARM_UP)
        wall_s = time.perf_counter() - started
        await asyncio.sleep(SETTLE_S)
        after = rss_mb(pid)
    per_cycle = (after - before) * 1024 * 1024 / (cycles - CYCLE_WARM_UP)
    return [
        ("cycles (create, cancel, delete)", cycles),
        (f"RSS after {CYCLE_WARM_UP} cycles (MB)", round(before, 2)),
        ("RSS after the rest (MB)", round(after, 2)),
        ("growth per cycle (bytes)", round(per_cycle)),
        (f"target: <= {CYCLE_TARGET_BYTES} bytes per cycle",
         "met" if per_cycle <= CYCLE_TARGET_BYTES else "MISSED"),
        ("wall time of the measured cycles (s)", round(wall_s, 1)),
    ]


async def measure(count: int, cycles: int,
                  root: Path) -> tuple[list[tuple[str, object]], list[tuple[str, object]]]:
    """Start the server (of the checkout `root`), send the events, run the cycles; return
    the two tables' rows (the second empty without cycles)."""
    cycle_rows: list[tuple[str, object]] = []
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "server", "--port", "0", "--tts", "uniform",
             "--calibration", "marks", "--max-input-speed", "0"],
            cwd=root, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            assert process.stdout is not None
            line = await asyncio.to_thread(process.stdout.readline)
            match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            assert match, line
            url = f"ws://127.0.0.1:{match.group(1)}/v1/realtime"
            frames = events(count)
            sent_mb = sum(len(frame) for frame in frames) / 1e6
            async with connect(url, max_size=None) as websocket:
                answers = Counter[str]()
                probed = asyncio.Event()
                reader = asyncio.create_task(read_all(websocket, answers, probed))
                await asyncio.sleep(SETTLE_S)
                idle = rss_mb(process.pid)
                started = sent_at = time.perf_counter()
                for index, frame in enumerate(frames):
                    await asyncio.sleep(max(0.0, sent_at + 1 / EVENTS_PER_S
                                            - time.perf_counter()))
                    sent_at = time.perf_counter()
                    await websocket.send(frame)
                    if (index + 1) % SYNC_EVERY == 0 or index + 1 == len(frames):
                        probed.clear()
                        await websocket.send(json.dumps({"type": "bench.probe",
                                                         "event_id": "probe"}))
                        async with asyncio.timeout(120):
                            await probed.wait()
                wall_s = time.perf_counter() - started
                await asyncio.sleep(SETTLE_S)
                loaded = rss_mb(process.pid)
                reader.cancel()
            await asyncio.sleep(SETTLE_S)
            closed = rss_mb(process.pid)
            if cycles > CYCLE_WARM_UP:
                cycle_rows = await measure_cycles(url, process.pid, cycles)
            log.seek(0)
            tracebacks = log.read().count("Traceback")
        finally:
            process.terminate()
            process.wait()
    return [
        ("events sent", count),
        ("  of which maximal audio appends", (count + APPEND_EVERY - 1) // APPEND_EVERY),
        ("MB of frames sent", round(sent_mb, 1)),
        *((f"  answered {code}", n) for code, n in sorted(answers.items())),
        ("RSS with one idle session (MB)", round(idle, 1)),
        ("RSS after the events (MB)", round(loaded, 1)),
        ("growth (MB)", round(loaded - idle, 1)),
        (f"target: growth <= {TARGET_MB:g} MB", "met" if loaded - idle <= TARGET_MB
         else "MISSED"),
        ("RSS once the session closed (MB)", round(closed, 1)),
        ("tracebacks in the server log", tracebacks),
        ("wall time of the events (s)", round(wall_s, 1)),
    ], cycle_rows


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000,
                        help="events to send (default 10000)")
    parser.add_argument("--cycles", type=int, default=2000,
                        help="create / cancel / delete cycles of the second table (0: none)")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="checkout whose server runs (default: this one)")
    args = parser.parse_args(argv)
    print_run_header()
    print(f"server checkout: {args.root}")
    rows, cycle_rows = asyncio.run(measure(args.events, args.cycles, args.root))
    print_table("One session's memory under maximal events", ["measure", "value"], rows)
    met = dict(rows)[f"target: growth <= {TARGET_MB:g} MB"] == "met"
    if cycle_rows:
        print_table("A deleted reply's memory: create / cancel / delete cycles in one session",
                    ["measure", "value"], cycle_rows)
        met = met and dict(cycle_rows)[
            f"target: <= {CYCLE_TARGET_BYTES} bytes per cycle"] == "met"
    sys.exit(0 if met and dict(rows)["tracebacks in the server log"] == 0 else 1)


if __name__ == "__main__":
    main()
