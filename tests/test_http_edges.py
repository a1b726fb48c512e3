"""The HTTP side on raw sockets (issue 26, failing input 5 and 7): every malformed request gets
a 4xx (never a 500, never silence), every answer carries the security headers (websockets' own
included), HEAD has no body, pipelined bytes are answered or refused, and a `Host` that is
not this server's (DNS rebinding) is refused. A real server on loopback."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from server.http_guard import SECURITY_HEADERS, host_allowed
from tests.browser import chromium

pytestmark = pytest.mark.timeout(60)


async def exchange(port: int, raw: bytes, timeout: float = 10.0) -> bytes:
    """Send `raw` on a new TCP connection and read until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    try:
        async with asyncio.timeout(timeout):
            return await reader.read(-1)
    finally:
        writer.close()


def responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The HTTP responses in `data` (status, headers with lower-case names, body)."""
    parsed = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        parsed.append((int(lines[0].split()[1]), headers, rest[:length]))
        data = rest[length:]
    return parsed


def request(path: str = "/", method: str = "GET", host: str | None = "127.0.0.1",
            extra: str = "") -> bytes:
    host_line = f"Host: {host}\r\n" if host is not None else ""
    return f"{method} {path} HTTP/1.1\r\n{host_line}{extra}\r\n".encode("latin-1")


UPGRADE = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")


def assert_secure(headers: dict[str, str]) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name.lower()) == value, name


@pytest.mark.parametrize(("raw", "status"), [
    pytest.param(request("/a\x00b"), 400, id="raw-nul-in-path"),
    pytest.param(request("/" + "a" * 256), 404, id="segment-over-255"),
    pytest.param(request("/" + "a/" * 2100), 414, id="path-over-4096"),
    pytest.param(request("/" + "a/" * 2040), 404, id="path-past-path-max-with-the-web-root"),
    pytest.param(request("/" + "a" * 9000), 414, id="request-line-over-8k-websockets-own"),
    pytest.param(request(extra="Origin: http://127.0.0.1\r\nOrigin: http://x\r\n"), 400,
                 id="two-origins"),
    pytest.param(request("/v1/realtime", extra="Host: 127.0.0.1\r\n" + UPGRADE), 400,
                 id="two-hosts-on-upgrade"),
    pytest.param(request(host=None), 400, id="no-host"),
    pytest.param(request(method="POST"), 405, id="post"),
    pytest.param(request(method="DELETE", path="/v1/realtime"), 405, id="delete"),
    pytest.param(b"GET / HTTP/1.1\nHost: 127.0.0.1\n\n", 400, id="bare-lf"),
    pytest.param(b"GET / HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", 400, id="unknown-protocol"),
    pytest.param(request(extra="X: a\x01b\r\n"), 400, id="control-in-header-value"),
    pytest.param(request(extra="".join(f"X-{i}: 1\r\n" for i in range(200))), 431,
                 id="too-many-headers-websockets-own"),
    pytest.param(request("/v1/realtime"), 426, id="no-upgrade-websockets-own"),
    pytest.param(request("/v1/realtime", extra=UPGRADE.replace("Sec-WebSocket-Key", "X")), 400,
                 id="no-key-websockets-own"),
    pytest.param(request("/v1/realtime", extra=UPGRADE).replace(b"HTTP/1.1", b"HTTP/1.0"), 400,
                 id="upgrade-over-http-1.0-websockets-505"),
    pytest.param(request(host="evil.example:1"), 403, id="rebound-host-page"),
    pytest.param(request("/v1/realtime", host="evil.example:1",
                         extra="Origin: http://evil.example:1\r\n" + UPGRADE), 403,
                 id="rebound-host-upgrade"),
    pytest.param(request("/healthz", host="EVIL.example."), 403, id="rebound-host-health"),
])
async def test_malformed_requests_get_a_4xx_with_the_security_headers(
        start_server, caplog: pytest.LogCaptureFixture, raw: bytes, status: int) -> None:
    server = await start_server()
    port = server.demo.port()
    with caplog.at_level(logging.INFO):
        answers = responses(await exchange(port, raw))
    assert [answer[0] for answer in answers] == [status]
    assert_secure(answers[0][1])
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not any("Traceback" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}",
                                  "app.localhost", "LOCALHOST."])
async def test_loopback_names_and_addresses_are_served(start_server, host: str) -> None:
    server = await start_server()
    port = server.demo.port()
    answers = responses(await exchange(port, request("/healthz", host=host.format(port=port))))
    assert [(status, body) for status, _, body in answers] == [(200, b"ok\n")]


async def test_allow_host_serves_a_name(start_server) -> None:
    server = await start_server(allow_host=("voice.example",))
    port = server.demo.port()
    raw = request("/v1/realtime", host=f"voice.example:{port}",
                  extra=f"Origin: http://voice.example:{port}\r\n" + UPGRADE)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    async with asyncio.timeout(10):
        head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    assert head.startswith(b"HTTP/1.1 101")
    assert not host_allowed("other.example", ("voice.example",))
    assert host_allowed("anything.example:80", ("*",))


async def test_head_has_no_body(start_server) -> None:
    server = await start_server()
    port = server.demo.port()
    (get,) = responses(await exchange(port, request("/")))
    data = await exchange(port, request("/", method="HEAD"))
    status, headers, _ = responses(data)[0]
    assert status == 200 and headers["content-length"] == str(len(get[2])) > "0"
    assert data.endswith(b"\r\n\r\n")
    assert_secure(headers)


@pytest.mark.parametrize("tail", [b"\r\n", request("/healthz"), request("/") * 3])
async def test_pipelined_bytes_after_a_request_get_it_answered(start_server,
                                                               tail: bytes) -> None:
    """The first request is answered; the connection then closes (`Connection: close`), which
    refuses whatever followed."""
    server = await start_server()
    answers = responses(await exchange(server.demo.port(), request("/healthz") + tail))
    assert [(status, body) for status, _, body in answers] == [(200, b"ok\n")]
    assert answers[0][1]["connection"] == "close"


async def test_a_frame_sent_with_the_handshake_is_applied_after_it(start_server) -> None:
    """Bytes held back while the handshake is answered are parsed once it succeeded."""
    server = await start_server()
    port = server.demo.port()
    payload = json.dumps({"type": "fuzz.probe", "event_id": "held"}).encode()
    mask = b"\x01\x02\x03\x04"
    frame = bytes([0x81, 0x80 | len(payload)]) + mask + bytes(
        byte ^ mask[index % 4] for index, byte in enumerate(payload))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request("/v1/realtime", host=f"127.0.0.1:{port}", extra=UPGRADE) + frame)
    async with asyncio.timeout(10):
        head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101")
    seen = b""
    async with asyncio.timeout(10):
        while b'"held"' not in seen:
            seen += await reader.read(65536)
    writer.close()
    assert b"unknown_event_type" in seen


async def test_a_client_that_half_closes_after_its_request_gets_the_answer(start_server) -> None:
    """websockets closed a connection whose client ended its output after the request head
    (allowed by HTTP/1.1) without answering it."""
    server = await start_server()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.demo.port())
    writer.write(request("/healthz"))
    writer.write_eof()
    async with asyncio.timeout(10):
        data = await reader.read(-1)
    writer.close()
    assert [(status, body) for status, _, body in responses(data)] == [(200, b"ok\n")]


REBIND = "--host-resolver-rules=MAP evil.example 127.0.0.1"
"""Chromium resolves evil.example to loopback, as a rebound DNS name would."""

REBOUND_PAGE_PROBES = """async (port) => {
    const metrics = await fetch('/metrics').then((r) => r.status, () => 'failed');
    const socket = await new Promise((resolve) => {
        const ws = new WebSocket(`ws://evil.example:${port}/v1/realtime`);
        ws.onopen = () => resolve('open');
        ws.onerror = () => resolve('refused');
    });
    return {metrics, socket};
}"""
"""What a page of the rebound origin tries: read `/metrics`, open a session."""


@pytest.mark.parametrize("allowed", [False, True])
async def test_a_rebound_dns_name_gets_nothing_in_chromium(start_server, allowed: bool) -> None:
    """Issue 26: a page of a rebound origin loaded the demo, got a spoken reply and read
    `/metrics`. Here Chromium resolves evil.example to this server; the page's own requests
    carry `Host: evil.example:PORT` and `Origin: http://evil.example:PORT`. Allowed with
    `--allow-host` (the control: the same page then loads and connects)."""
    server = await start_server(allow_host=("evil.example",) if allowed else ())
    port = server.demo.port()
    async with chromium(extra_args=[REBIND]) as browser:
        page = await browser.new_page()
        answer = await page.goto(f"http://evil.example:{port}/")
        assert answer is not None and answer.status == (200 if allowed else 403)
        probes = await page.evaluate(REBOUND_PAGE_PROBES, port)
    assert probes == ({"metrics": 200, "socket": "open"} if allowed
                      else {"metrics": 403, "socket": "refused"})
