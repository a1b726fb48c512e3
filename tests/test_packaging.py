"""Project set-up: CLI flags, README commands and the CI entry point (the compose file:
`test_compose.py`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
FLAGS = ("--host", "--port", "--voice", "--tts", "--log-level")
TTS_ENGINES = ("piper", "espeak", "uniform", "uniform-nomarks")


def commands(text: str) -> list[str]:
    """Non-empty, comment-free lines of a shell text (fenced README blocks or a script)."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", readme, flags=re.MULTILINE | re.DOTALL)
    return commands("\n".join(blocks))


def test_cli_help_lists_every_documented_flag() -> None:
    result = subprocess.run(
        [BIN / "duplex-demo", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        check=False, env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr
    flags_page = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    documented = re.findall(r"^\| `(--[a-z][a-z-]*)", flags_page, flags=re.MULTILINE)
    assert set(FLAGS) <= set(documented)
    for flag in documented:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", result.stdout), flag
    for engine in TTS_ENGINES:
        assert engine in result.stdout, engine


def test_readme_starts_with_run_then_test() -> None:
    assert readme_commands()[:2] == ["make run", "make test"]


def test_ci_runs_the_readme_test_command() -> None:
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK)
    lines = commands(script.read_text(encoding="utf-8"))
    assert lines[0] == "set -euo pipefail"
    assert lines[-1] == readme_commands()[1] == "make test"
