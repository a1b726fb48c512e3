"""Starting the real clients of `tests/clients/` (main venv side): each in a child process of
its own venv (`make clients`), reading its report (`script.Report`) back. Used by
`tests/test_python_clients.py` and `benchmarks/bench_clients.py`."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
CLIENTS = ROOT / ".venv" / "clients"
CLIENT_TIMEOUT_S = 300.0
"""Longest run (s) of one client's script before it counts as hung."""

COMMANDS = {
    "openai": [sys.executable, "-m", "tests.clients.openai_sdk_client"],
    "openai-agents": [str(CLIENTS / "agents" / "bin" / "python"),
                      str(ROOT / "tests" / "clients" / "agents_client.py")],
    "pipecat": [str(CLIENTS / "pipecat" / "bin" / "python"),
                str(ROOT / "tests" / "clients" / "pipecat_client.py")],
}
"""How each client is started: its venv's Python (`make clients` builds them) and module."""


def version(name: str) -> str:
    """The installed version of client `name`'s package, from its venv's pinned requirements
    (`tests/clients/requirements-*.txt`) or, for the bare SDK, the main venv."""
    if name == "openai":
        from importlib.metadata import version as installed
        return installed("openai")
    package, requirements = {"openai-agents": ("openai-agents", "agents"),
                             "pipecat": ("pipecat-ai", "pipecat")}[name]
    lines = (ROOT / "tests" / "clients" / f"requirements-{requirements}.txt").read_text()
    return next(line.split("==")[1] for line in lines.splitlines()
                if line.startswith(f"{package}=="))


async def run_client(name: str, ws_url: str, arguments: list[str]) -> list[dict[str, Any]]:
    """Run client `name` against `ws_url` with the script `arguments` name
    (`script.run_arguments`); its report lines.

    Raises:
        AssertionError: its venv is missing (run `make clients`), or it exited with a non-zero
            status (its stderr's end is shown).
        TimeoutError: it ran longer than CLIENT_TIMEOUT_S.
    """
    command = COMMANDS[name]
    assert Path(command[0]).exists(), f"{command[0]} is missing: run `make clients`"
    process = await asyncio.create_subprocess_exec(
        *command, ws_url, *arguments, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(CLIENT_TIMEOUT_S):
            stdout, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, stderr.decode()[-4000:]
    return [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]
