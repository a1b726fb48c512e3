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
from dataclasses import dataclass

from calibration.asr import LocalWhisperTranscriber, RemoteTranscriber, Transcriber
from calibration.policies import make_policy
from server.connection import Services
from server.listening.vad import load_vad_model
from server.realtime.session import SessionConfig
from server.responders.demo import DemoResponder
from server.responders.prompt import DEFAULT_INTERRUPTION_NOTE, Responder
from server.speech.engines import create_synthesizer
from server.speech.synthesizer import SpeechSynthesizer

TTS_ENGINES = ("piper", "espeak", "uniform", "uniform-nomarks")
CALIBRATION_POLICIES = ("auto", "marks", "asr", "ratio", "off")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything the server is told at start (see `duplex-demo --help` for meanings/units)."""

    host: str = "127.0.0.1"
    port: int = 8765
    voice: str | None = None
    tts: str = "piper"
    log_level: str = "info"
    allow_origin: tuple[str, ...] = ()
    lead_ms: int = 400
    calibration: str = "auto"
    asr_url: str | None = None
    asr_model: str = "whisper-1"
    calibration_timeout_ms: int = 1000
    history_audio_max_bytes: int = 8 * 1024 * 1024
    interruption_note: str = DEFAULT_INTERRUPTION_NOTE
    deterministic: bool = False


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def build_parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    """The `duplex-demo` argument parser with defaults taken from `environ` (DUPLEX_*)."""

    def env(name: str, default: object) -> object:
        return environ.get(f"DUPLEX_{name.upper().replace('-', '_')}", default)

    defaults = ServerConfig()
    parser = argparse.ArgumentParser(
        prog="duplex-demo",
        description="WebSocket duplex voice demo: the page at / talks to /v1/realtime; history "
        "holds what the listener heard. Every flag has a DUPLEX_<FLAG> environment variable.",
    )
    parser.add_argument("--host", default=env("host", defaults.host),
                        help="interface to bind (default 127.0.0.1: local only)")
    parser.add_argument("--port", type=int, default=int(env("port", defaults.port)),
                        help="TCP port (default 8765; 0 picks a free one)")
    parser.add_argument("--voice", default=env("voice", None),
                        help="Piper voice .onnx path (default: the bundled en_US joe voice)")
    parser.add_argument("--tts", choices=TTS_ENGINES, default=env("tts", defaults.tts),
                        help="speech engine (uniform* are deterministic test voices)")
    parser.add_argument("--log-level", default=env("log-level", defaults.log_level),
                        choices=("debug", "info", "warning", "error"))
    parser.add_argument("--allow-origin", action="append",
                        default=[o for o in str(env("allow-origin", "")).split(",") if o],
                        help="extra browser Origin allowed to connect (repeatable; * for any)")
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
    parser.add_argument("--history-audio-max-bytes", type=_positive_int,
                        default=int(env("history-audio-max-bytes",
                                        defaults.history_audio_max_bytes)),
                        help="reply audio retained per session for calibration (bytes)")
    parser.add_argument("--interruption-note", default=env("interruption-note",
                                                           defaults.interruption_note),
                        help="note given to the responder after a cut turn ({heard} = the "
                        "heard text)")
    parser.add_argument("--deterministic", action="store_true",
                        default=str(env("deterministic", "")).lower() in ("1", "true", "yes"),
                        help="bit-identical Piper output (noise_scale=0), for tests")
    return parser


def parse_config(argv: Sequence[str] | None = None,
                 environ: Mapping[str, str] | None = None) -> ServerConfig:
    """Parse flags (and DUPLEX_* environment variables) into a `ServerConfig`.

    Raises:
        SystemExit: on invalid flags (argparse prints the reason).
    """
    args = build_parser(os.environ if environ is None else environ).parse_args(argv)
    return ServerConfig(
        host=args.host, port=args.port, voice=args.voice, tts=args.tts,
        log_level=args.log_level, allow_origin=tuple(args.allow_origin),
        lead_ms=args.lead_ms, calibration=args.calibration, asr_url=args.asr_url,
        asr_model=args.asr_model, calibration_timeout_ms=args.calibration_timeout_ms,
        history_audio_max_bytes=args.history_audio_max_bytes,
        interruption_note=args.interruption_note, deterministic=args.deterministic,
    )


def build_transcriber(config: ServerConfig) -> Transcriber | None:
    """The ASR used by the `asr` and `auto` policies (None for the other policies)."""
    if config.calibration not in ("asr", "auto"):
        return None
    if config.asr_url:
        return RemoteTranscriber(config.asr_url, model=config.asr_model,
                                 timeout_s=config.calibration_timeout_ms / 1000)
    return LocalWhisperTranscriber()


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
    when there is one, else in-process without word timings (not needed for a user turn).
    """
    if synthesizer is None:
        logging.getLogger(__name__).info("loading %s speech", config.tts)
        synthesizer = create_synthesizer(config.tts, voice=config.voice,
                                         deterministic=config.deterministic)
        synthesizer.warm_up()
    transcriber = build_transcriber(config)
    if input_transcriber is None:
        input_transcriber = (transcriber if isinstance(transcriber, RemoteTranscriber)
                             else LocalWhisperTranscriber(word_timestamps=False))
    if isinstance(input_transcriber, LocalWhisperTranscriber):
        input_transcriber.load()
    load_vad_model()
    return Services(
        synthesizer=synthesizer,
        responder=responder or DemoResponder(),
        session_config=SessionConfig(lead_ms=config.lead_ms,
                                     interruption_note=config.interruption_note),
        policy=make_policy(config.calibration, transcriber),
        input_transcriber=input_transcriber,
        history_audio_max_bytes=config.history_audio_max_bytes,
        calibration_timeout_s=config.calibration_timeout_ms / 1000,
    )
