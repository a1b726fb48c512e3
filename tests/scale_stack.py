"""The `scale` compose profile on loopback: Debian's nginx with `deploy/nginx.conf` in front of
three `duplex-demo` processes configured as the profile's `demo-replica` service.

What the compose file and the nginx configuration say is used as they say it; only what
Docker would provide is templated for loopback: each replica's address (`DUPLEX_HOST`
127.0.0.1, a port of its own instead of the shared 8765), the upstream servers (the
replicas' addresses instead of Docker's DNS name `demo-replica`) and nginx's `listen`. nginx
runs in the foreground as the invoking user, with its pid, logs and temp directories in a
temporary directory (no root, nothing under /var), and an access log that names the replica
(`$upstream_addr`) each request went to.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
NGINX_CONF = ROOT / "deploy" / "nginx.conf"
COMPOSE = ROOT / "docker-compose.yml"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
"""Debian's nginx (`.ci/run` installs the package; /usr/sbin is not on every user's PATH)."""
DUPLEX_DEMO = Path(sys.executable).parent / "duplex-demo"
"""The project's console script, installed beside the running interpreter."""
REPLICAS = 3
STARTUP_TIMEOUT_S = 120.0

ACCESS_LOG_FORMAT = "$request_method $request_uri $upstream_addr $status"


@dataclass(frozen=True, slots=True)
class ScaleStack:
    """The running stack: nginx's address, the replicas' addresses, nginx's access log."""

    proxy_port: int
    replica_ports: tuple[int, ...]
    access_log: Path

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.proxy_port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.proxy_port}/v1/realtime"

    def routes(self) -> list[tuple[str, str, str]]:
        """(method, request URI, replica address) of every request nginx has logged."""
        lines = self.access_log.read_text(encoding="utf-8").splitlines()
        return [(method, uri, upstream) for method, uri, upstream, _ in
                (line.split(" ") for line in lines)]

    def replica_of(self, marker: str) -> str:
        """The replica address of the one logged request whose URI ends with `marker`."""
        (found,) = [upstream for _, uri, upstream in self.routes() if uri.endswith(marker)]
        return found


def replica_environment(port: int, overrides: dict[str, str]) -> dict[str, str]:
    """The `demo-replica` service's environment from docker-compose.yml, its `${VAR:-default}`
    values resolved against `overrides` (as compose resolves them against the shell), the
    variables passed on only when set left out unless set, and the address templated for
    loopback."""
    service = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]["demo-replica"]
    environment = {}
    for name, value in service["environment"].items():
        if value is None:
            if name in overrides:
                environment[name] = overrides[name]
            continue
        environment[name] = re.sub(
            r"\$\{(\w+):-([^}]*)\}", lambda m: overrides.get(m.group(1), m.group(2)), value)
    environment.update(DUPLEX_HOST="127.0.0.1", DUPLEX_PORT=str(port))
    return environment


def nginx_conf(prefix: Path, proxy_port: int, replica_ports: tuple[int, ...]) -> str:
    """The main configuration: `deploy/nginx.conf` (a conf.d file, as the compose file mounts
    it) with its upstream and listen templated for loopback, inside an `http` block whose
    paths all lie under `prefix`."""
    site = NGINX_CONF.read_text(encoding="utf-8")
    servers = "".join(f"server 127.0.0.1:{port};\n    " for port in replica_ports)
    site, count = re.subn(r"server demo-replica:\d+;\n\s*", servers, site)
    assert count == 1, "deploy/nginx.conf has no `server demo-replica:PORT;` upstream"
    site, count = re.subn(r"listen \d+;", f"listen 127.0.0.1:{proxy_port};", site)
    assert count == 1, "deploy/nginx.conf has no `listen PORT;`"
    (prefix / "site.conf").write_text(site, encoding="utf-8")
    temp = "\n    ".join(f"{kind}_temp_path {prefix / kind};"
                         for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""daemon off;
worker_processes 1;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} info;
events {{ worker_connections 512; }}
http {{
    {temp}
    log_format routes '{ACCESS_LOG_FORMAT}';
    access_log {prefix / "access.log"} routes;
    include {prefix / "site.conf"};
}}
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _start_replica(overrides: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    """Start one `duplex-demo` on a free port; return it once it prints its URL."""
    process = subprocess.Popen(
        [str(DUPLEX_DEMO)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env={**os.environ, "PYTHONUNBUFFERED": "1",
                        **replica_environment(0, overrides)})
    assert process.stdout is not None
    async with asyncio.timeout(STARTUP_TIMEOUT_S):
        line = await asyncio.to_thread(process.stdout.readline)
    match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    assert match, line
    return process, int(match.group(1))


async def _wait_listening(port: int) -> None:
    async with asyncio.timeout(30):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            return


@contextlib.asynccontextmanager
async def scale_stack(tmp: Path, overrides: dict[str, str]) -> AsyncIterator[ScaleStack]:
    """Run nginx and `REPLICAS` replicas (the compose environment with `overrides`) until the
    block ends; every process is stopped then."""
    processes: list[subprocess.Popen[str]] = []
    try:
        started = await asyncio.gather(*(_start_replica(overrides) for _ in range(REPLICAS)),
                                       return_exceptions=True)
        processes += [item[0] for item in started if isinstance(item, tuple)]
        for item in started:
            if isinstance(item, BaseException):
                raise item
        ports = tuple(port for _, port in started)  # type: ignore[misc]
        proxy_port = free_port()
        conf = tmp / "nginx.conf"
        conf.write_text(nginx_conf(tmp, proxy_port, ports), encoding="utf-8")
        nginx = subprocess.Popen([NGINX, "-p", str(tmp), "-e", str(tmp / "error.log"),
                                  "-c", str(conf)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        processes.append(nginx)
        await _wait_listening(proxy_port)
        assert nginx.poll() is None, nginx.stderr.read() if nginx.stderr else ""
        yield ScaleStack(proxy_port, ports, tmp / "access.log")
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                await asyncio.to_thread(process.wait, 30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
