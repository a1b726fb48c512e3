"""Prometheus metrics of one server process, served at `/metrics` (text format 0.0.4).

`ServerMetrics` owns a `prometheus_client` registry (one per `DemoServer`, so several servers
in one process never collide). Most metrics are derived from what a session already says: each
`Connection` hands every outgoing server event and every applied client event to its
`SessionMetrics` (`server_event`, `client_event`), which counts responses, interruptions,
pauses, calibrations, ACK anomalies and first-audio latency from them. The TTS real-time
factor and the responder's time to first token are measured by wrappers around the shared
synthesizer and responder (`ServerMetrics.instrument`). Label values come from fixed sets the
server defines, never from client text; no metric holds text or audio.

`/metrics` is answered on the server's own port by the event loop (`server.app`) and, with
`--metrics-port`, also by `server.metrics_port.MetricsHttpServer` on a port and thread of its
own, where a scrape does not wait for the loop's turn among the sessions' work.

The core (`server.realtime`) knows nothing of this module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from server.realtime import protocol
from server.realtime.drop import DROP_SOURCE
from server.responders.prompt import Prompt, Responder
from server.speech.synthesizer import SpeechChunk, SpeechSynthesizer, StopSignal

if TYPE_CHECKING:
    from server.services import Services

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
"""`Content-Type` of a `/metrics` answer: the Prometheus text format 0.0.4, which every
Prometheus version reads (the metric names here need none of 1.0.0's escaping)."""

FIRST_AUDIO_BUCKETS_S = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0)
"""`duplex_first_audio_seconds` buckets (s), around issue 14's targets (p50 <= 0.4 s, p95 <=
0.7 s with an LLM)."""
CALIBRATION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""`duplex_calibration_seconds` buckets (s): marks take about 1 ms, ASR about 0.5 s (DESIGN.md
section 6), the budget is `--calibration-timeout-ms` (1 s)."""
TTS_RTF_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0)
"""`duplex_tts_real_time_factor` buckets: Piper runs at about 0.05 here, espeak-ng at 0.001;
above 1 the voice is slower than real time."""
FIRST_TOKEN_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0)
"""`duplex_llm_time_to_first_token_seconds` buckets (s)."""

BARGE_IN_SOURCES = ("barge_in:vad", "barge_in:button", "barge_in:other", "server_vad",
                    "truncate", "cancel", "clear", "playback_ack", "new_response", "disconnect",
                    "other")
"""Label values of `duplex_barge_ins_total`: what cut a reply short (see `SessionMetrics`)."""

ACK_ANOMALIES = ("beyond_sent", "backwards", "refused")
"""Label values of `duplex_ack_anomalies_total`: a `played_ms` beyond the audio sent (clamped,
PROTOCOL.md rule 2), one below the position the response already reported (ACKs are monotonic;
ignored), and an ACK refused with an `error` event (unknown response or item, mismatch, bad
value)."""

_CAUSE_BY_EVENT: dict[type, str] = {
    protocol.InputAudioAppend: "server_vad",
    protocol.ItemTruncate: "truncate",
    protocol.ResponseCancel: "cancel",
    protocol.OutputAudioBufferClear: "clear",
    protocol.PlaybackAck: "playback_ack",
    protocol.ResponseCreate: "new_response",
    protocol.ItemCreate: "new_response",
    protocol.InputAudioCommit: "new_response",
}
"""The `duplex_barge_ins_total` source of an interruption that happens while a client event of
this class is applied (appended microphone audio: the server's VAD heard the person)."""


class ServerMetrics:
    """The metrics of one server and their Prometheus registry.

    Counters and histograms export no `*_created` series: `prometheus_client`'s switch for
    that is process-wide (`disable_created_metrics`), and this server is the process. The text
    format gives Prometheus no use for them, and they would make each scrape half as long
    again.

    With `shared_dir`, the metrics are those of all the worker processes of one server
    (`--workers`, `server.workers`), in `prometheus_client`'s multiprocess mode: each worker's
    values live in files of that directory, which the environment variable
    `PROMETHEUS_MULTIPROC_DIR` named before the worker imported `prometheus_client` (the mode
    is chosen at import), and `exposition` adds up every worker's files
    (`MultiProcessCollector`; `duplex_sessions_open` counts the live workers' sessions). The
    `process_*` metrics are left out then: they would describe only the answering worker.

    Args:
        registry: where to register (default: a new registry of this server's own, with the
            process collector's `process_*` metrics unless `shared_dir` is given).
        shared_dir: the multiprocess directory of the server's workers, or None.
    """

    def __init__(self, registry: CollectorRegistry | None = None,
                 shared_dir: str | None = None) -> None:
        disable_created_metrics()
        if registry is None:
            registry = CollectorRegistry()
            if shared_dir is None:
                ProcessCollector(registry=registry)
        self.registry = registry
        exposed = registry
        if shared_dir is not None:
            exposed = CollectorRegistry()
            MultiProcessCollector(exposed, path=shared_dir)
        self._text = TextExposition(exposed)
        r = registry
        self.sessions_open = Gauge("duplex_sessions_open", "Realtime sessions open now.",
                                   registry=r, multiprocess_mode="livesum")
        self.sessions = Counter("duplex_sessions", "Realtime sessions opened.", registry=r)
        self.sessions_refused = Counter(
            "duplex_sessions_refused", "WebSocket upgrades refused at the handshake, by reason "
            "(beta, origin, api_key, full).", ["reason"], registry=r)
        self.sessions_parked = Gauge(
            "duplex_sessions_parked", "Dropped sessions parked for a resume now "
            "(--resume-window-s, at most --max-parked-sessions).", registry=r,
            multiprocess_mode="livesum")
        self.sessions_resumed = Counter("duplex_sessions_resumed",
                                        "Parked sessions resumed with their token.", registry=r)
        self.resumes_refused = Counter(
            "duplex_resumes_refused", "Resume tokens refused, by reason (unknown, expired, "
            "used, evicted, wrong_key, malformed, busy).", ["reason"], registry=r)
        self.parked_dropped = Counter(
            "duplex_parked_sessions_dropped", "Parked sessions let go without a resume, by "
            "reason (expired, evicted, shutdown).", ["reason"], registry=r)
        self.responses = Counter("duplex_responses", "Responses ended, by response.done status.",
                                 ["status"], registry=r)
        self.barge_ins = Counter(
            "duplex_barge_ins", "Replies cut short while the listener heard them, by what cut "
            "them (client barge_in and its source, server VAD, truncate, cancel, clear, a "
            "truncating playback.ack, a new response).", ["source"], registry=r)
        self.paused = Counter("duplex_responses_paused",
                              "Replies paused by the person's voice (response.paused).",
                              registry=r)
        self.resumed = Counter(
            "duplex_backchannels_resumed", "Paused replies resumed after a backchannel "
            "(response.resumed).", registry=r)
        self.calibrations = Counter("duplex_calibrations",
                                    "Heard-text calibration results stored, by method.",
                                    ["method"], registry=r)
        self.cross_checks = Counter(
            "duplex_calibration_cross_checks", "ASR cross-checks of marks results, by whether "
            "the transcript agreed with the marks (agree: true, false).", ["agree"],
            registry=r)
        self.calibration_seconds = Histogram(
            "duplex_calibration_seconds", "Time of one heard-text calibration (s), by method.",
            ["method"], buckets=CALIBRATION_BUCKETS_S, registry=r)
        self.ack_anomalies = Counter("duplex_ack_anomalies",
                                     "Abnormal playback.ack events, by kind.", ["kind"],
                                     registry=r)
        self.first_audio_seconds = Histogram(
            "duplex_first_audio_seconds", "From response.created to the response's first "
            "audio delta handed to the socket (s).", buckets=FIRST_AUDIO_BUCKETS_S, registry=r)
        self.tts_real_time_factor = Histogram(
            "duplex_tts_real_time_factor", "Synthesis time over audio duration of one spoken "
            "segment, by engine.", ["engine"], buckets=TTS_RTF_BUCKETS, registry=r)
        self.first_token_seconds = Histogram(
            "duplex_llm_time_to_first_token_seconds", "From asking the responder for a reply "
            "to its first text delta (s), by responder (demo, llm, ...).", ["responder"],
            buckets=FIRST_TOKEN_BUCKETS_S, registry=r)
        for source in BARGE_IN_SOURCES:
            self.barge_ins.labels(source)
        for kind in ACK_ANOMALIES:
            self.ack_anomalies.labels(kind)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format (`CONTENT_TYPE`): every value read now
        (`TextExposition`)."""
        return self._text.render()

    def session(self) -> SessionMetrics:
        """The observer of one new session's events."""
        return SessionMetrics(self)

    def observe_first_token(self, seconds: float, responder: str = "llm") -> None:
        """Record one reply's time to first text delta (s) for the responder named
        `responder` (a fixed name such as `demo` or `llm`)."""
        self.first_token_seconds.labels(responder).observe(seconds)

    def observe_tts(self, engine: str, synthesis_s: float, audio_s: float) -> None:
        """Record one segment's real-time factor, `synthesis_s / audio_s` (nothing when no
        audio was made)."""
        if audio_s > 0:
            self.tts_real_time_factor.labels(engine).observe(synthesis_s / audio_s)

    def instrument(self, services: Services) -> Services:
        """`services` with the synthesizer and responder wrapped to measure the TTS real-time
        factor and the time to first token (`MeasuredSynthesizer`, `MeasuredResponder`)."""
        return dataclasses.replace(
            services, synthesizer=MeasuredSynthesizer(services.synthesizer, self),
            responder=MeasuredResponder(services.responder, self))


class TextExposition:
    """Renders a registry in the Prometheus text format 0.0.4, byte for byte as
    `prometheus_client.generate_latest` does, in about 60 % of its time (1.1 against 1.8 ms for
    the 83 samples of `benchmarks/bench_metrics.py`).

    Every value is read from the registry at each `render` (`registry.collect()`); what is
    kept between renders is only text that depends on no value: each family's `# HELP` /
    `# TYPE` header and each series' `name{labels} ` prefix, both made once by
    `generate_latest` itself (so names and label values are escaped exactly as it escapes
    them), keyed by everything they are made of. `generate_latest` spends most of its time
    escaping and validating those same names and labels on every scrape. A family with
    samples `generate_latest` reorders (`_created`, `_gsum`, `_gcount`) or a sample with a
    timestamp is rendered by `generate_latest` whole.

    Args:
        registry: the registry (or any collector) to render.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._headers: dict[tuple[str, str, str], str] = {}
        self._prefixes: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}

    def render(self) -> bytes:
        """The registry's text exposition (UTF-8) with the values of now."""
        parts: list[str] = []
        headers, prefixes = self._headers, self._prefixes
        for family in self.registry.collect():
            if any(sample.timestamp is not None or sample.name[len(family.name):] in
                   _REORDERED_SUFFIXES for sample in family.samples):
                parts.append(_generate_text(family))
                continue
            key = (family.name, family.type, family.documentation)
            header = headers.get(key)
            if header is None:
                header = headers[key] = _generate_text(
                    Metric(family.name, family.documentation, family.type))
            parts.append(header)
            for sample in family.samples:
                series = (sample.name, tuple(sample.labels.items()))
                prefix = prefixes.get(series)
                if prefix is None:
                    prefix = prefixes[series] = _sample_prefix(sample)
                parts.append(prefix)
                parts.append(floatToGoString(sample.value))
                parts.append("\n")
        return "".join(parts).encode("utf-8")


_REORDERED_SUFFIXES = frozenset(("_created", "_gsum", "_gcount"))
"""Sample name suffixes `generate_latest` moves into a family of their own after their
family's other samples."""

_PREFIX_PROBE_VALUE = 0.0
"""The value of the sample rendered to learn a series' line prefix (`_sample_prefix`)."""


class _OneFamily:
    """A collector of one metric family, to render it with `generate_latest`."""

    def __init__(self, family: Metric) -> None:
        self.family = family

    def collect(self) -> list[Metric]:
        """The family."""
        return [self.family]


def _generate_text(family: Metric) -> str:
    """`generate_latest`'s text of one family (its header, then its samples)."""
    return generate_latest(_OneFamily(family)).decode("utf-8")  # type: ignore[arg-type]


def _sample_prefix(sample: Sample) -> str:
    """A series' line up to its value, `name{labels} `: `generate_latest`'s line of the
    sample with a probe value and no timestamp, without the value and the newline."""
    family = Metric(sample.name, "", "unknown")
    family.samples = [Sample(sample.name, sample.labels, _PREFIX_PROBE_VALUE, None)]
    line = _generate_text(family).rsplit("\n", 2)[-2]
    value = floatToGoString(_PREFIX_PROBE_VALUE)
    assert line.endswith(" " + value), line
    return line[:-len(value)]


class SessionMetrics:
    """Counts one session's events into its server's metrics.

    A cross-check (`duplex_calibration_cross_checks_total`) is the first announcement of an
    item's heard text that carries `marks_agree` without a calibration time (the ASR result
    attached to a stored marks result). Interruptions (`duplex_barge_ins_total`) are the first
    `conversation.item.heard` of an item with `interrupted: true`, attributed to the client
    event being applied then (`_CAUSE_BY_EVENT`; `barge_in` by its `source`: `vad`, `button`,
    else `other`; a dropped connection's cut, `server.realtime.drop`, as `disconnect`); a
    reply that failed is not counted. ACK anomalies pair each applied
    `playback.ack` with its `playback.acknowledged`, which carries the response's cursor.
    """

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics
        self._cause = "other"
        self._created: dict[str, float] = {}
        self._interrupted: dict[str, None] = {}
        self._failed: dict[str, None] = {}
        self._acks: deque[int] = deque()
        self._played: dict[str, int] = {}
        self._cross_checked: dict[str, str] = {}

    def client_event(self, event: protocol.ClientEvent | protocol.ProtocolError) -> None:
        """A client frame was given to the session: its event when applied, else the error it
        was refused with (whose `event_type` names what it claimed to be)."""
        if isinstance(event, protocol.ProtocolError):
            self._cause = "other"
            if event.event_type == "playback.ack":
                self._metrics.ack_anomalies.labels("refused").inc()
            return
        if isinstance(event, protocol.BargeIn):
            source = event.source if event.source in ("vad", "button") else "other"
            self._cause = "disconnect" if event.source == DROP_SOURCE else f"barge_in:{source}"
            return
        self._cause = _CAUSE_BY_EVENT.get(type(event), "other")
        if isinstance(event, protocol.PlaybackAck):
            self._acks.append(event.played_ms)

    def server_event(self, event: dict[str, Any]) -> None:
        """A server event is being sent to the client (in the session's order)."""
        handler = _HANDLERS.get(event["type"])
        if handler is not None:
            handler(self, event)

    def _response_created(self, event: dict[str, Any]) -> None:
        self._created[event["response"]["id"]] = time.monotonic()

    def _audio_delta(self, event: dict[str, Any]) -> None:
        created = self._created.pop(event["response_id"], None)
        if created is not None:
            self._metrics.first_audio_seconds.observe(time.monotonic() - created)

    def _response_done(self, event: dict[str, Any]) -> None:
        response = event["response"]
        self._created.pop(response["id"], None)
        if response["status"] == "failed":
            _remember(self._failed, response["id"], None)
        self._metrics.responses.labels(response["status"]).inc()

    def _heard(self, event: dict[str, Any]) -> None:
        elapsed_ms = event.get("elapsed_ms")
        if elapsed_ms is not None:
            method = event["method"]
            self._metrics.calibrations.labels(method).inc()
            self._metrics.calibration_seconds.labels(method).observe(elapsed_ms / 1000.0)
        item_id = event["item_id"]
        agree = event.get("marks_agree")
        if elapsed_ms is None and agree is not None and (
                self._cross_checked.get(item_id) != event["text"]):
            _remember(self._cross_checked, item_id, event["text"])
            self._metrics.cross_checks.labels("true" if agree else "false").inc()
        if event.get("interrupted") and item_id not in self._interrupted:
            _remember(self._interrupted, item_id, None)
            if event["response_id"] not in self._failed:
                self._metrics.barge_ins.labels(self._cause).inc()

    def _acknowledged(self, event: dict[str, Any]) -> None:
        if not self._acks:
            return
        requested = self._acks.popleft()
        response_id = event["response_id"]
        if requested > event["cursor"]["sent_ms"]:
            self._metrics.ack_anomalies.labels("beyond_sent").inc()
        elif requested < self._played.get(response_id, 0):
            self._metrics.ack_anomalies.labels("backwards").inc()
        _remember(self._played, response_id, event["played_ms"])

    def _paused(self, event: dict[str, Any]) -> None:
        self._metrics.paused.inc()

    def _resumed(self, event: dict[str, Any]) -> None:
        self._metrics.resumed.inc()


REMEMBERED = 64
"""Responses and items a session's metrics remember (the latest; each a few bytes, a heard
text for a cross-check): a long session would otherwise grow them for as long as it lasts."""


def _remember(mapping: dict[str, Any], key: str, value: Any) -> None:
    """Set `mapping[key]` as its newest entry; past `REMEMBERED` entries the oldest goes."""
    mapping.pop(key, None)
    mapping[key] = value
    if len(mapping) > REMEMBERED:
        del mapping[next(iter(mapping))]


_HANDLERS = {
    "response.created": SessionMetrics._response_created,
    "response.output_audio.delta": SessionMetrics._audio_delta,
    "response.done": SessionMetrics._response_done,
    "conversation.item.heard": SessionMetrics._heard,
    "playback.acknowledged": SessionMetrics._acknowledged,
    "response.paused": SessionMetrics._paused,
    "response.resumed": SessionMetrics._resumed,
}
"""Server event type -> what it counts."""


class MeasuredSynthesizer:
    """A `SpeechSynthesizer` that records each segment's real-time factor: the time spent
    inside the engine's generator (not in its consumer) over the seconds of audio it made.

    Args:
        inner: the engine.
        metrics: where to record (`ServerMetrics.observe_tts`).
    """

    def __init__(self, inner: SpeechSynthesizer, metrics: ServerMetrics) -> None:
        self.inner = inner
        self.name = inner.name
        self.sample_rate_hz = inner.sample_rate_hz
        self._metrics = metrics

    def __getattr__(self, name: str) -> Any:
        """Anything else the engine offers, unmeasured."""
        return getattr(self.inner, name)

    def warm_up(self) -> None:
        """Warm the engine up (not measured)."""
        self.inner.warm_up()

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        """The engine's chunks, unchanged; the measurement is recorded when the segment ends
        (also when the consumer closes the generator early)."""
        busy_s = 0.0
        samples = 0
        with contextlib.closing(self.inner.synthesize(text, stop)) as chunks:
            try:
                while True:
                    started = time.perf_counter()
                    try:
                        chunk = next(chunks)
                    except StopIteration:
                        busy_s += time.perf_counter() - started
                        break
                    busy_s += time.perf_counter() - started
                    samples += len(chunk.pcm)
                    yield chunk
            finally:
                self._metrics.observe_tts(self.name, busy_s, samples / self.sample_rate_hz)


class MeasuredResponder:
    """A `Responder` that records the time from being asked to its first text delta.

    Args:
        inner: the responder (its innermost `.inner` names the label: `DemoResponder` ->
            `demo`, `LlmResponder` -> `llm`).
        metrics: where to record (`ServerMetrics.observe_first_token`).
    """

    def __init__(self, inner: Responder, metrics: ServerMetrics) -> None:
        self.inner = inner
        self._metrics = metrics
        innermost: object = inner
        while (wrapped := getattr(innermost, "inner", None)) is not None:
            innermost = wrapped
        self.label = type(innermost).__name__.lower().removesuffix("responder") or "responder"

    def __getattr__(self, name: str) -> Any:
        """Anything else the responder offers, unmeasured."""
        return getattr(self.inner, name)

    async def respond(self, prompt: Prompt) -> AsyncIterator[str]:
        """The inner responder's deltas, unchanged; closing this closes the inner stream."""
        started = time.monotonic()
        replies = self.inner.respond(prompt)
        first = True
        try:
            async for delta in replies:
                if first:
                    self._metrics.observe_first_token(time.monotonic() - started, self.label)
                    first = False
                yield delta
        finally:
            close = getattr(replies, "aclose", None)
            if close is not None:
                await close()


METRICS_PATH = "/metrics"
