"""`duplex-demo talk [--url ws://…] [--no-mic]`: the flags, logging and exit codes of the
local-audio client (`server.local_audio.client`).

Exit codes: 0 the person ended the session (Ctrl-C), 1 the server could not be reached or
closed the session, 2 bad flags (argparse's), 3 PortAudio or an audio device is missing. Each
failure prints one line to stderr: `duplex-demo talk: <what>`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Sequence

from server.local_audio.client import ConnectionFailed, TalkClient, TalkOptions
from server.local_audio.devices import AudioUnavailable

DEFAULT_URL = "ws://127.0.0.1:8765/v1/realtime"
"""The server `duplex-demo` starts with its default flags."""

EXIT_CONNECTION = 1
EXIT_AUDIO = 3


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The `talk` flags; `--url` also reads `DUPLEX_URL`, the key only `DUPLEX_API_KEY`."""
    parser = argparse.ArgumentParser(
        prog="duplex-demo talk",
        description="Talk with a duplex-demo server through this machine's speaker and "
                    "microphone. Type a prompt and Enter; Enter alone stops the assistant; "
                    "talking over it stops it too. DUPLEX_API_KEY is sent as the bearer key.")
    parser.add_argument("--url", default=os.environ.get("DUPLEX_URL", DEFAULT_URL),
                        help=f"the server's realtime WebSocket (default: {DEFAULT_URL})")
    parser.add_argument("--no-mic", action="store_true",
                        help="do not open the microphone (play only; type to talk)")
    parser.add_argument("--log-level", default="warning",
                        choices=("debug", "info", "warning", "error"),
                        help="log detail on stderr (debug: every ACK and barge-in with the "
                             "frames the audio callback consumed)")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str]) -> int:
    """Run `duplex-demo talk` with `argv` (the flags after `talk`); return the exit code."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("duplex_demo.talk").setLevel(args.log_level.upper())
    options = TalkOptions(url=args.url, microphone=not args.no_mic,
                          api_key=os.environ.get("DUPLEX_API_KEY") or None)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(TalkClient(options).run())
    except AudioUnavailable as error:
        print(f"duplex-demo talk: {error}", file=sys.stderr)
        return EXIT_AUDIO
    except ConnectionFailed as error:
        print(f"duplex-demo talk: {error}", file=sys.stderr)
        return EXIT_CONNECTION
    return 0
