"""`duplex-demo`: start the duplex voice demo server and print its URL;
`duplex-demo talk …`: talk with a server through the sound card (`server.local_audio.cli`)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence

from server.config import parse_config
from server.serving import run
from server.workers import serve_workers


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: the server (`server.serving`; with `--workers` N > 1,
    N worker processes, `server.workers`), or the `talk` client when the first argument is
    `talk`."""
    args = list(argv if argv is not None else sys.argv[1:])
    if args[:1] == ["talk"]:
        from server.local_audio.cli import main as talk

        sys.exit(talk(args[1:]))
    config = parse_config(args)
    if config.workers > 1:
        sys.exit(serve_workers(config))
    with contextlib.suppress(KeyboardInterrupt):
        run(config)


if __name__ == "__main__":
    main()
