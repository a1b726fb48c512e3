"""A real `python -m server` in a child process, for tests of what only a whole process shows
(signals, exit status, its stderr)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 120.0
"""Longest wait (s) for the server's "listening" line: loading Piper and whisper on a busy
2-core machine takes tens of seconds."""


@dataclass(frozen=True, slots=True)
class ServerProcess:
    """A started server: its process, its port on 127.0.0.1 and its `--metrics-port` (None
    without one)."""

    process: subprocess.Popen[str]
    port: int
    metrics_port: int | None = None

    @property
    def ws_url(self) -> str:
        """The realtime endpoint's URL."""
        return f"ws://127.0.0.1:{self.port}/v1/realtime"

    async def exited_cleanly(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the process to exit; assert it exited with status 0 and
        wrote no traceback to stderr."""
        async with asyncio.timeout(timeout_s):
            returncode = await asyncio.to_thread(self.process.wait)
        stderr = self.process.stderr.read() if self.process.stderr else ""
        assert returncode == 0, stderr
        assert "Traceback" not in stderr, stderr


@contextlib.asynccontextmanager
async def server_process(*flags: str) -> AsyncIterator[ServerProcess]:
    """Start `python -m server --port 0 FLAGS...` from the project root and yield it once it
    printed its URL; killed on exit when still running.

    Raises:
        AssertionError: its first line of output names no 127.0.0.1 URL.
        TimeoutError: no line within STARTUP_TIMEOUT_S.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "server", "--port", "0", *flags],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(STARTUP_TIMEOUT_S):
            line = await asyncio.to_thread(process.stdout.readline)
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, line
        metrics = re.search(r"/metrics also at http://127\.0\.0\.1:(\d+)", line)
        yield ServerProcess(process, int(match.group(1)),
                            int(metrics.group(1)) if metrics else None)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
