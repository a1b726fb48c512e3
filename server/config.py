"""Server configuration: command-line flags mirrored by `DUPLEX_*` environment variables.

Every flag `--some-flag` has the environment variable `DUPLEX_SOME_FLAG`; a flag on the command
line wins over the environment, which wins over the embedded default. `build_services` turns a
configuration into the shared parts (TTS, responder, calibration policy).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from calibration.asr import Transcriber
from calibration.asr_queue import AsrPriority
from calibration.local_asr import LocalWhisperTranscriber, person_transcriber
from calibration.policies import AUTO_ASR_TIMEOUT_S, make_policy
from calibration.remote_asr import RemoteTranscriber
from server.app import (
    MAX_PARKED_SESSIONS,
    MAX_SESSIONS,
    MAX_WEBSOCKET_FRAME_BYTES,
    PING_INTERVAL_S,
    PING_TIMEOUT_S,
    RESUME_WINDOW_S,
    ServerOptions,
)
from server.listening import smart_turn
from server.listening.backchannel import readings_to_score
from server.listening.silero_vad import load_vad_model
from server.logs import LOG_FORMATS
from server.realtime.input_budget import INPUT_SPEED, INPUT_WINDOW_MS
from server.realtime.interruption_settings import INTERRUPTION_MODES, InterruptionSettings
from server.realtime.protocol import OUTPUT_SAMPLE_RATE_HZ
from server.realtime.session import SessionConfig
from server.responders.demo import DemoResponder
from server.responders.llm import LLMResponder, LLMSettings
from server.responders.prompt import DEFAULT_INTERRUPTION_NOTE, Responder
from server.responders.reply_limit import ReplyLengthLimit
from server.services import Services
from server.speech.engines import create_synthesizer
from server.speech.synthesizer import SpeechSynthesizer

TTS_ENGINES = ("piper", "espeak", "uniform", "uniform-nomarks")
CALIBRATION_POLICIES = ("auto", "marks", "asr", "ratio", "off")
EVENT_LOOPS = ("uvloop", "asyncio")
"""`--event-loop` choices: uvloop (libuv, from PyPI) or the standard library's loop."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything the server is told at start (see `duplex-demo --help` for meanings/units)."""

    host: str = "127.0.0.1"
    port: int = 8765
    metrics_port: int | None = None
    voice: str | None = None
    tts: str = "piper"
    log_level: str = "info"
    log_format: str = "text"
    event_loop: str = "uvloop"
    workers: int = 1
    allow_origin: tuple[str, ...] = ()
    allow_host: tuple[str, ...] = ()
    lead_ms: int = 400
    calibration: str = "auto"
    asr_url: str | None = None
    asr_model: str = "whisper-1"
    calibration_timeout_ms: int = 1000
    send_timeout_ms: int = 10_000
    history_audio_max_bytes: int = 8 * 1024 * 1024
    interruption_note: str = DEFAULT_INTERRUPTION_NOTE
    deterministic: bool = False
    max_frame_bytes: int = MAX_WEBSOCKET_FRAME_BYTES
    max_sessions: int = MAX_SESSIONS
    max_events_per_s: int = 200
    idle_timeout_s: float = 600.0
    ping_interval_s: float = PING_INTERVAL_S
    ping_timeout_s: float = PING_TIMEOUT_S
    max_history_items: int = 500
    max_history_chars: int = 200_000
    max_input_audio_s: int = 600
    max_reply_chars: int = 4000
    max_input_speed: float = INPUT_SPEED
    input_window_s: float = INPUT_WINDOW_MS / 1000
    interruption_mode: str = "pause"
    pause_timeout_ms: int = 2500
    max_backchannel_ms: int = 1500
    max_turn_ms: int = 30_000
    resume_window_s: float = RESUME_WINDOW_S
    max_parked_sessions: int = MAX_PARKED_SESSIONS
    api_key: str | None = field(default=None, repr=False)
    llm_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_max_tokens: int = 512
    llm_temperature: float = 0.7
    llm_timeout_s: float = 30.0


_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
"""HTTP token characters (RFC 9110): what an API key may hold, so that it fits a bearer token
and a `Sec-WebSocket-Protocol` value alike."""


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _seconds_or_off(text: str) -> float:
    """A duration in seconds; 0 turns the feature off."""
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds, got {text}")
    return value


