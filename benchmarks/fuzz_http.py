"""HTTP fuzz run: random requests (paths, headers, methods, versions, pipelining) against a
real server's main port and metrics port, until >= N requests were sent.

Starts a real `server.app.DemoServer` in this process on 127.0.0.1 (free ports) with the
uniform voice, an API key (so that the login, logout and cookie paths are reached) and
`--metrics-port`, as `benchmarks/fuzz_protocol.py` does. Each request goes over a new TCP
connection, which the client half-closes once the request is written (a server waiting for
more of a head then sees its end); the client reads until the server closes. A request is drawn
from a seeded `random.Random`: a method (mostly GET, some HEAD, others and junk), a path (the
server's own, traversals, `?key=` logins, NUL and other control bytes, non-ASCII bytes,
segments around 255 bytes, paths of 2,040 to 8,190 bytes), a version, headers (the right
`Host`, a foreign one, none, two; `Origin`, two; cookies and bearer keys, right or forged;
upgrade headers, valid or not; control bytes; long values; up to 200 headers), line ends
(CRLF, sometimes bare LF), and what follows it on the connection (nothing, a second request,
a CRLF, junk). Every log record at ERROR or above is counted; tracebacks are those that carry
an exception. Prints one table (method: benchmarks/README.md); exit status 1 when a request
got a 5xx, no answer, or an answer without the security headers, or the log has an error.

Run from the project root: `.venv/bin/python -m benchmarks.fuzz_http --requests 10000`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.fuzz_protocol import ServerLog
from benchmarks.measuring import HOST, print_run_header
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services, server_options
from server.http_guard import SECURITY_HEADERS

KEY = "fuzz+Key&%42"
"""The server's API key (with characters a URL treats specially)."""
CONCURRENCY = 16
"""Requests in flight at once."""
READ_TIMEOUT_S = 15.0
"""Longest wait (s) for the server to answer and close: past the 10 s head timeout."""

PATHS = ("/", "/index.html", "/app.js", "/healthz", "/metrics", "/v1/realtime", "/logout",
         "/nope", "/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "//evil.example/",
         "/web/../README.md", "*", "http://127.0.0.1/", "/?key=", f"/?key={KEY}",
         "/?key=fuzz%2BKey%26%2542", "/?key=wrong", "/%00", "/a%ff", "/%F0%9F%98%80",
         "/index.html?x=1&x=2", "/v1/realtime?model=x", "/metrics?", "/.", "/..")
METHODS = ("GET",) * 14 + ("HEAD",) * 3 + ("POST", "PUT", "DELETE", "OPTIONS", "TRACE",
                                           "CONNECT", "PATCH", "get", "G ET", "", "\x00")
VERSIONS = ("HTTP/1.1",) * 17 + ("HTTP/1.0", "HTTP/2.0", "HTTP/1.1 x", "", "http/1.1")
UPGRADE = ("Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==")


def _junk(rng: random.Random, size: int, low: int = 0, high: int = 255) -> str:
    return "".join(chr(rng.randint(low, high)) for _ in range(size))


def _path(rng: random.Random) -> str:
    choice = rng.random()
    if choice < 0.5:
        return rng.choice(PATHS)
    if choice < 0.65:
        return "/" + _junk(rng, rng.randint(1, 40))
    if choice < 0.8:
        return "/" + "/".join("s" * rng.choice((1, 254, 255, 256, 300))
                              for _ in range(rng.randint(1, 3)))
    if choice < 0.9:
        return "/" + "p/" * (rng.choice((2040, 2048, 4000, 4064, 4080, 4094, 4096, 4100, 8190))
                             // 2)
    return rng.choice(PATHS) + _junk(rng, rng.randint(1, 10), 0, 127)


def _headers(rng: random.Random, port: int) -> list[str]:
    host = rng.choice([f"127.0.0.1:{port}"] * 6 + [f"localhost:{port}", "evil.example",
                       f"evil.example:{port}", "[::1]", "", "127.0.0.1:x", _junk(rng, 8)])
    headers = []
    if rng.random() < 0.95:
        headers.append(f"Host: {host}")
    if rng.random() < 0.05:
        headers.append(f"Host: {host}")
    if rng.random() < 0.3:
        origin = rng.choice([f"http://127.0.0.1:{port}", "http://evil.example", "null", ""])
        headers.extend([f"Origin: {origin}"] * rng.choice((1, 1, 1, 2)))
    if rng.random() < 0.3:
        headers.append(rng.choice([f"Authorization: Bearer {KEY}", "Authorization: Bearer x",
                                   "Authorization: Basic Zm9v", "Authorization: Bearer"]))
    if rng.random() < 0.2:
        headers.append(f"Cookie: duplex_auth_{port}={_junk(rng, rng.randint(0, 80), 33, 126)}")
    if rng.random() < 0.3:
        headers.extend(line for line in UPGRADE if rng.random() < 0.9)
    if rng.random() < 0.1:
        headers.append(f"Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.{KEY}")
    if rng.random() < 0.1:
        headers.append("X-Forwarded-Proto: https")
    if rng.random() < 0.1:
        headers.append(f"X-Junk: {_junk(rng, rng.randint(1, 30))}")
    if rng.random() < 0.05:
        headers.append("X-Long: " + "v" * rng.choice((100, 8000, 8200)))
    if rng.random() < 0.03:
        headers.extend(f"X-{index}: 1" for index in range(rng.choice((100, 127, 129, 200))))
    if rng.random() < 0.05:
        headers.append(rng.choice(["Content-Length: 5", "Transfer-Encoding: chunked",
                                   "Content-Length: x", "NoColon", ": empty"]))
    rng.shuffle(headers)
    return headers


def request(rng: random.Random, port: int) -> bytes:
    """One fuzzed request head, maybe followed by more bytes (see the module docstring)."""
    end = "\n" if rng.random() < 0.05 else "\r\n"
    lines = [f"{rng.choice(METHODS)} {_path(rng)} {rng.choice(VERSIONS)}",
             *_headers(rng, port)]
    raw = (end.join(lines) + end + end).encode("latin-1")
    after = rng.random()
    if after < 0.1:
        raw += f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    elif after < 0.15:
        raw += b"\r\n"
    elif after < 0.18:
        raw += _junk(rng, rng.randint(1, 40)).encode("latin-1")
    return raw


@dataclass(slots=True)
class Tally:
    """Totals over the run (see the table rows)."""

    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    unanswered: list[str] = field(default_factory=list)
    insecure: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)


