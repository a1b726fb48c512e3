"""`--workers N`: N server processes on one port, each with an event loop (a core) of its own.

The event loop is one thread, so one process serves as many sessions as one core can
(`benchmarks/README.md`, "Load benchmark"). Here each worker is a whole server
(`server.serving.serve_forever`: its own models, voice and sessions) in a process started with
multiprocessing's spawn method (a fresh interpreter: nothing half-initialised, such as the
ONNX runtime's threads, is inherited across a fork), and every worker binds the port with
SO_REUSEPORT: the kernel hands each new connection to one worker's listening socket, by a hash
of the connection's addresses (Linux 3.9+). A session stays on its worker. What the workers
must agree on is shared:

- `--max-sessions` counts the sessions of all workers: one count in shared memory
  (`server.session_slots.SessionSlots`), taken and released under its lock;
- `/metrics` adds up all workers (`prometheus_client`'s multiprocess mode: each worker keeps
  its values in files of one temporary directory, `ServerMetrics(shared_dir=...)`), whichever
  worker answers; `--metrics-port` is served by this parent process from the same files.

The parent only starts the workers, prints the URL once every one listens, and stops them
(SIGTERM: each closes its sessions gracefully) on SIGINT or SIGTERM. When a worker dies, the
parent stops the others and exits with status 1: the server is whole or not running. When the
parent dies (SIGKILL), each worker sees its pipe to the parent close and stops as well.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType

from server.app import metrics_http_server
from server.config import ServerConfig, server_options
from server.logs import configure_logging
from server.metrics import ServerMetrics
from server.serving import WorkerLink, listening_line, run
from server.session_slots import shared_count

log = logging.getLogger(__name__)

METRICS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
"""The environment variable that puts `prometheus_client` in multiprocess mode (read when it
is imported: the workers import it after it is set)."""

STOP_TIMEOUT_S = 30.0
"""How long a stopped worker may take to close its sessions (s); then it is killed."""


def serve_workers(config: ServerConfig) -> int:
    """Run `config.workers` workers until SIGINT/SIGTERM (returns 0), or until one fails to
    start or ends by itself (the others are stopped; returns 1)."""
    configure_logging(config.log_level, config.log_format)
    metrics_dir = tempfile.mkdtemp(prefix="duplex-metrics-")
    os.environ[METRICS_DIR_VARIABLE] = metrics_dir
    context = multiprocessing.get_context("spawn")
    sessions = shared_count()
    workers: list[BaseProcess] = []
    stopping = False

    def stop(signum: int = signal.SIGTERM, frame: FrameType | None = None) -> None:
        nonlocal stopping
        stopping = True
        for worker in workers:
            if worker.is_alive():
                worker.terminate()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    metrics_server = None
    try:
        with _reserved_port(config.host, config.port) as port:
            config = dataclasses.replace(config, port=port)
            pipes = []
            for index in range(config.workers):
                ours, theirs = context.Pipe()
                worker = context.Process(
                    target=run, args=(config, WorkerLink(sessions, metrics_dir, theirs)),
                    name=f"duplex-worker-{index + 1}")
                worker.start()
                theirs.close()
                workers.append(worker)
                pipes.append(ours)
            started = _all_listening(pipes, workers)
        if started:
            if config.metrics_port is not None:
                metrics_server = metrics_http_server(ServerMetrics(shared_dir=metrics_dir),
                                                     config.host, config.metrics_port,
                                                     server_options(config))
                metrics_server.start()
            print(listening_line(config.host, port,
                                 metrics_server.port() if metrics_server else None), flush=True)
            while not stopping and all(worker.is_alive() for worker in workers):
                wait([worker.sentinel for worker in workers])
        failed = not stopping
        if failed:
            log.error("a worker process ended %s; stopping the others",
                      "while it started" if not started else "by itself")
        stop()
    finally:
        for worker in workers:
            worker.join(STOP_TIMEOUT_S)
            if worker.is_alive():
                worker.kill()
                worker.join()
        if metrics_server is not None:
            metrics_server.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)
    return 1 if failed or any(worker.exitcode not in (0, -signal.SIGTERM)
                              for worker in workers) else 0


@contextlib.contextmanager
def _reserved_port(host: str, port: int) -> Iterator[int]:
    """Hold (`host`, `port`) bound with SO_REUSEPORT, not listening, while the workers start:
    port 0 becomes a free port that every worker then binds too, and a port another program
    holds fails here at once (OSError). Yields the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as reserved:
        reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        reserved.bind((host, port))
        yield reserved.getsockname()[1]


def _all_listening(readers: list[Connection], workers: list[BaseProcess]) -> bool:
    """Wait until every worker sent its port (True), or one ended first (False)."""
    pending = dict(zip(readers, workers, strict=True))
    while pending:
        ready = wait([*pending, *(worker.sentinel for worker in pending.values())])
        for reader in [reader for reader in pending if reader in ready]:
            try:
                reader.recv()
            except EOFError:
                return False
            del pending[reader]
        if any(not worker.is_alive() for worker in pending.values()):
            return False
    return True
