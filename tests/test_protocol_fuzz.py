"""Nothing a client sends kills its session: fuzzed frames against a real server on loopback.

The batches and the checks live in `tests/protocol_fuzz.py`, the frames' strategies in
`tests/fuzz_frames.py` and `tests/fuzz_defects.py` (shared with `benchmarks/fuzz_protocol.py`,
the randomized run of >= 100,000 frames). Here the "ci" profile
(tests/conftest.py) makes the slice deterministic; `HYPOTHESIS_PROFILE=fuzz` explores more.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from hypothesis import HealthCheck, given, settings

from server.realtime.protocol import MAX_EXACT_INTEGER
from tests.fuzz_frames import FuzzFrame
from tests.protocol_fuzz import frame_batches, run_batch
from tests.realtime_client import RealtimeClient
from tests.test_protocol_errors import establish_heard_reply


@pytest.fixture
async def fuzz_server(start_server):
    """One server for every example of a test (uniform voice, audio sent at TTS speed)."""
    return await start_server(tts="uniform", calibration="marks", lead_ms=60_000)


def server_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Log records at ERROR or above (server, websockets, asyncio), with their tracebacks."""
    return [caplog.handler.format(record) for record in caplog.records
            if record.levelno >= logging.ERROR]


@settings(deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=frame_batches())
async def test_fuzzed_frames_get_errors_and_the_session_stays_usable(
    fuzz_server, caplog: pytest.LogCaptureFixture, batch: list[FuzzFrame]
) -> None:
    """A new session takes one batch (`run_batch`): it stays open, every invalid frame gets
    one `error`, no valid one is refused for its form, a prompt after the batch gets its whole
    reply, and nothing is logged at ERROR."""
    caplog.clear()
    async with RealtimeClient.connect(fuzz_server.ws_url) as client:
        outcome = await run_batch(client, batch, "fz")
        assert client.websocket.close_code is None
    assert outcome.clean, outcome
    assert not server_errors(caplog)


def _event(event_type: str, fields: str) -> str:
    """A frame of `event_type` with event_id "lim" and the raw JSON `fields` (may be "")."""
    return '{"type": "' + event_type + '", "event_id": "lim"' + (", " if fields else "") + (
        fields + "}")


def _ack(played_ms: str) -> str:
    return _event("playback.ack", '"response_id": "RID", "played_ms": ' + played_ms)


def _user_text(text: str) -> str:
    return _event("conversation.item.create", '"item": {"type": "message", "role": "user", '
                  '"content": [{"type": "input_text", "text": "' + text + '"}]}')