async def send(port: int, raw: bytes, tally: Tally) -> None:
    """Send one request; tally the status of the first answer."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(raw)
        writer.write_eof()
        async with asyncio.timeout(READ_TIMEOUT_S):
            data = await reader.read(-1)
    except (ConnectionError, TimeoutError) as exc:
        data = b""
        tally.unanswered.append(f"{type(exc).__name__}: {raw[:120]!r}")
    finally:
        writer.close()
    tally.requests += 1
    if not data:
        if not tally.unanswered or not tally.unanswered[-1].endswith(f"{raw[:120]!r}"):
            tally.unanswered.append(repr(raw[:120]))
        return
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    status = int(head.split(" ", 2)[1])
    tally.statuses[status] += 1
    if status >= 500:
        tally.server_errors.append(f"{status}: {raw[:120]!r}")
    lower = head.lower()
    if any(f"\r\n{name.lower()}: " not in lower for name in SECURITY_HEADERS):
        tally.insecure.append(f"{status}: {raw[:120]!r}")


async def fuzz(args: argparse.Namespace) -> Tally:
    """Start the server, send `args.requests` requests, stop it."""
    config = ServerConfig(port=0, tts="uniform", calibration="marks", metrics_port=0,
                          api_key=KEY)
    services = await asyncio.to_thread(build_services, config)
    demo = DemoServer(services, config.allow_origin, server_options(config))
    await demo.start(HOST, 0)
    ports = (demo.port(), demo.port(), demo.port(), demo.metrics_port())
    rng = random.Random(args.seed)
    tally = Tally()
    queue: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
    for _ in range(args.requests):
        port = rng.choice(ports)
        assert port is not None
        queue.put_nowait((port, request(rng, port)))

    async def worker() -> None:
        while not queue.empty():
            port, raw = queue.get_nowait()
            await send(port, raw, tally)
            if tally.requests % 1000 == 0:
                print(f"{tally.requests} requests sent", file=sys.stderr, flush=True)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    await demo.shutdown()
    return tally


def report(tally: Tally, log: ServerLog, wall_s: float) -> bool:
    """Print the table (and the first problems of each kind); True when nothing broke."""
    rows = [
        ("requests sent", tally.requests),
        *((f"  answered {status}", count) for status, count in sorted(tally.statuses.items())),
        ("answered 5xx", len(tally.server_errors)),
        ("not answered", len(tally.unanswered)),
        ("answers without the security headers", len(tally.insecure)),
        ("tracebacks in the server log", log.tracebacks),
        ("records at ERROR or above in the server log", log.errors),
        ("wall time (s)", round(wall_s, 1)),
    ]
    print_table("HTTP fuzz", ["measure", "value"], rows)
    problems = {"5xx": tally.server_errors, "not answered": tally.unanswered,
                "insecure": tally.insecure, "server log": log.first}
    for name, found in problems.items():
        for line in found[:3]:
            print(f"{name}: {line[:500]}")
    return not (tally.server_errors or tally.unanswered or tally.insecure or log.errors)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000,
                        help="requests to send (default 10000)")
    parser.add_argument("--seed", type=int, default=int(time.time()),
                        help="seed of the request generator (default: the time)")
    args = parser.parse_args(argv)
    print_run_header()
    print(f"seed: {args.seed}", flush=True)
    log = ServerLog()
    logging.getLogger().addHandler(log)
    started = time.perf_counter()
    tally = asyncio.run(fuzz(args))
    sys.exit(0 if report(tally, log, time.perf_counter() - started) else 1)


if __name__ == "__main__":
    main()
