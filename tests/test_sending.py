"""The sending side of a session (`server.sending.Sender`), on a real server on loopback with
the uniform test voice (400 ms per word, made far faster than real time):

- a client that reports no playback gets audio paced by real time: at any moment at most the
  time since its first audio, plus the lead and the first-ACK jitter;
- a client that ACKs what it received gets the audio as fast as it ACKs, ahead of real time;
- synthesis holds back while a reply has `GENERATION_AHEAD_MS` of audio unsent
  (`Sender.wait_for_room`), and goes on as sending catches up;
- a reply's events leave in the order the session made them: its audio in order, its
  `response.output_audio.done` after the last delta, its `response.done` last.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from server.connection import Connection
from server.sending import GENERATION_AHEAD_MS
from tests.realtime_client import RealtimeClient
from tests.test_faults import play_fully, until

WORD_MS = 400
"""Length of one word of the uniform voice (ms)."""

SENTENCES = 12
SENTENCE_WORDS = 3
LONG_REPLY = "say: " + " ".join("One two three." for _ in range(SENTENCES))
"""A reply of 12 sentences (segments) of 3 words: 14.4 s of audio, each segment 1.2 s."""


def audio_end_ms(client: RealtimeClient, response_id: str) -> int:
    """The end (ms) of the reply's audio received so far."""
    return max((e["audio_end_ms"] for e in client.of_type(
        "response.output_audio.delta", response_id=response_id)), default=0)


async def test_audio_is_paced_by_real_time_for_a_client_that_reports_no_playback(
    start_server: Any,
) -> None:
    server = await start_server(tts="uniform", lead_ms=400)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt(LONG_REPLY)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == response_id)
        first_at = time.monotonic()
        samples: list[tuple[float, int]] = []
        while time.monotonic() - first_at < 2.0:
            await client.drain(0.05)
            samples.append(((time.monotonic() - first_at) * 1000.0,
                            audio_end_ms(client, response_id)))
    lead_and_jitter_ms = 400 + 100
    slack_ms = 1000  # the first delta's own way to a loaded client; unpaced, 5 s came at once
    for elapsed_ms, received_ms in samples:
        assert received_ms <= elapsed_ms + lead_and_jitter_ms + slack_ms, samples
    assert samples[-1][1] >= 1000, "audio kept coming in real time"


async def test_a_client_that_acks_what_it_received_gets_the_reply_faster_than_real_time(
    start_server: Any,
) -> None:
    server = await start_server(tts="uniform", lead_ms=400)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt(LONG_REPLY)
        started = time.monotonic()
        done = await play_fully(client, response_id)
        took_ms = (time.monotonic() - started) * 1000.0
    total_ms = SENTENCES * SENTENCE_WORDS * WORD_MS
    assert done["response"]["status"] == "completed"
    assert audio_end_ms(client, response_id) == total_ms
    assert took_ms < total_ms - 4000, "the ACKs released the audio ahead of real time"


async def test_synthesis_stays_a_bounded_distance_ahead_of_sending(
    start_server: Any, served_connections: list[Connection],
) -> None:
    server = await start_server(tts="uniform", lead_ms=400)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt(LONG_REPLY)
        (connection,) = served_connections
        cursor = connection.session.responses[response_id].cursor
        segment_ms = SENTENCE_WORDS * WORD_MS
        await until(lambda: cursor.generated_ms - cursor.sent_ms
                    >= GENERATION_AHEAD_MS - segment_ms, 10, "synthesis runs ahead")
        leads = []
        watched_until = time.monotonic() + 1.5
        while time.monotonic() < watched_until:
            leads.append(cursor.generated_ms - cursor.sent_ms)
            await asyncio.sleep(0.01)
        assert max(leads) <= GENERATION_AHEAD_MS + segment_ms, max(leads)
        generated_ms = cursor.generated_ms
        assert generated_ms < SENTENCES * segment_ms, "the rest waits for sending"
        await until(lambda: cursor.generated_ms > generated_ms, 10,
                    "synthesis goes on as the audio is sent")


async def test_a_replys_events_leave_in_the_order_the_session_made_them(
    start_server: Any,
) -> None:
    server = await start_server(tts="uniform")
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt("say: One two three. Four five.")
        await play_fully(client, response_id)
    types = [e["type"] for e in client.events if e.get("response_id") == response_id
             or e.get("response", {}).get("id") == response_id]
    assert types[0] == "response.created"
    assert types[-1] == "response.done"
    assert types.index("response.output_audio.done") > max(
        i for i, kind in enumerate(types) if kind == "response.output_audio.delta")
    ends = [e["audio_end_ms"] for e in client.of_type("response.output_audio.delta",
                                                       response_id=response_id)]
    assert ends == sorted(set(ends))
    assert ends[-1] == 5 * WORD_MS