LIMITS: list[tuple[str, str | bytes, str, str | None, str | None]] = [
    # (name, frame, error code, param, event_id): strings with a lone surrogate
    ("surrogate event_id", '{"type": "bogus", "event_id": "\\ud800"}', "invalid_value",
     "event_id", None),
    ("surrogate type", _event("bogus\\udfff", ""), "invalid_value", "type", "lim"),
    ("surrogate text", _user_text("hi \\ud83d"), "invalid_value", "item.content.0.text", "lim"),
    ("surrogate field name", _event("session.update", '"session": {"\\udc00": 1}'),
     "invalid_value", "session", "lim"),
    ("surrogate voice", _event("session.update",
                               '"session": {"audio": {"output": {"voice": "\\ude00\\ud83d"}}}'),
     "invalid_value", "session.audio.output.voice", "lim"),
    ("surrogate instructions", _event("response.create",
                                      '"response": {"instructions": "\\udbff"}'),
     "invalid_value", "response.instructions", "lim"),
    # nesting
    ("nesting past the recursion limit", "[" * 100_000 + "]" * 100_000, "invalid_value", None,
     None),
    ("nesting 17 deep", _event("response.create",
                               '"response": {"metadata": ' + "[" * 15 + "]" * 15 + "}"),
     "invalid_value", "response.metadata" + ".0" * 14, "lim"),
    # numbers
    ("int of 5000 digits", _ack("1" * 5000), "invalid_value", None, None),
    ("int 10**30", _ack(str(10**30)), "invalid_value", "played_ms", "lim"),
    ("int 2**53", _ack(str(MAX_EXACT_INTEGER + 1)), "invalid_value", "played_ms", "lim"),
    ("1e400", _ack("1e400"), "invalid_value", "played_ms", "lim"),
    ("NaN", _ack("NaN"), "invalid_value", "played_ms", "lim"),
    ("-Infinity", _ack("-Infinity"), "invalid_value", "played_ms", "lim"),
    ("float ms", _ack("100.0"), "invalid_type", "played_ms", "lim"),
    ("negative zero", _ack("-0.0"), "invalid_type", "played_ms", "lim"),
    ("boolean ms", _ack("true"), "invalid_type", "played_ms", "lim"),
    ("float content_index", _event("conversation.item.truncate", '"item_id": "IID", '
                                   '"content_index": 0.0, "audio_end_ms": 10'),
     "invalid_value", "content_index", "lim"),
    ("float audio_end_ms", _event("barge_in", '"response_id": "RID", "audio_end_ms": 1e15'),
     "invalid_type", "audio_end_ms", "lim"),
    ("boolean speed", _event("session.update", '"session": {"audio": {"output": {"speed": true}}}'),
     "invalid_type", "session.audio.output.speed", "lim"),
    # frames that are no event
    ("binary, invalid UTF-8", b"\xff\xfe\xed\xa0\x80", "invalid_frame", None, None),
    ("top-level string", '"a string"', "invalid_json", None, None),
    ("top-level null", "null", "invalid_json", None, None),
]


async def test_values_at_pythons_limits_get_an_error_and_change_nothing(start_server) -> None:
    """Each frame gets one `error` (code, param, event_id); the session state is unchanged:
    the first reply's heard text stays and a new prompt still gets a whole reply."""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=60_000)
    async with RealtimeClient.connect(server.ws_url) as client:
        first_id, first_item, established = await establish_heard_reply(client)
        for name, frame, code, param, event_id in LIMITS:
            if isinstance(frame, str):
                frame = frame.replace("RID", first_id).replace("IID", first_item)
            await client.send_raw(frame)
            error = (await client.wait_for("error"))["error"]
            assert (error["code"], error["param"], error["event_id"]) == (code, param, event_id), (
                name, error)
        await client.prompt("say: Still here.")
        assert (await client.wait_for("response.done"))["response"]["status"] == "completed"
        assert (await client.retrieve(first_item))["content"][0]["transcript"] == (
            established["text"])
        assert not client.of_type("error")[len(LIMITS):]


async def test_frames_refused_above_the_event_rate_are_answered_whatever_they_hold(
    start_server, caplog: pytest.LogCaptureFixture
) -> None:
    """A frame refused by the event rate limit is never parsed, but its error names its
    `event_id` when readable: frames past Python's limits or with an unencodable event_id get
    an error naming none, and the session stays."""
    server = await start_server(tts="uniform", max_events_per_s=6)
    refused: list[str | bytes] = [
        "[" * 100_000 + "]" * 100_000, _ack("1" * 5000),
        '{"type": "bogus", "event_id": "\\ud800"}', b"\xff", _ack("NaN"),
    ]
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        for index in range(6):
            await client.send({"type": "input_audio_buffer.clear", "event_id": f"ok{index}"})
        for frame in refused:
            await client.send_raw(frame)
        errors = [(await client.wait_for("error"))["error"] for _ in refused]
        assert [(e["code"], e["event_id"]) for e in errors] == (
            [("rate_limit_exceeded", None)] * 4 + [("rate_limit_exceeded", "lim")])
        await asyncio.sleep(1.0)
        await client.prompt("say: Still here.")
        assert (await client.wait_for("response.done"))["response"]["status"] == "completed"
    assert not server_errors(caplog)
