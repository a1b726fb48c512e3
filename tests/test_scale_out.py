"""Scale-out for real (issue 26): Debian's nginx with `deploy/nginx.conf` in front of three
`duplex-demo` processes configured as the `scale` profile's replicas (`tests.scale_stack`).

Sessions spread over the replicas; a browser's page, its files and its WebSocket stay on one
replica (the route cookie); and a resume after a dropped connection reaches the replica that
holds the parked session, for a client with the cookie and for one without (the token starts
with the route key). Which replica served a request is read from nginx's access log.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from websockets.asyncio.client import connect

from tests.browser import chromium, open_demo
from tests.realtime_client import RealtimeClient
from tests.scale_stack import REPLICAS, ScaleStack, scale_stack
from tests.test_browser import wait_playing

pytestmark = pytest.mark.asyncio(loop_scope="module")
"""One stack (and event loop) for the module's tests: starting it takes half a minute."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ScaleStack]:
    # The profile's replicas as compose would start them, with the deterministic test voice
    # (DUPLEX_TTS, as a shell would set it): three Piper voices would load for minutes here.
    async with scale_stack(tmp_path_factory.mktemp("nginx"),
                           {"DUPLEX_TTS": "uniform"}) as running:
        yield running


async def test_sessions_spread_over_the_replicas(stack: ScaleStack) -> None:
    sessions = 24
    async with httpx.AsyncClient() as http:
        before = [await replica_sessions(http, port) for port in stack.replica_ports]
    for index in range(sessions):
        async with connect(f"{stack.ws_url}?probe=spread{index}") as websocket:
            await websocket.recv()  # session.created
    await asyncio.sleep(0.3)  # nginx logs a WebSocket once it closed
    replicas = Counter(stack.replica_of(f"probe=spread{index}") for index in range(sessions))
    assert set(replicas) == {f"127.0.0.1:{port}" for port in stack.replica_ports}, replicas
    async with httpx.AsyncClient() as http:
        opened = [await replica_sessions(http, port) - already
                  for port, already in zip(stack.replica_ports, before, strict=True)]
    assert sum(opened) == sessions and all(opened), opened


async def replica_sessions(http: httpx.AsyncClient, port: int) -> int:
    """Sessions a replica opened, read from its own `/metrics`."""
    text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    line = next(line for line in text.splitlines() if line.startswith("duplex_sessions_total"))
    return int(float(line.split()[-1]))


async def test_a_page_and_its_websocket_stay_on_one_replica(stack: ScaleStack) -> None:
    browsers = 8
    homes = []
    for index in range(browsers):
        async with httpx.AsyncClient(base_url=stack.http_url) as browser:
            page = await browser.get(f"/?probe=page{index}")
            assert page.status_code == 200 and "duplex_route" in browser.cookies
            await browser.get(f"/app.js?probe=script{index}")
            cookie = f"duplex_route={browser.cookies['duplex_route']}"
            async with connect(f"{stack.ws_url}?probe=socket{index}", origin=None,
                               additional_headers={"Cookie": cookie}) as websocket:
                await websocket.recv()
        await asyncio.sleep(0.2)
        served = {stack.replica_of(f"probe={kind}{index}")
                  for kind in ("page", "script", "socket")}
        assert len(served) == 1, served
        homes.append(served.pop())
    assert len(set(homes)) > 1, homes  # 8 browsers on one replica of 3: p = 3 / 3**8


async def test_a_resume_reaches_the_replica_that_holds_the_session(stack: ScaleStack) -> None:
    """Six clients without cookies (the `openai` SDK sends none) and two browsers (with the
    route cookie) drop mid-reply and resume through nginx: each gets its session back."""
    homes = set()
    for index in range(8):
        headers = {}
        if index >= 6:
            async with httpx.AsyncClient(base_url=stack.http_url) as browser:
                await browser.get("/")
                headers = {"Cookie": f"duplex_route={browser.cookies['duplex_route']}"}
        async with RealtimeClient.connect(f"{stack.ws_url}?probe=first{index}",
                                          additional_headers=headers) as first:
            session = first.of_type("session.created")[0]["session"]
            token = session["resume"]["token"]
            route = token.split(".")[0]
            assert len(route) == 32 and int(route, 16) >= 0, token
            response_id, item_id = await first.prompt("say: The tide turns at noon today.")
            await first.wait_audio_until(response_id, 500)
            await first.ack(response_id, 500)
            await first.wait_for("playback.acknowledged")
            first.websocket.transport.abort()
        async with RealtimeClient.connect(
                f"{stack.ws_url}?resume={token}&probe=again{index}", extensions=None,
                additional_headers=headers) as again:
            resumed = await again.wait_for("session.resumed")
            assert resumed["session_id"] == session["id"]
            assert resumed["heard"][0]["item_id"] == item_id
            assert resumed["heard"][0]["played_ms"] == 500
        await asyncio.sleep(0.2)
        home = stack.replica_of(f"probe=first{index}")
        assert stack.replica_of(f"probe=again{index}") == home
        homes.add(home)
    assert len(homes) > 1, homes
    assert len(stack.replica_ports) == REPLICAS


async def test_a_page_through_nginx_stays_on_its_replica_across_a_reload(
        stack: ScaleStack) -> None:
    """Headless Chromium opens the page through nginx, prompts, and reloads mid-reply: the
    page, every file it loads and both of its WebSockets (the first and the resuming one) go
    to one replica, and the page shows its session given back."""
    logged = len(stack.routes())
    async with chromium() as browser, open_demo(browser, stack.http_url) as demo:
        response_id = await demo.prompt("say: The tide turns at noon and the ferry waits.")
        await wait_playing(demo, response_id, 800)
        await demo.page.reload()
        await demo.wait_state("s.resumed.length === 1 && s.connected", timeout_s=30)
        resumed = (await demo.state("s.resumed"))[0]
        assert resumed["session_id"] == demo.of_type("session.created")[0]["session"]["id"]
        assert resumed["heard"][0]["interrupted"] is True
    await asyncio.sleep(0.3)
    routes = stack.routes()[logged:]
    sockets = [uri for _, uri, _ in routes if uri.startswith("/v1/realtime")]
    assert len(sockets) == 2 and sockets[1].startswith("/v1/realtime?resume="), sockets
    assert len(routes) > 10 and len({upstream for _, _, upstream in routes}) == 1, routes
