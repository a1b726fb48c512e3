"""Node.js client scripts under `tests/` run against a test server: their npm packages installed
from the lockfile, the script run, and its JSON-lines log parsed.

The npm packages are pinned in `tests/<dir>/package.json` and `package-lock.json`; `npm ci`
installs them (once per test process and directory) when `node_modules` is missing or older
than the lockfile. `node` and `npm` come from the system (`.ci/run` installs them when
missing); a missing one fails the test, it never skips.
"""

from __future__ import annotations

import asyncio
import functools
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
NPM_CI_TIMEOUT_S = 300.0


@functools.cache
def installed(directory: str) -> Path:
    """`tests/<directory>` with its pinned npm packages installed (`npm ci`, from the lockfile).

    Raises:
        AssertionError: node or npm is not on PATH.
        subprocess.CalledProcessError: `npm ci` failed (its output is in the exception).
    """
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed (.ci/run)"
    path = TESTS / directory
    lock = path / "package-lock.json"
    marker = path / "node_modules" / ".package-lock.json"
    if not marker.exists() or marker.stat().st_mtime < lock.stat().st_mtime:
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=path,
                       check=True, capture_output=True, text=True, timeout=NPM_CI_TIMEOUT_S)
    return path


@dataclass
class NodeLog:
    """A client script's JSON-lines log, split by kind.

    Attributes:
        received: server events the client received, in order.
        sent: client events the client sent, in order.
        steps: the script's step names, in order, each with the number of received events
            before it started (an index into `received`).
        errors: errors the client library raised to the application.
        records: every record as written, in order (others than the kinds above included).
        returncode: the script's exit status.
        stderr: what it wrote to stderr.
    """

    received: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    steps: list[tuple[str, int]] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    returncode: int | None = None
    stderr: str = ""

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        """Received server events of `event_type`, in order."""
        return [event for event in self.received if event["type"] == event_type]

    def sent_of_type(self, event_type: str) -> list[dict[str, Any]]:
        """Sent client events of `event_type`, in order."""
        return [event for event in self.sent if event["type"] == event_type]

    def record(self, key: str) -> Any:
        """The value of the last record that has `key` (KeyError when none has)."""
        for record in reversed(self.records):
            if key in record:
                return record[key]
        raise KeyError(key)


async def run_script(directory: str, script: str, *args: str, timeout_s: float) -> NodeLog:
    """Run `node tests/<directory>/<script> ARGS...` and return its parsed log.

    Raises:
        TimeoutError: it ran longer than `timeout_s` (it is killed).
        json.JSONDecodeError: a line of its stdout is not JSON.
    """
    path = await asyncio.to_thread(installed, directory)
    process = await asyncio.create_subprocess_exec(
        "node", str(path / script), *args, cwd=path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(timeout_s):
            stdout, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    log = NodeLog(returncode=process.returncode, stderr=stderr.decode(errors="replace"))
    for line in stdout.decode().splitlines():
        record = json.loads(line)
        log.records.append(record)
        if "in" in record:
            log.received.append(record["in"])
        elif "out" in record:
            log.sent.append(record["out"])
        elif "step" in record:
            log.steps.append((record["step"], len(log.received)))
        elif "error" in record:
            log.errors.append(record["error"])
    return log
