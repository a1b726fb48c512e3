"""`--workers 2` on a real server (`python -m server`): two worker processes on one port, whose
sessions share one `--max-sessions` count and one `/metrics`, stopped together (`server.workers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from websockets.exceptions import InvalidStatus

from tests.realtime_client import RealtimeClient
from tests.server_process import server_process

SESSIONS = 12
"""Sessions opened at once: the kernel's SO_REUSEPORT hash puts them all on one of the two
workers with probability 2 ** -11 only, so both workers hold some."""


WORKER_FLAGS = ("--workers", "2", "--tts", "uniform", "--calibration", "marks",
                "--metrics-port", "0", "--log-level", "warning")


def children(pid: int) -> list[int]:
    """Child process ids of `pid` (parent pid in /proc/PID/stat)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError), open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
            if int(stat.read().rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry))
    return found


def established_on(port: int, pid: int) -> int:
    """TCP connections to local `port` that process `pid` holds open (/proc/net/tcp)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    with open("/proc/net/tcp", encoding="utf-8") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return sum(1 for row in rows
               if int(row[1].rpartition(":")[2], 16) == port and row[3] == "01"
               and row[9] in inodes)


def metric(url: str, name: str) -> float:
    """The value of the sample `name` (with its labels, as exposed) at `url`."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, flags=re.MULTILINE)
    assert match, (name, text)
    return float(match[1])


@contextlib.asynccontextmanager
async def sessions(ws_url: str, count: int) -> AsyncIterator[list[RealtimeClient]]:
    """`count` open sessions."""
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(RealtimeClient.connect(ws_url))
               for _ in range(count)]


def workers_of(pid: int) -> list[int]:
    """The worker processes of the server `pid` (multiprocessing's spawned children, not its
    resource tracker)."""
    return [child for child in children(pid)
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]


async def gone(pids: list[int], timeout_s: float) -> None:
    """Wait until none of `pids` is running (zombies count as gone)."""
    async with asyncio.timeout(timeout_s):
        while any(Path(f"/proc/{pid}").exists()
                  and " Z " not in Path(f"/proc/{pid}/stat").read_text() for pid in pids):
            await asyncio.sleep(0.05)


async def test_two_workers_share_the_port_the_session_limit_and_the_metrics() -> None:
    async with server_process(*WORKER_FLAGS, "--max-sessions", str(SESSIONS)) as server:
        url = f"http://127.0.0.1:{server.port}"
        workers = workers_of(server.process.pid)
        assert len(workers) == 2
        async with sessions(server.ws_url, SESSIONS) as clients:
            held = [established_on(server.port, pid) for pid in workers]
            assert sum(held) == SESSIONS and min(held) > 0, held
            with pytest.raises(InvalidStatus) as refused:
                async with RealtimeClient.connect(server.ws_url):
                    pass
            assert refused.value.response.status_code == 503
            assert b"at most 12" in refused.value.response.body
            for metrics_url in (f"{url}/metrics",
                                f"http://127.0.0.1:{server.metrics_port}/metrics"):
                assert await asyncio.to_thread(metric, metrics_url,
                                               "duplex_sessions_open") == SESSIONS
                assert await asyncio.to_thread(metric, metrics_url,
                                               "duplex_sessions_total") == SESSIONS
                assert await asyncio.to_thread(
                    metric, metrics_url, 'duplex_sessions_refused_total{reason="full"}') == 1
            client = clients[0]
            response_id, _ = await client.prompt("say: one two three.")
            done = await client.wait_for("response.done")
            assert done["response"]["status"] == "completed"
            assert client.audio_bytes(response_id)
        async with asyncio.timeout(10):
            while await asyncio.to_thread(metric, f"{url}/metrics", "duplex_sessions_open"):
                await asyncio.sleep(0.05)
        async with sessions(server.ws_url, SESSIONS):
            pass
        server.process.send_signal(signal.SIGTERM)
        await server.exited_cleanly(60)
        await gone(workers, 10)


async def test_a_worker_that_dies_stops_the_server() -> None:
    async with server_process(*WORKER_FLAGS) as server:
        workers = workers_of(server.process.pid)
        os.kill(workers[0], signal.SIGKILL)
        assert await asyncio.to_thread(server.process.wait, 60) == 1
        await gone(workers, 10)


async def test_workers_stop_when_their_parent_is_killed() -> None:
    async with server_process(*WORKER_FLAGS) as server:
        workers = workers_of(server.process.pid)
        server.process.kill()
        await gone(workers, 30)
