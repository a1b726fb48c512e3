"""`/metrics` text and transport: `TextExposition` writes exactly what `prometheus_client`'s
`generate_latest` writes, with the values of the moment; `--metrics-port` serves the same
metrics from a thread of its own (keep-alive, API key, 404 elsewhere); the main port's HTTP
answers say `Connection: close`, since websockets closes the connection after them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator

import httpx
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
)

from server.metrics import ServerMetrics, TextExposition
from tests.realtime_client import RealtimeClient
from tests.test_metrics import samples, value

ODD_LABELS = ("uniform", "piper", 'we"ird', "back\\slash", "new\nline", "ünïcode", "")
"""Label values, some of which the text format must escape (quote, backslash, newline)."""

OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("tts"), st.sampled_from(ODD_LABELS), st.floats(0.001, 5.0)),
    st.tuples(st.just("first_token"), st.sampled_from(ODD_LABELS), st.floats(0.0, 10.0)),
    st.tuples(st.just("first_audio"), st.just(""), st.floats(0.0, 10.0)),
    st.tuples(st.just("refused"), st.sampled_from(ODD_LABELS), st.just(0.0)),
    st.tuples(st.just("open"), st.just(""), st.floats(-3.0, 3.0)),
    st.tuples(st.just("render"), st.just(""), st.just(0.0)),
), max_size=40)


def unit_metrics() -> ServerMetrics:
    """Server metrics on a registry without the process collector (its CPU seconds change
    between two renders)."""
    return ServerMetrics(registry=CollectorRegistry())


@given(OPERATIONS)
def test_every_render_is_generate_latest_text_with_the_values_of_now(operations) -> None:
    metrics = unit_metrics()
    for kind, label, number in [*operations, ("render", "", 0.0)]:
        if kind == "tts":
            metrics.observe_tts(label, number * 0.1, number)
        elif kind == "first_token":
            metrics.observe_first_token(number, label)
        elif kind == "first_audio":
            metrics.first_audio_seconds.observe(number)
        elif kind == "refused":
            metrics.sessions_refused.labels(label).inc()
        elif kind == "open":
            metrics.sessions_open.inc(number)
        else:
            assert metrics.exposition() == generate_latest(metrics.registry)


def test_a_series_that_changes_or_appears_after_a_render_is_rendered_anew() -> None:
    metrics = unit_metrics()
    metrics.observe_tts("uniform", 0.1, 1.0)
    first = samples(metrics.exposition().decode())
    assert value(first, "duplex_tts_real_time_factor_count", engine="uniform") == 1
    metrics.observe_tts("uniform", 0.3, 1.0)
    metrics.observe_tts('we"ird', 0.3, 1.0)
    metrics.sessions.inc(2)
    second = samples(metrics.exposition().decode())
    assert value(second, "duplex_tts_real_time_factor_count", engine="uniform") == 2
    assert value(second, "duplex_tts_real_time_factor_sum", engine="uniform") == 0.4
    assert value(second, "duplex_tts_real_time_factor_count", engine='we"ird') == 1
    assert value(second, "duplex_sessions_total") == 2


class TimestampedCollector:
    """Families `generate_latest` renders its own way: a sample with a timestamp, a counter
    with a `_created` sample, a gauge histogram (`_gsum`, `_gcount`)."""

    def __init__(self) -> None:
        self.value = 1.0

    def collect(self) -> Iterator[object]:
        gauge = GaugeMetricFamily("demo_stamped", "A gauge with a timestamp.", labels=["a"])
        gauge.add_metric(["x"], self.value, timestamp=1_700_000_000.5)
        yield gauge
        counter = CounterMetricFamily("demo_created", "A counter with _created.",
                                      labels=["a"])
        counter.add_metric(["y"], self.value, created=1_700_000_000.0)
        yield counter
        yield GaugeHistogramMetricFamily("demo_gauge_histogram", "A gauge histogram.",
                                         buckets=[("1.0", self.value), ("+Inf", 2.0)],
                                         gsum_value=3.0)


def test_families_with_timestamps_or_created_samples_are_generate_latest_text() -> None:
    registry = CollectorRegistry()
    collector = TimestampedCollector()
    registry.register(collector)
    ServerMetrics(registry=registry)
    exposition = TextExposition(registry)
    for number in (1.0, 2.5):
        collector.value = number
        assert exposition.render() == generate_latest(registry)


@contextlib.asynccontextmanager
async def metrics_port_server(start_server, **overrides: object) -> AsyncIterator[object]:
    """A running server with `--metrics-port 0`; its metrics thread is closed at the end."""
    server = await start_server(tts="uniform", metrics_port=0, **overrides)
    try:
        yield server
    finally:
        server.demo.metrics_server.close()


async def test_the_metrics_port_serves_the_same_metrics(start_server) -> None:
    async with metrics_port_server(start_server) as server:
        port = server.demo.metrics_port()
        assert port not in (None, server.demo.port())
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient() as http:
            before = await http.get(f"{url}/metrics")
            async with RealtimeClient.connect(server.ws_url):
                during = await http.get(f"{url}/metrics")
                main = await http.get(f"{server.http_url}/metrics")
            missing = await http.get(f"{url}/healthz")
        for answer in (before, during):
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert answer.headers["connection"] == "close"
        assert value(samples(before.text), "duplex_sessions_total") == 0
        assert value(samples(during.text), "duplex_sessions_total") == 1
        assert value(samples(during.text), "duplex_sessions_open") == 1
        assert value(samples(main.text), "duplex_sessions_open") == 1
        assert missing.status_code == 404


async def test_the_metrics_port_answers_while_the_event_loop_is_held(start_server) -> None:
    async with metrics_port_server(start_server) as server:
        url = f"http://127.0.0.1:{server.demo.metrics_port()}/metrics"
        answers: list[httpx.Response] = []
        answered = threading.Event()

        def scrape() -> None:
            answers.append(httpx.get(url, timeout=30))
            answered.set()

        scraper = threading.Thread(target=scrape)
        scraper.start()
        # This blocks the event loop (the one serving the main port and the sessions) until
        # the scrape is answered: only a server that does not need the loop can answer.
        assert answered.wait(timeout=30)
        scraper.join()
    assert answers[0].status_code == 200
    assert value(samples(answers[0].text), "duplex_sessions_open") == 0


async def test_the_metrics_port_needs_the_api_key_when_one_is_set(start_server) -> None:
    async with metrics_port_server(start_server, api_key="s3cret") as server:
        url = f"http://127.0.0.1:{server.demo.metrics_port()}/metrics"
        async with httpx.AsyncClient() as http:
            refused = await http.get(url)
            wrong = await http.get(url, headers={"Authorization": "Bearer nope"})
            allowed = await http.get(url, headers={"Authorization": "Bearer s3cret"})
    assert refused.status_code == wrong.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="duplex-demo"'
    assert allowed.status_code == 200
    assert value(samples(allowed.text), "duplex_sessions_open") == 0


async def test_main_port_answers_close_their_connection_and_a_pooled_client_keeps_working(
        start_server) -> None:
    server = await start_server(tts="uniform")
    async with httpx.AsyncClient() as http:
        answers = [await http.get(f"{server.http_url}{path}")
                   for path in ("/metrics", "/healthz", "/", "/nothing-here") * 10]
    assert all(a.headers["connection"] == "close" for a in answers)
    assert [a.status_code for a in answers] == [200, 200, 200, 404] * 10


async def test_connections_trickling_bytes_take_no_thread_and_leave_scrapes_answered(
        start_server) -> None:
    """Issue 26: 1,190 connections trickling one byte each took 1,192 threads of the old
    thread-per-connection metrics port, and every file descriptor."""
    async with metrics_port_server(start_server) as server:
        port = server.demo.metrics_port()
        threads = threading.active_count()
        writers = []
        for _ in range(300):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"G")
            writers.append(writer)
        await asyncio.sleep(0.5)
        assert threading.active_count() == threads
        answer = await asyncio.to_thread(httpx.get, f"http://127.0.0.1:{port}/metrics",
                                         timeout=10)
        assert answer.status_code == 200
        for writer in writers:
            writer.close()
