"""`/metrics`: Prometheus metrics of a real server, scraped over HTTP while sessions run.

The exposition is parsed with `prometheus_client`'s own text parser. Unit tests feed
`SessionMetrics` crafted events for what a single server run cannot show cheaply (a paused and
resumed reply, a failed one).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from server.metrics import REMEMBERED, MeasuredResponder, MeasuredSynthesizer, ServerMetrics
from server.realtime import event_parser, protocol
from server.responders.prompt import Prompt
from tests.conftest import loaded_synthesizer
from tests.realtime_client import RealtimeClient

REPLY = "say: one two three four five six seven eight."
"""Eight words of the uniform voice: 400 ms each (3200 ms)."""


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value of a text exposition."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(scraped: dict, name: str, **labels: str) -> float:
    """One sample's value; 0 when the series does not exist (yet)."""
    return scraped.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape(server, **headers: str) -> dict:
    async with httpx.AsyncClient() as http:
        answer = await http.get(f"{server.http_url}/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(answer.text)


async def play_to_the_end(client: RealtimeClient, response_id: str) -> None:
    """ACK the reply's audio as it arrives until its `response.done`, then the final ACK."""
    done = await client.wait_for("response.done", lambda e: e["response"]["id"] == response_id)
    assert done["response"]["status"] == "completed"
    sent = max(e["audio_end_ms"] for e in client.of_type("response.output_audio.delta",
                                                          response_id=response_id))
    await client.ack(response_id, sent)
    await client.wait_for("playback.acknowledged", lambda e: e["played_ms"] == sent)


async def test_a_played_reply_and_a_barge_in_are_counted(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks", lead_ms=10_000)
    before = await scrape(server)
    assert value(before, "duplex_sessions_open") == 0
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt(REPLY)
        await play_to_the_end(client, response_id)
        response_id, item_id = await client.prompt(REPLY)
        # The synthesis ended (not only audio past 1000 ms sent: the last delta can reach the
        # client before the server has seen the synthesis end, and a barge-in then cancels the
        # response; one fresh-clone CI run in five).
        await client.wait_for("response.output_audio.done",
                              lambda e: e["response_id"] == response_id)
        await client.ack(response_id, 900)
        await client.barge_in(response_id, 900, source="button")
        heard = await client.heard(item_id, lambda e: e["elapsed_ms"] is not None)
        assert heard["method"] == "marks"
        during = await scrape(server)
    assert value(during, "duplex_sessions_open") == 1
    assert value(during, "duplex_sessions_total") == 1
    # Both replies were sent in full (lead 10 s): the barge-in cut the second one while it was
    # still playing, after its response.done.
    assert value(during, "duplex_responses_total", status="completed") == 2
    assert value(during, "duplex_barge_ins_total", source="barge_in:button") == 1
    assert sum(v for (name, _), v in during.items() if name == "duplex_barge_ins_total") == 1
    assert value(during, "duplex_calibrations_total", method="marks") == 1
    assert value(during, "duplex_calibration_seconds_count", method="marks") == 1
    assert value(during, "duplex_calibration_seconds_sum", method="marks") == pytest.approx(
        heard["elapsed_ms"] / 1000, abs=0.001)
    assert value(during, "duplex_first_audio_seconds_count") == 2
    assert value(during, "duplex_tts_real_time_factor_count", engine="uniform") >= 2
    assert value(during, "duplex_llm_time_to_first_token_seconds_count", responder="demo") == 2
    assert value(during, "process_resident_memory_bytes") > 0
    for _ in range(50):
        after = await scrape(server)
        if value(after, "duplex_sessions_open") == 0:
            break
        await asyncio.sleep(0.05)
    assert value(after, "duplex_sessions_open") == 0
    assert value(after, "duplex_sessions_total") == 1


async def test_ack_anomalies_are_counted_by_kind(start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks", lead_ms=10_000)
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, _ = await client.prompt(REPLY)
        await client.wait_for("response.done", lambda e: e["response"]["id"] == response_id)
        await client.ack(response_id, 1200)
        await client.ack(response_id, 800)
        await client.ack(response_id, 60_000)
        await client.ack("resp_unknown", 100)
        await client.wait_for("error", lambda e: e["error"]["code"] == "response_not_found")
        await client.wait_for("playback.acknowledged", lambda e: e["played_ms"] == 3200)
        scraped = await scrape(server)
    assert value(scraped, "duplex_ack_anomalies_total", kind="backwards") == 1
    assert value(scraped, "duplex_ack_anomalies_total", kind="beyond_sent") == 1
    assert value(scraped, "duplex_ack_anomalies_total", kind="refused") == 1


async def test_a_truncate_from_a_client_without_acks_is_counted_as_truncate(
        start_server) -> None:
    server = await start_server(tts="uniform", calibration="marks")
    async with RealtimeClient.connect(server.ws_url) as client:
        response_id, item_id = await client.prompt(REPLY)
        await client.wait_audio_until(response_id, 600)
        await client.send({"type": "conversation.item.truncate", "item_id": item_id,
                           "content_index": 0, "audio_end_ms": 500})
        await client.heard(item_id, lambda e: e["interrupted"])
        scraped = await scrape(server)
    assert value(scraped, "duplex_barge_ins_total", source="truncate") == 1
    assert value(scraped, "duplex_responses_total", status="cancelled") == 1


async def test_refused_sessions_are_counted_and_metrics_need_the_key(start_server) -> None:
    server = await start_server(tts="uniform", max_sessions=1, api_key="s3cret")
    bearer = {"Authorization": "Bearer s3cret"}
    async with httpx.AsyncClient() as http:
        refused = await http.get(f"{server.http_url}/metrics")
    assert refused.status_code == 401
    async with RealtimeClient.connect(server.ws_url, additional_headers=bearer):
        with pytest.raises(InvalidStatus):
            await connect(server.ws_url, additional_headers=bearer)
        with pytest.raises(InvalidStatus):
            await connect(server.ws_url)
        scraped = await scrape(server, **bearer)
    assert value(scraped, "duplex_sessions_refused_total", reason="full") == 1
    assert value(scraped, "duplex_sessions_refused_total", reason="api_key") == 1


def unit_session() -> tuple[ServerMetrics, object]:
    metrics = ServerMetrics()
    return metrics, metrics.session()


def heard(item_id: str, response_id: str, **fields: object) -> dict:
    return {"type": "conversation.item.heard", "item_id": item_id, "response_id": response_id,
            "method": "marks", "elapsed_ms": None, "interrupted": True, **fields}


def test_paused_and_resumed_replies_are_counted() -> None:
    metrics, session = unit_session()
    for event_type in ("response.paused", "response.resumed", "response.paused"):
        session.server_event({"type": event_type, "response_id": "resp_1"})
    scraped = samples(metrics.exposition().decode())
    assert value(scraped, "duplex_responses_paused_total") == 2
    assert value(scraped, "duplex_backchannels_resumed_total") == 1


def test_interruptions_are_attributed_to_the_event_applied_and_counted_once() -> None:
    metrics, session = unit_session()
    append = protocol.InputAudioAppend(event_id=None, pcm16=b"\0\0")
    session.client_event(append)
    session.server_event(heard("item_1", "resp_1"))
    session.server_event(heard("item_1", "resp_1", elapsed_ms=3.0))
    barge_in = protocol.BargeIn(event_id=None, response_id="resp_2", item_id=None,
                                audio_end_ms=10, source="my-own-ui")
    session.client_event(barge_in)
    session.server_event(heard("item_2", "resp_2"))
    session.server_event({"type": "response.done",
                          "response": {"id": "resp_3", "status": "failed"}})
    session.server_event(heard("item_3", "resp_3"))
    cross_check = heard("item_1", "resp_1", text="one two", marks_agree=False)
    session.server_event(cross_check)
    session.server_event(cross_check)
    scraped = samples(metrics.exposition().decode())
    assert value(scraped, "duplex_calibration_cross_checks_total", agree="false") == 1
    assert value(scraped, "duplex_barge_ins_total", source="server_vad") == 1
    assert value(scraped, "duplex_barge_ins_total", source="barge_in:other") == 1
    assert sum(v for (name, _), v in scraped.items() if name == "duplex_barge_ins_total") == 2
    assert value(scraped, "duplex_responses_total", status="failed") == 1
    assert value(scraped, "duplex_calibrations_total", method="marks") == 1


def refused(frame: str) -> protocol.ProtocolError:
    """The error the guarded parser refuses `frame` with."""
    with pytest.raises(protocol.ProtocolError) as refusal:
        event_parser.parse_client_event(frame)
    return refusal.value


def test_a_refused_frame_that_is_not_an_ack_is_no_ack_anomaly() -> None:
    metrics, session = unit_session()
    session.client_event(refused(json.dumps({"type": "barge_in", "audio_end_ms": -1})))
    session.client_event(refused("not json"))
    session.client_event(refused(json.dumps({"type": "playback.ack", "played_ms": "x"})))
    # Issue 26: a 2 kB frame nested past the recursion limit killed its session in metrics'
    # second parse of the refused frame; the refusal now carries its type, and nothing parses
    # the frame again.
    session.client_event(refused('{"type": "playback.ack", "x": ' + "[" * 2000 + "]" * 2000
                                 + "}"))
    session.client_event(refused("[" * 2048))
    scraped = samples(metrics.exposition().decode())
    assert value(scraped, "duplex_ack_anomalies_total", kind="refused") == 1


class ClosableResponder:
    """A responder whose stream says whether it was closed (an LLM's HTTP stream)."""

    def __init__(self) -> None:
        self.closed = False

    async def respond(self, prompt: Prompt) -> AsyncIterator[str]:
        try:
            for word in ("one ", "two ", "three "):
                yield word
                await asyncio.sleep(0)
        finally:
            self.closed = True


async def test_closing_a_measured_reply_closes_the_inner_stream() -> None:
    metrics = ServerMetrics()
    inner = ClosableResponder()
    responder = MeasuredResponder(inner, metrics)
    assert responder.label == "closable"
    prompt = Prompt(instructions="", turns=(), interruption_note="")
    async with contextlib.aclosing(responder.respond(prompt)) as deltas:
        assert await anext(deltas) == "one "
    assert inner.closed
    scraped = samples(metrics.exposition().decode())
    assert value(scraped, "duplex_llm_time_to_first_token_seconds_count",
                 responder="closable") == 1


def test_the_tts_real_time_factor_is_measured_per_segment() -> None:
    metrics = ServerMetrics()
    synthesizer = MeasuredSynthesizer(loaded_synthesizer("uniform"), metrics)
    chunks = list(synthesizer.synthesize("one two three four"))
    audio_s = sum(len(chunk.pcm) for chunk in chunks) / synthesizer.sample_rate_hz
    assert audio_s > 1
    with contextlib.closing(synthesizer.synthesize("five six seven")) as early:
        next(early)
    scraped = samples(metrics.exposition().decode())
    assert value(scraped, "duplex_tts_real_time_factor_count", engine="uniform") == 2
    assert 0 < value(scraped, "duplex_tts_real_time_factor_sum", engine="uniform") < 1


def test_a_long_session_remembers_only_its_latest_responses_and_items() -> None:
    """What a session's metrics keep per response or item (played positions, cross-checked
    heard texts, interrupted items, failed responses) is bounded: a client can make responses
    for as long as its session lasts."""
    metrics, session = unit_session()
    for index in range(1000):
        item_id, response_id = f"item_{index}", f"resp_{index}"
        session.client_event(protocol.PlaybackAck(None, response_id, None, 10, False))
        session.server_event({"type": "playback.acknowledged", "response_id": response_id,
                              "played_ms": 10, "cursor": {"sent_ms": 100}})
        session.server_event({"type": "response.done",
                              "response": {"id": response_id, "status": "failed"}})
        session.server_event(heard(item_id, response_id, text="x" * 4000, marks_agree=True))
    remembered = [session._played, session._cross_checked, session._interrupted,
                  session._failed]
    assert [len(kept) for kept in remembered] == [REMEMBERED] * 4
    assert "item_999" in session._cross_checked and "item_0" not in session._cross_checked
    scraped = samples(metrics.exposition().decode())
    assert value(scraped, "duplex_calibration_cross_checks_total", agree="true") == 1000
    assert value(scraped, "duplex_responses_total", status="failed") == 1000
