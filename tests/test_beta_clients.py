"""Beta-protocol clients get a clear handshake refusal, never silence (issue 25, failing input
6): their event names differ from the GA ones this server speaks."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from server.app import BETA_REFUSAL


@pytest.mark.parametrize("options", [
    {"additional_headers": {"OpenAI-Beta": "realtime=v1"}},
    {"subprotocols": ["realtime", "openai-beta.realtime-v1"]},
])
async def test_a_beta_client_is_refused_at_the_handshake_with_a_reason(
        start_server, options) -> None:
    server = await start_server(tts="uniform")
    with pytest.raises(InvalidStatus) as refused:
        async with connect(server.ws_url, **options):
            pass
    assert refused.value.response.status_code == 400
    assert refused.value.response.body.decode() == BETA_REFUSAL


async def test_a_ga_client_naming_other_betas_still_connects(start_server) -> None:
    server = await start_server(tts="uniform")
    async with connect(server.ws_url, additional_headers={"OpenAI-Beta": "assistants=v2"}) as ws:
        assert '"session.created"' in await ws.recv()