def _speed_or_off(text: str) -> float:
    """A multiple of real time; 0 turns the bound off."""
    value = float(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0 (times real time), got {text}")
    return value


def _temperature(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 2.0:
        raise argparse.ArgumentTypeError(f"must be 0 to 2, got {text}")
    return value


def _positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value


_KEY_SOURCES = {"--llm-api-key": "set DUPLEX_LLM_API_KEY (or OPENAI_API_KEY) in the "
                                  "environment",
                "--api-key": "set DUPLEX_API_KEY in the environment or use --api-key-file"}
"""Where each key flag refused on the command line is read from instead."""


class _KeyFromEnvironment(argparse.Action):
    """`--llm-api-key` and `--api-key` on the command line are refused: other users can read
    command lines (`ps`, /proc/PID/cmdline)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        parser.error(f"{option_string}: {_KEY_SOURCES[option_string or '']} instead; a key on "
                     "the command line is visible to other users")


def _key_file(path: str) -> str:
    """The API key in the file at `path` (its only line; a trailing newline is dropped)."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {exc.strerror}") from None
    return _api_key(text.removesuffix("\n").removesuffix("\r"))


def _api_key(text: str) -> str:
    if not text or not set(text) <= _TOKEN_CHARS:
        raise argparse.ArgumentTypeError(
            "must be non-empty letters, digits and !#$%&'*+-.^_`|~ only")
    return text


def build_parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    """The `duplex-demo` argument parser with defaults taken from `environ` (DUPLEX_*)."""

    def env(name: str, default: object) -> object:
        return environ.get(f"DUPLEX_{name.upper().replace('-', '_')}", default)

    defaults = ServerConfig()
    parser = argparse.ArgumentParser(
        prog="duplex-demo",
        description="WebSocket duplex voice demo: the page at / talks to /v1/realtime; history "
        "holds what the listener heard. Every flag has a DUPLEX_<FLAG> environment variable.",
        epilog="`duplex-demo talk --help`: the local-audio client (speaker and microphone).",
    )
    parser.add_argument("--host", default=env("host", defaults.host),
                        help="interface to bind (default 127.0.0.1: local only)")
    parser.add_argument("--port", type=int, default=int(env("port", defaults.port)),
                        help="TCP port (default 8765; 0 picks a free one)")
    parser.add_argument("--metrics-port", type=int, default=env("metrics-port", None),
                        help="also serve /metrics on this port of the same host, answered "
                        "by a thread of its own instead of the event loop the sessions share "
                        "(0 picks a free one; default: only on --port)")
    parser.add_argument("--voice", default=env("voice", None),
                        help="Piper voice .onnx path (default: the bundled en_US joe voice)")
    parser.add_argument("--tts", choices=TTS_ENGINES, default=env("tts", defaults.tts),
                        help="speech engine (uniform* are deterministic test voices)")
    parser.add_argument("--log-level", default=env("log-level", defaults.log_level),
                        choices=("debug", "info", "warning", "error"))
    parser.add_argument("--log-format", choices=LOG_FORMATS,
                        default=env("log-format", defaults.log_format),
                        help="log lines as text, or as one JSON object per line (time, "
                        "level, logger, message, session_id)")
    parser.add_argument("--event-loop", choices=EVENT_LOOPS,
                        default=env("event-loop", defaults.event_loop),
                        help="asyncio event loop: uvloop (default; under load it spends less "
                        "CPU per client event than the standard library's) or asyncio")
    parser.add_argument("--workers", type=_positive_int,
                        default=int(env("workers", defaults.workers)),
                        help="server processes sharing the port (SO_REUSEPORT), each with an "
                        "event loop of its own: up to one per core (default 1); "
                        "--max-sessions and /metrics count all of them")
    parser.add_argument("--allow-origin", action="append",
                        default=[o for o in str(env("allow-origin", "")).split(",") if o],
                        help="extra browser Origin allowed to connect (repeatable; * for any)")
    parser.add_argument("--allow-host", action="append",
                        default=[h for h in str(env("allow-host", "")).split(",") if h],
                        help="host name this server may be reached under besides IP "
                        "addresses, localhost and --host (repeatable; * for any): requests "
                        "with any other Host header are refused (DNS rebinding)")
    parser.add_argument("--lead-ms", type=_positive_int,
                        default=int(env("lead-ms", defaults.lead_ms)),
                        help="max audio sent ahead of the client's played position (ms)")
    parser.add_argument("--calibration", choices=CALIBRATION_POLICIES,
                        default=env("calibration", defaults.calibration),
                        help="heard-text calibration policy")
    parser.add_argument("--asr-url", default=env("asr-url", None),
                        help="OpenAI-compatible /v1/audio/transcriptions URL for the ASR "
                        "policy (default: in-process faster-whisper tiny.en)")
    parser.add_argument("--asr-model", default=env("asr-model", defaults.asr_model),
                        help="model name sent to --asr-url")
    parser.add_argument("--calibration-timeout-ms", type=_positive_int,
                        default=int(env("calibration-timeout-ms",
                                        defaults.calibration_timeout_ms)),
                        help="per-calibration and per-prompt wait budget (ms)")
    parser.add_argument("--send-timeout-ms", type=_positive_int,
                        default=int(env("send-timeout-ms", defaults.send_timeout_ms)),
                        help="close a session (code 1008) whose client has not taken one "
                        "server frame for this long (ms)")
    parser.add_argument("--history-audio-max-bytes", type=_positive_int,
                        default=int(env("history-audio-max-bytes",
                                        defaults.history_audio_max_bytes)),
                        help="reply audio retained per session for calibration (bytes)")
    parser.add_argument("--interruption-note", default=env("interruption-note",
                                                           defaults.interruption_note),
                        help="note given to the responder after a cut turn ({heard} = the "
                        "heard text)")
    parser.add_argument("--interruption-mode", choices=INTERRUPTION_MODES,
                        default=env("interruption-mode", defaults.interruption_mode),
                        help="speech over a reply: 'pause' it and let the utterance decide "
                        "(a backchannel resumes it), or 'cancel' it at once")
    parser.add_argument("--pause-timeout-ms", type=_positive_int,
                        default=int(env("pause-timeout-ms", defaults.pause_timeout_ms)),
                        help="longest pause without a decision: then speech still going or "
                        "not yet transcribed cuts the reply, anything else resumes it (ms)")
    parser.add_argument("--max-backchannel-ms", type=_positive_int,
                        default=int(env("max-backchannel-ms", defaults.max_backchannel_ms)),
                        help="longest backchannel ('uh-huh', 'yeah'); longer speech cuts (ms)")
    parser.add_argument("--max-turn-ms", type=_positive_int,
                        default=int(env("max-turn-ms", defaults.max_turn_ms)),
                        help="longest server VAD turn: speech still going then is committed "
                        "and the detector listens anew (ms)")
    parser.add_argument("--deterministic", action="store_true",
                        default=str(env("deterministic", "")).lower() in ("1", "true", "yes"),
                        help="bit-identical Piper output (noise_scale=0), for tests")
    limits = parser.add_argument_group(
        "limits", "what one client may cost the server; 0 turns a duration off")
    limits.add_argument("--max-frame-bytes", type=_positive_int,
                        default=int(env("max-frame-bytes", defaults.max_frame_bytes)),
                        help="largest WebSocket message (bytes, default 4194304); a larger "
                        "one closes the connection with 1009")
    limits.add_argument("--max-sessions", type=_positive_int,
                        default=int(env("max-sessions", defaults.max_sessions)),
                        help="concurrent sessions (default 32); more are refused at the "
                        "handshake with HTTP 503")
    limits.add_argument("--max-events-per-s", type=_positive_int,
                        default=int(env("max-events-per-s", defaults.max_events_per_s)),
                        help="client events applied per session in any 1 s (default 200); "
                        "excess ones get a rate_limit_exceeded error, twice that closes 1008")
    limits.add_argument("--idle-timeout-s", type=_seconds_or_off,
                        default=_seconds_or_off(str(env("idle-timeout-s",
                                                        defaults.idle_timeout_s))),
                        help="close a session (1000) after this long without a client event "
                        "(s, default 600)")
    limits.add_argument("--ping-interval-s", type=_seconds_or_off,
                        default=_seconds_or_off(str(env("ping-interval-s",
                                                        defaults.ping_interval_s))),
                        help="WebSocket keepalive ping interval (s, default 20)")
    limits.add_argument("--ping-timeout-s", type=_seconds_or_off,
                        default=_seconds_or_off(str(env("ping-timeout-s",
                                                        defaults.ping_timeout_s))),
                        help="close (1011) when a ping is not answered within this (s, "
                        "default 20)")
    limits.add_argument("--max-history-items", type=_positive_int,
                        default=int(env("max-history-items", defaults.max_history_items)),
                        help="conversation items per session (default 500)")
    limits.add_argument("--max-history-chars", type=_positive_int,
                        default=int(env("max-history-chars", defaults.max_history_chars)),
                        help="characters of all conversation items of a session (default "
                        "200000)")
    limits.add_argument("--max-input-audio-s", type=_positive_int,
                        default=int(env("max-input-audio-s", defaults.max_input_audio_s)),
                        help="microphone audio a session buffers before a commit (s, default "
                        "600: 28.8 MB of 24 kHz PCM16); more is refused (input_audio_buffer_full)")
    limits.add_argument("--max-reply-chars", type=_positive_int,
                        default=int(env("max-reply-chars", defaults.max_reply_chars)),
                        help="longest assistant reply (characters, default 4000); a longer "
                        "one is cut at a word boundary")
    limits.add_argument("--max-input-speed", type=_speed_or_off,
                        default=_speed_or_off(str(env("max-input-speed",
                                                      defaults.max_input_speed))),
                        help="input audio per session, as a multiple of real time over "
                        "--input-window-s (default 2); beyond it the session's next event is "
                        "read only once the bound allows (throttled); 0: no bound")
    limits.add_argument("--input-window-s", type=_positive_seconds,
                        default=_positive_seconds(str(env("input-window-s",
                                                          defaults.input_window_s))),
                        help="window of --max-input-speed (s, default 5): up to speed x "
                        "window of audio may come at once")
    limits.add_argument("--resume-window-s", type=_seconds_or_off,
                        default=_seconds_or_off(str(env("resume-window-s",
                                                        defaults.resume_window_s))),
                        help="a dropped session is kept this long for its client to resume "
                        "it with the token of its session.created (s, default 60); 0: never")
    limits.add_argument("--max-parked-sessions", type=_positive_int,
                        default=int(env("max-parked-sessions", defaults.max_parked_sessions)),
                        help="dropped sessions kept for a resume at once (default 32); one "
                        "more lets the oldest go")
    access = parser.add_argument_group("access")
    access.add_argument("--api-key", nargs="?", action=_KeyFromEnvironment,
                        help="not accepted here: set DUPLEX_API_KEY or use --api-key-file")
    access.add_argument("--api-key-file", metavar="PATH",
                        default=env("api-key-file", None) or None,
                        help="file holding the shared secret required to open /v1/realtime "
                        "and the page (Authorization: Bearer, a page cookie from /?key=, or "
                        "the openai-insecure-api-key.<key> subprotocol); else DUPLEX_API_KEY; "
                        "default: none, open")
    llm = parser.add_argument_group(
        "LLM", "replies from an OpenAI-compatible chat-completions server (vLLM, llama.cpp, "
        "Ollama, a hosted API) instead of the built-in demo responder; the API key comes from "
        "DUPLEX_LLM_API_KEY or OPENAI_API_KEY only and is never logged")
    llm.add_argument("--llm-url", default=env("llm-url", None) or None,
                     help="base URL of the API, before /chat/completions (e.g. "
                     "http://127.0.0.1:8080/v1); default: none, the built-in demo responder")
    llm.add_argument("--llm-model", default=env("llm-model", None) or None,
                     help="model name sent to --llm-url (required with it)")
    llm.add_argument("--llm-api-key", nargs="?", action=_KeyFromEnvironment,
                     help="not accepted here: set DUPLEX_LLM_API_KEY (or OPENAI_API_KEY)")
    llm.add_argument("--llm-max-tokens", type=_positive_int,
                     default=int(env("llm-max-tokens", defaults.llm_max_tokens)),
                     help="most tokens the model may generate for one reply (default 512)")
    llm.add_argument("--llm-temperature", type=_temperature,
                     default=_temperature(str(env("llm-temperature",
                                                  defaults.llm_temperature))),
                     help="sampling temperature, 0 (greedy) to 2 (default 0.7)")
    llm.add_argument("--llm-timeout-s", type=_positive_seconds,
                     default=_positive_seconds(str(env("llm-timeout-s",
                                                       defaults.llm_timeout_s))),
                     help="longest wait to connect, for the reply to start and between two "
                     "pieces of it (s, default 30); then the response fails")
    return parser


def parse_config(argv: Sequence[str] | None = None,
                 environ: Mapping[str, str] | None = None) -> ServerConfig:
    """Parse flags (and DUPLEX_* environment variables) into a `ServerConfig`.

    Raises:
        SystemExit: on invalid flags (argparse prints the reason).
    """
    environ = os.environ if environ is None else environ
    parser = build_parser(environ)
    args = parser.parse_args(argv)
    try:
        api_key = (_key_file(args.api_key_file) if args.api_key_file is not None
                   else _api_key(environ["DUPLEX_API_KEY"]) if environ.get("DUPLEX_API_KEY")
                   else None)
    except argparse.ArgumentTypeError as exc:
        parser.error(f"the API key ({args.api_key_file or 'DUPLEX_API_KEY'}) {exc}")
    if args.llm_url and not args.llm_model:
        parser.error("--llm-url needs --llm-model (the model name the server serves)")
    return ServerConfig(
        host=args.host, port=args.port, metrics_port=args.metrics_port,
        voice=args.voice, tts=args.tts,
        log_level=args.log_level, log_format=args.log_format, event_loop=args.event_loop,
        workers=args.workers,
        allow_origin=tuple(args.allow_origin), allow_host=tuple(args.allow_host),
        lead_ms=args.lead_ms, calibration=args.calibration, asr_url=args.asr_url,
        asr_model=args.asr_model, calibration_timeout_ms=args.calibration_timeout_ms,
        send_timeout_ms=args.send_timeout_ms,
        history_audio_max_bytes=args.history_audio_max_bytes,
        interruption_note=args.interruption_note, deterministic=args.deterministic,
        max_frame_bytes=args.max_frame_bytes, max_sessions=args.max_sessions,
        max_events_per_s=args.max_events_per_s, idle_timeout_s=args.idle_timeout_s,
        ping_interval_s=args.ping_interval_s, ping_timeout_s=args.ping_timeout_s,
        max_history_items=args.max_history_items, max_history_chars=args.max_history_chars,
        max_input_audio_s=args.max_input_audio_s,
        max_reply_chars=args.max_reply_chars, max_input_speed=args.max_input_speed,
        input_window_s=args.input_window_s, api_key=api_key,
        interruption_mode=args.interruption_mode, pause_timeout_ms=args.pause_timeout_ms,
        max_backchannel_ms=args.max_backchannel_ms, max_turn_ms=args.max_turn_ms,
        resume_window_s=args.resume_window_s, max_parked_sessions=args.max_parked_sessions,
        llm_url=args.llm_url, llm_model=args.llm_model,
        llm_api_key=environ.get("DUPLEX_LLM_API_KEY") or environ.get("OPENAI_API_KEY") or None,
        llm_max_tokens=args.llm_max_tokens, llm_temperature=args.llm_temperature,
        llm_timeout_s=args.llm_timeout_s,
    )


def server_options(config: ServerConfig) -> ServerOptions:
    """The listening socket's limits and access settings (`DemoServer`) from a config."""
    return ServerOptions(
        max_frame_bytes=config.max_frame_bytes, max_sessions=config.max_sessions,
        ping_interval_s=config.ping_interval_s or None,
        ping_timeout_s=config.ping_timeout_s or None, api_key=config.api_key,
        metrics_port=config.metrics_port, allowed_hosts=(*config.allow_host, config.host),
        resume_window_s=config.resume_window_s, max_parked_sessions=config.max_parked_sessions,
    )


def build_transcriber(config: ServerConfig) -> Transcriber | None:
    """The ASR used by the `asr` and `auto` policies (None for the other policies).

    In-process, it is background work (`calibration.asr_queue`): it waits behind the person's
    turns and first audio, is skipped when it could not finish within its policy's budget, and
    runs on one thread with a model instance of its own (CTranslate2 runs one transcription
    at a time per model: sharing the person's model would queue their turn behind it), so a
    foreground transcription or synthesis always has a core.
    """
    if config.calibration not in ("asr", "auto"):
        return None
    if config.asr_url:
        return RemoteTranscriber(config.asr_url, model=config.asr_model,
                                 timeout_s=config.calibration_timeout_ms / 1000)
    budget_s = (AUTO_ASR_TIMEOUT_S if config.calibration == "auto"
                else config.calibration_timeout_ms / 1000)
    return LocalWhisperTranscriber(cpu_threads=1, priority=AsrPriority.BACKGROUND,
                                   budget_s=budget_s)


def build_responder(config: ServerConfig) -> Responder:
    """The responder the configuration names: `LLMResponder` when `llm_url` is set, else the
    built-in `DemoResponder`."""
    if not config.llm_url:
        return DemoResponder()
    logging.getLogger(__name__).info("replies from the LLM %r at %s", config.llm_model,
                                     config.llm_url)
    return LLMResponder(LLMSettings(
        url=config.llm_url, model=config.llm_model or "", api_key=config.llm_api_key,
        max_tokens=config.llm_max_tokens, temperature=config.llm_temperature,
        timeout_s=config.llm_timeout_s))


def build_services(
    config: ServerConfig,
    *,
    synthesizer: SpeechSynthesizer | None = None,
    responder: Responder | None = None,
    input_transcriber: Transcriber | None = None,
) -> Services:
    """Load and warm the TTS, build the responder and the calibration policy.

    `synthesizer` / `responder` / `input_transcriber` replace the ones the configuration names
    (tests reuse a loaded voice across servers, or wrap the demo responder or the ASR to read
    what they were given). The person's turns are transcribed by the calibration's remote ASR
    when there is one, else in-process by `calibration.local_asr.person_transcriber` (no word
    timings: not needed for a user turn; greedy decoding).
    """
    if synthesizer is None:
        logging.getLogger(__name__).info("loading %s speech", config.tts)
        synthesizer = create_synthesizer(config.tts, voice=config.voice,
                                         deterministic=config.deterministic)
        synthesizer.warm_up()
    transcriber = build_transcriber(config)
    if input_transcriber is None:
        input_transcriber = (transcriber if isinstance(transcriber, RemoteTranscriber)
                             else person_transcriber(readings=readings_to_score))
    for asr in (input_transcriber, transcriber):
        if isinstance(asr, LocalWhisperTranscriber):
            asr.load()
    load_vad_model()
    try:
        smart_turn.warm_up()
    except FileNotFoundError as missing:
        logging.getLogger(__name__).warning("semantic_vad without its end-of-turn model: %s "
                                            "(turns end after the longest wait)", missing)
    return Services(
        synthesizer=synthesizer,
        responder=ReplyLengthLimit(responder or build_responder(config), config.max_reply_chars),
        session_config=SessionConfig(lead_ms=config.lead_ms,
                                     interruption_note=config.interruption_note,
                                     max_history_items=config.max_history_items,
                                     max_history_chars=config.max_history_chars,
                                     input_audio_max_bytes=(config.max_input_audio_s
                                                            * OUTPUT_SAMPLE_RATE_HZ * 2),
                                     max_turn_ms=config.max_turn_ms,
                                     interruption=InterruptionSettings(
                                         mode=config.interruption_mode,
                                         pause_timeout_ms=config.pause_timeout_ms,
                                         max_backchannel_ms=config.max_backchannel_ms)),
        policy=make_policy(config.calibration, transcriber),
        input_transcriber=input_transcriber,
        history_audio_max_bytes=config.history_audio_max_bytes,
        calibration_timeout_s=config.calibration_timeout_ms / 1000,
        send_timeout_s=config.send_timeout_ms / 1000,
        idle_timeout_s=config.idle_timeout_s or None,
        max_events_per_s=config.max_events_per_s,
        input_speed=config.max_input_speed or None,
        input_window_s=config.input_window_s,
    )
