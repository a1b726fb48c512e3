"""A written token is kept whole or not at all in history, whatever the policy (issue inputs on
the uniform voice and on real Piper)."""

from __future__ import annotations

import pytest

from tests.realtime_client import RealtimeClient


async def heard_after_barge_in(server, text: str, audio_end_ms: int) -> str:
    """Prompt `say: text`, ACK and barge in at `audio_end_ms`; the calibrated heard text."""
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt(f"say: {text}")
        await client.wait_audio_until(response_id, audio_end_ms, timeout=60)
        await client.ack(response_id, audio_end_ms)
        await client.barge_in(response_id, audio_end_ms)
        heard = await client.heard(item_id, lambda e: e["method"] not in ("none",), timeout=30)
        return heard["text"]


@pytest.mark.parametrize(("calibration", "text", "at_ms", "expected"), [
    ("marks", "Read CVE-2024-3094 now.", 1600, "Read"),
    ("ratio", "Read CVE-2024-3094 now.", 1600, "Read"),
])
async def test_uniform_voice_cuts_keep_tokens_whole(start_server, calibration, text, at_ms,
                                                     expected) -> None:
    """The issue's input: uniform voice, "Read CVE-2024-3094 now." at 1600 ms gave
    "Read CVE-"."""
    server = await start_server(tts="uniform", calibration=calibration)
    assert await heard_after_barge_in(server, text, at_ms) == expected


@pytest.mark.parametrize(("text", "at_ms", "expected"), [
    ("Go to example.com now.", 1185, "Go to"),
    ("Serves 4\u20136 people.", 639, "Serves"),
])
async def test_piper_cuts_inside_a_url_or_a_range_keep_the_token_out(start_server, text, at_ms,
                                                                     expected) -> None:
    """The issue's inputs on Piper: "Go to example." and "Serves 4\u2013"."""
    server = await start_server(tts="piper", calibration="marks")
    assert await heard_after_barge_in(server, text, at_ms) == expected


@pytest.mark.parametrize(("text", "at_ms", "expected"), [
    ("It costs $1,200.50 today.", 1800, "It costs"),
    ("It costs $1,200.50 today.", 3300, "It costs $1,200.50"),
    ("Henry VIII had six wives.", 600, "Henry"),
    ("Henry VIII had six wives.", 950, "Henry VIII"),
    ("Das kostet 1.200,50 \u20ac im Monat, sagte sie.", 2000, "Das kostet"),
])
async def test_piper_cuts_inside_a_number_said_as_meant_keep_it_out(start_server, text, at_ms,
                                                                   expected) -> None:
    """Money, a regnal number and a German amount spoken as words (`spoken_numbers`): a cut
    inside their words keeps the written token out, a cut after them keeps it whole, exactly
    as written (deterministic Piper: "$1,200.50" sounds 533-3076 ms, "VIII" 394-836 ms, the
    German amount 551-3311 ms with the German espeak-ng voice)."""
    server = await start_server(tts="piper", calibration="marks")
    heard = await heard_after_barge_in(server, text, at_ms)
    assert heard == expected and text.startswith(heard)
