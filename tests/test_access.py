"""`--api-key` access and the page's security headers, on a real server on loopback.

Without a key everything is open (the other test files run that way). With one, `/v1/realtime`
takes a bearer header (the `openai` SDK's realtime client), the `openai-insecure-api-key.<key>`
subprotocol, or the page cookie that `/?key=` sets; anything else is refused at the handshake
with 401. The page logs in through its form in headless Chromium, under a Content-Security-Policy
that allows only its own origin, and the key never reaches a log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from openai import AsyncOpenAI
from playwright.async_api import Browser
from websockets.datastructures import Headers
from websockets.exceptions import InvalidStatus

from server.access import LOGIN_TTL_S, ApiKeyAccess
from server.config import ServerConfig, build_parser, parse_config
from server.http_guard import SECURITY_HEADERS
from tests.browser import VIEWPORT, DemoPage, chromium
from tests.realtime_client import RealtimeClient

pytestmark = pytest.mark.timeout(90)

KEY = "s3cret-Key_42"


def user_item(text: str) -> dict[str, object]:
    return {"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}


async def refused_status(url: str, **kwargs: object) -> tuple[int, bytes, dict[str, str]]:
    """Open `url` expecting the handshake to be refused; returns (status, body, headers)."""
    with pytest.raises(InvalidStatus) as refused:
        async with RealtimeClient.connect(url, **kwargs):
            pass
    response = refused.value.response
    return response.status_code, response.body or b"", dict(response.headers.raw_items())


async def test_page_responses_carry_the_security_headers(start_server) -> None:
    server = await start_server()
    async with httpx.AsyncClient(base_url=server.http_url) as http:
        for path in ("/", "/app.js", "/nope"):
            response = await http.get(path)
            for name, value in SECURITY_HEADERS.items():
                assert response.headers[name] == value, (path, name)
    csp = SECURITY_HEADERS["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "unsafe" not in csp and "*" not in csp


async def test_realtime_needs_the_key(start_server) -> None:
    server = await start_server(api_key=KEY)
    status, body, headers = await refused_status(server.ws_url)
    assert status == 401 and b"API key" in body and headers["WWW-Authenticate"].startswith("Bearer")
    for wrong in ({"additional_headers": {"Authorization": "Bearer nope"}},
                  {"additional_headers": {"Authorization": f"Basic {KEY}"}},
                  {"subprotocols": ["realtime", "openai-insecure-api-key.nope"]}):
        assert (await refused_status(server.ws_url, **wrong))[0] == 401, wrong
    async with RealtimeClient.connect(
            server.ws_url, additional_headers={"Authorization": f"Bearer {KEY}"}) as client:
        assert client.events[0]["type"] == "session.created"
    async with RealtimeClient.connect(
            server.ws_url, subprotocols=["realtime", f"openai-insecure-api-key.{KEY}"]) as client:
        assert client.websocket.subprotocol == "realtime"
        await client.prompt("say: Subprotocol key.")
        assert (await client.wait_for("response.done"))["response"]["status"] == "completed"


async def test_without_a_key_the_server_is_open(start_server) -> None:
    server = await start_server()
    async with RealtimeClient.connect(server.ws_url) as client:
        assert client.websocket.subprotocol is None
    async with RealtimeClient.connect(
            server.ws_url, subprotocols=["realtime", "openai-insecure-api-key.x"]) as client:
        assert client.websocket.subprotocol == "realtime"
    async with httpx.AsyncClient(base_url=server.http_url) as http:
        assert (await http.get("/")).status_code == 200


async def test_openai_sdk_realtime_client_with_the_key(start_server) -> None:
    server = await start_server(api_key=KEY)
    base = server.ws_url.removesuffix("/realtime")
    sdk = AsyncOpenAI(api_key=KEY, websocket_base_url=base)
    async with sdk.realtime.connect(model="duplex-demo") as connection:
        assert (await connection.recv()).type == "session.created"
        await connection.send(user_item("say: Hello from the SDK."))
        await connection.response.create()
        async for event in connection:
            if event.type == "response.done":
                assert event.response.status == "completed"
                break
    wrong = AsyncOpenAI(api_key="nope", websocket_base_url=base)
    with pytest.raises(InvalidStatus) as refused:
        async with wrong.realtime.connect(model="duplex-demo") as connection:
            await connection.recv()
    assert refused.value.response.status_code == 401


async def test_page_login_sets_a_cookie_that_opens_the_socket(start_server) -> None:
    server = await start_server(api_key=KEY)
    async with httpx.AsyncClient(base_url=server.http_url) as http:
        login = await http.get("/")
        assert login.status_code == 401 and '<form method="get" action="/">' in login.text
        assert (await http.get("/app.js")).status_code == 401
        assert (await http.get("/healthz")).status_code == 200
        wrong = await http.get("/", params={"key": "nope"})
        assert wrong.status_code == 401 and "wrong" in wrong.text
        assert "set-cookie" not in wrong.headers
        entered = await http.get("/", params={"key": KEY})
        assert entered.status_code == 303 and entered.headers["Location"] == "/"
        cookie = entered.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and KEY not in cookie
        assert (await http.get("/")).status_code == 200  # the client kept the cookie
        elsewhere = await http.get("//evil.example/", params={"key": KEY})
        assert elsewhere.status_code == 303 and elsewhere.headers["Location"] == "/"
        assert (await http.get("/app.js")).status_code == 200
        name = f"duplex_auth_{server.demo.port()}"
        value = http.cookies[name]
    async with RealtimeClient.connect(
            server.ws_url, additional_headers={"Cookie": f"{name}={value}"}) as client:
        assert client.events[0]["type"] == "session.created"
    assert (await refused_status(server.ws_url,
                                 additional_headers={"Cookie": f"{name}=forged"}))[0] == 401


async def test_the_key_is_never_logged(start_server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server = await start_server(api_key=KEY)
    async with httpx.AsyncClient(base_url=server.http_url) as http:
        await http.get("/", params={"key": KEY})
        await http.get("/")
        cookie = http.cookies[f"duplex_auth_{server.demo.port()}"]
    async with RealtimeClient.connect(
            server.ws_url, additional_headers={"Authorization": f"Bearer {KEY}"}):
        pass
    await refused_status(server.ws_url, subprotocols=[f"openai-insecure-api-key.{KEY}x"])
    logged = "\n".join(record.getMessage() for record in caplog.records
                       if record.name.startswith(("websockets.server", "server")))
    assert "Authorization: Bearer <redacted>" in logged  # the header line, key scrubbed
    assert "GET /?key=<redacted>" in logged
    assert KEY not in logged and cookie not in logged


def test_the_key_stays_out_of_help_and_repr() -> None:
    environ = {"DUPLEX_API_KEY": KEY}
    assert KEY not in build_parser(environ).format_help()
    config = parse_config([], environ)
    assert config.api_key == KEY and KEY not in repr(config)
    assert parse_config([], {"DUPLEX_API_KEY": ""}).api_key is None
    assert ServerConfig().api_key is None
    with pytest.raises(SystemExit):
        parse_config([], {"DUPLEX_API_KEY": "has space"})


def test_the_key_is_refused_on_the_command_line_and_read_from_a_file(tmp_path) -> None:
    """Issue 26: `--api-key` was accepted on the command line, where `ps` shows it."""
    with pytest.raises(SystemExit):
        parse_config(["--api-key", KEY], {})
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    assert parse_config(["--api-key-file", str(key_file)], {}).api_key == KEY
    assert parse_config([], {"DUPLEX_API_KEY_FILE": str(key_file)}).api_key == KEY
    with pytest.raises(SystemExit):
        parse_config(["--api-key-file", str(tmp_path / "missing")], {})


# ---------------------------------------------------------------------- the login cookie


def login_request(port: int, cookie: str | None = None, secure: bool = False) -> Headers:
    headers = Headers({"Host": f"127.0.0.1:{port}"})
    if cookie is not None:
        headers["Cookie"] = cookie
    if secure:
        headers["X-Forwarded-Proto"] = "https"
    return headers


def test_a_login_cookie_is_random_per_login_per_port_and_expires() -> None:
    """Issue 26: the cookie was HMAC(key, fixed text): the same at every login, never expiring,
    and good on every other server of the host (browsers send a host's cookies to every port)."""
    now = [1_000_000.0]
    access = ApiKeyAccess(KEY, clock=lambda: now[0])
    first, second = (access.login_cookie(login_request(8765)) for _ in range(2))
    assert first != second
    for cookie in (first, second):
        pair = cookie.split(";")[0]
        assert pair.startswith("duplex_auth_8765=") and KEY not in cookie
        assert f"Max-Age={LOGIN_TTL_S}" in cookie and "HttpOnly" in cookie
        assert access.authorized(login_request(8765, pair))
        assert not access.authorized(login_request(9000, pair))  # another port's server
        value = pair.split("=", 1)[1]
        assert not access.authorized(login_request(9000, f"duplex_auth_9000={value}"))
        assert not ApiKeyAccess(KEY + "x").authorized(login_request(8765, pair))
    now[0] += LOGIN_TTL_S
    assert not access.authorized(login_request(8765, first.split(";")[0]))
    secure = access.login_cookie(login_request(443, secure=True))
    assert secure.startswith("__Host-duplex_auth_443=") and "; Secure" in secure
    assert access.authorized(login_request(443, secure.split(";")[0], secure=True))


async def test_logout_revokes_the_cookie(start_server) -> None:
    server = await start_server(api_key=KEY)
    name = f"duplex_auth_{server.demo.port()}"
    async with httpx.AsyncClient(base_url=server.http_url) as http:
        await http.get("/", params={"key": KEY})
        value = http.cookies[name]
        assert (await http.get("/app.js")).status_code == 200
        out = await http.get("/logout")
        assert out.status_code == 303 and "Max-Age=0" in out.headers["Set-Cookie"]
        assert (await http.get("/app.js")).status_code == 401
    replayed = {"Cookie": f"{name}={value}"}
    assert (await refused_status(server.ws_url, additional_headers=replayed))[0] == 401


@pytest.mark.parametrize("key", ["a+b&c%d#e", "100%+sure", "x&key=y"])
async def test_keys_with_url_characters_log_in_typed_or_encoded(start_server, key: str) -> None:
    """Issue 26: the README's `/?key=KEY` failed for keys with `+&#%` (`#` must be typed as
    `%23`: browsers never send what follows it)."""
    server = await start_server(api_key=key)
    port = server.demo.port()
    async with httpx.AsyncClient(base_url=server.http_url) as http:
        assert (await http.get("/", params={"key": key})).status_code == 303  # the form
    typed = key.replace("#", "%23")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /?key={typed} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    async with asyncio.timeout(10):
        answer = await reader.read(-1)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 303"), answer[:40]


# ---------------------------------------------------------------------- the page in Chromium


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


CSP_WATCH = """
window.cspViolations = [];
document.addEventListener('securitypolicyviolation',
    (e) => window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""
"""Init script: records every Content-Security-Policy violation of the page."""


async def test_page_logs_in_with_its_form_and_talks(start_server, browser: Browser) -> None:
    server = await start_server(api_key=KEY)
    context = await browser.new_context(viewport=VIEWPORT)
    await context.add_init_script(CSP_WATCH)
    try:
        demo = DemoPage(await context.new_page())
        await demo.page.goto(server.http_url + "/")
        await demo.page.get_by_label("Access key").fill(KEY)
        await demo.page.get_by_role("button", name="Open").click()
        await demo.wait_state("s.connected && s.sessionRate > 0")
        assert demo.page.url == server.http_url + "/"
        cookies = await context.cookies()
        assert [c["name"] for c in cookies] == [f"duplex_auth_{server.demo.port()}"]
        assert cookies[0]["httpOnly"]
        response_id = await demo.prompt("say: The cookie let me in.")
        await demo.wait_received("response.done",
                                 lambda e: e["response"]["id"] == response_id, timeout_s=20)
        assert await demo.page.evaluate("document.cookie") == ""  # HttpOnly
        assert await demo.page.evaluate("window.cspViolations") == []
    finally:
        await context.close()
