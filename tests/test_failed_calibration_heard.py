"""A cut whose calibration fails is still announced once, settled (issue 25): an opted-in
client in settled mode (`session.extensions` without `interim_heard`) gets exactly one
`conversation.item.heard` for it, saying what history keeps without the calibration. Real
server on loopback, uniform voice (400 ms a word), `asr` calibration against a transcription
endpoint that fails (503) or answers after the calibration's deadline."""

from __future__ import annotations

import pytest

from tests.realtime_client import RealtimeClient
from tests.transcription_endpoint import TranscriptionEndpoint

COUNTING = "one two three four five six seven eight nine ten eleven twelve."


@pytest.mark.parametrize("fault", ["503", "deadline"])
async def test_a_failed_calibration_announces_the_kept_text_once(start_server, fault) -> None:
    with TranscriptionEndpoint() as endpoint:
        if fault == "503":
            endpoint.status = 503
        else:
            endpoint.delay_s = 3.0
        server = await start_server(tts="uniform", calibration="asr", asr_url=endpoint.url,
                                    calibration_timeout_ms=1000)
        async with RealtimeClient.connect(server.ws_url,
                                          extensions={"enabled": True}) as client:
            response_id, item_id = await client.prompt(f"say: {COUNTING}")
            await client.wait_audio_until(response_id, 1600)
            await client.ack(response_id, 1200)
            await client.barge_in(response_id, 1200)
            heard = await client.wait_for("conversation.item.heard",
                                          lambda e: e["item_id"] == item_id, timeout=10)
            await client.drain(2.0)
            retrieved = await client.retrieve(item_id)
        assert endpoint.requests, "the calibration asked the ASR"
        announced = [e for e in client.of_type("conversation.item.heard")
                     if e["item_id"] == item_id]
        assert announced == [heard]
        assert heard["interrupted"] is True
        assert heard["elapsed_ms"] is not None and heard["played_ms"] == 1200
        assert (heard["text"], heard["method"]) == (retrieved["content"][0]["transcript"],
                                                    "none")
        assert not client.of_type("error")
