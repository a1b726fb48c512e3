"""Run-on replies on real Piper (issue 12 item 1): synthesized in short pieces, and calibrated
from their word marks even when their audio is over the retention limit."""

from __future__ import annotations

import pytest

from tests.realtime_client import RealtimeClient

RUN_ON = " ".join(
    ["the", "river", "kept", "rising", "past", "old", "stone", "walls", "near", "town"] * 60
)


@pytest.mark.parametrize("calibration", ["marks", "auto"])
async def test_a_600_word_run_on_is_spoken_in_pieces_and_its_cut_calibrated(
    start_server, calibration: str
) -> None:
    """`say:` + 600 unpunctuated words: one 64.6 s synthesis before the first audio, and the
    recording (over `max_bytes`) was dropped with its marks, so the cut was never calibrated.
    Here the retention limit is 64 KiB (under 1 s of audio): the audio is dropped, the marks
    are kept and the heard text comes from them."""
    server = await start_server(tts="piper", calibration=calibration,
                                history_audio_max_bytes=65_536)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt(f"say: {RUN_ON}")
        first = await client.wait_for("response.output_audio.delta", timeout=60)
        await client.ack(response_id, 0)  # at once: a client that reports playback
        assert first["audio_end_ms"] < 5_000, "the first piece is a few words, not the sentence"
        await client.wait_audio_until(response_id, 2_000, timeout=60)
        await client.ack(response_id, 2_000)
        await client.barge_in(response_id, 2_000)
        heard = await client.heard(item_id, lambda e: e["method"] != "none", timeout=30)
    assert heard["method"] == "marks"
    text = heard["text"]
    assert text and RUN_ON.startswith(text) and len(text.split()) < 12
    spoken = [mark for delta in client.of_type("response.output_audio.delta",
                                               response_id=response_id)
              for mark in delta.get("marks", [])]
    assert spoken and not any(mark["estimated"] for mark in spoken)
    fully = [m for m in spoken if m["end_ms"] <= 2_000]
    started = [m for m in spoken if m["start_ms"] < 2_000]
    assert fully[-1]["char_end"] <= len(text) <= started[-1]["char_end"]
