"""One server process: load the models, serve until SIGINT/SIGTERM, shut down gracefully; on
the event loop `--event-loop` names. The whole server with `--workers 1` (the default), each
worker of `--workers N` (`server.workers`)."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import signal
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized

import uvloop

from server.app import DemoServer
from server.config import ServerConfig, build_services, server_options
from server.logs import configure_logging
from server.metrics import ServerMetrics
from server.session_slots import SessionSlots


@dataclass(frozen=True, slots=True)
class WorkerLink:
    """What a worker of `--workers` shares with the others and its parent (`server.workers`).

    Attributes:
        sessions: the count of open sessions that `--max-sessions` limits across workers.
        metrics_dir: the metrics directory of every worker (`ServerMetrics(shared_dir=...)`).
        parent: the worker's end of a pipe to its parent: the worker sends its port on it once
            it listens, and stops when the pipe becomes readable (the parent never writes, so
            that is its end closing: the parent died, e.g. killed with SIGKILL).
    """

    sessions: Synchronized[int]
    metrics_dir: str
    parent: Connection


def run(config: ServerConfig, worker: WorkerLink | None = None) -> None:
    """Serve `config` in this process (`serve_forever`) on its `--event-loop`. A worker
    ignores SIGINT: its parent stops it with SIGTERM, and a terminal's Ctrl-C reaches every
    process of the group, the parent included."""
    if worker is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    with asyncio.Runner(loop_factory=event_loop_factory(config.event_loop)) as runner:
        runner.run(serve_forever(config, worker))


def event_loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The `--event-loop` named `name`: "uvloop" (`uvloop.new_event_loop`: libuv's loop, whose
    socket callbacks, timers and transports are compiled, not Python) or "asyncio" (the
    standard library's loop)."""
    return uvloop.new_event_loop if name == "uvloop" else asyncio.new_event_loop


async def serve_forever(config: ServerConfig, worker: WorkerLink | None = None) -> None:
    """Load the models, serve until SIGINT/SIGTERM; then close every session with code 1001
    (`DemoServer.shutdown`) and return.

    Alone (`worker` None) it prints the URL once it listens. As a worker it binds the port
    with SO_REUSEPORT beside the other workers, takes its sessions from their shared count,
    keeps its metrics in their shared directory, leaves `--metrics-port` to the parent, sends
    its port to the parent instead of printing, and also stops when the parent is gone.
    """
    configure_logging(config.log_level, config.log_format)
    services = await asyncio.to_thread(build_services, config)
    options = server_options(config)
    metrics = slots = None
    if worker is not None:
        options = dataclasses.replace(options, metrics_port=None)
        metrics = ServerMetrics(shared_dir=worker.metrics_dir)
        slots = SessionSlots(config.max_sessions, worker.sessions)
    demo = DemoServer(services, config.allow_origin, options, metrics, slots)
    await demo.start(config.host, config.port, reuse_port=worker is not None)
    freeze_startup_objects()
    if worker is None:
        print(listening_line(config.host, demo.port(), demo.metrics_port()), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if worker is not None:
        worker.parent.send(demo.port())
        loop.add_reader(worker.parent.fileno(), stop.set)
    for signum in (signal.SIGTERM,) if worker is not None else (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await demo.shutdown()


def listening_line(host: str, port: int, metrics_port: int | None) -> str:
    """The line the server prints once it listens (scripts read the URL from it)."""
    host = f"[{host}]" if ":" in host else host
    metrics = "" if metrics_port is None else f", /metrics also at http://{host}:{metrics_port}"
    return f"duplex-demo listening on http://{host}:{port} (WebSocket at /v1/realtime{metrics})"


GC_THRESHOLDS = (200, 10, 300)
"""The cyclic garbage collector's thresholds while serving (`gc.set_threshold`; CPython's
defaults: (700, 10, 10)). Every collection runs on the event loop while every session waits;
measured under `benchmarks.bench_load` (200-300 sessions, side by side, every collection timed
by a `gc.callbacks` hook on the loop thread's CPU clock):

- youngest generation, 200 instead of 700 allocations: in steady load its collections walked
  7,700-12,300 objects each (CPython counts deallocations of older objects against the
  threshold, so the young generation grows far past it: sessions' awaits, coroutines, futures
  and callbacks, ~45 per session), 4-10 ms of CPU; with 200 the 99th percentile went from
  7.0-8.0 to 3.2-3.7 ms and the middle generation's largest from 12.4-25.3 to 9.2-13.1 ms
  (three runs), for 40-80 % more collector CPU in all (under 1 % of a core);
- oldest generation, a full collection after 300 collections of the middle one instead of 10
  (and, as before, once a quarter of it is new): it walks every session's objects and found 0
  of 26,759-74,994 (sessions leave no reference cycles: `tests/test_connection_teardown.py`)
  in 23-79 ms of CPU, 1-2 per ~40 s of load with the defaults; with 300 (about 5 min of
  200-session load) none ran during the load steps. Cycles that die young are freed by the
  younger collections as before."""


def freeze_startup_objects() -> None:
    """Move every object alive now (modules, models, the services) out of the cyclic garbage
    collector's reach (`gc.freeze`, after a last full collection so that no garbage is
    frozen), and set `GC_THRESHOLDS`: they live as long as the process, and a full collection
    would otherwise walk them all each time while every session waits. Measured under
    `benchmarks.bench_load` (uniform voice, 100 sessions): about 100,000 of the 117,000
    tracked objects were there at startup, and each full collection took 52 ms of CPU on the
    event loop; frozen, the collector tracks the sessions' ~20,000-30,000 objects only."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
