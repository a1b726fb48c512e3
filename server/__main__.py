"""`duplex-demo`: start the duplex voice demo server and print its URL;
`duplex-demo talk …`: talk with a server through the sound card (`server.local_audio.cli`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sys
from collections.abc import Sequence

from server.app import DemoServer
from server.config import build_services, parse_config, server_options
from server.logs import configure_logging


async def serve_forever(argv: Sequence[str] | None = None) -> None:
    """Parse flags, load the models, serve until SIGINT/SIGTERM; then close every session
    with code 1001 (`DemoServer.shutdown`) and return."""
    config = parse_config(argv)
    configure_logging(config.log_level, config.log_format)
    services = await asyncio.to_thread(build_services, config)
    demo = DemoServer(services, config.allow_origin, server_options(config))
    await demo.start(config.host, config.port)
    freeze_startup_objects()
    host = f"[{config.host}]" if ":" in config.host else config.host
    metrics_port = demo.metrics_port()
    metrics = "" if metrics_port is None else f", /metrics also at http://{host}:{metrics_port}"
    print(f"duplex-demo listening on http://{host}:{demo.port()} "
          f"(WebSocket at /v1/realtime{metrics})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await demo.shutdown()


def freeze_startup_objects() -> None:
    """Move every object alive now (modules, models, the services) out of the cyclic garbage
    collector's reach (`gc.freeze`, after a last full collection so that no garbage is
    frozen): they live as long as the process, and a full collection would otherwise walk
    them all each time while every session waits. Measured under `benchmarks.bench_load`
    (uniform voice, 100 sessions): about 100,000 of the 117,000 tracked objects were there
    at startup, and each full collection took 52 ms of CPU on the event loop; frozen, the
    collector tracks the sessions' ~20,000-30,000 objects only."""
    gc.collect()
    gc.freeze()


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: the server, or the `talk` client when the first argument
    is `talk`."""
    args = list(argv if argv is not None else sys.argv[1:])
    if args[:1] == ["talk"]:
        from server.local_audio.cli import main as talk

        sys.exit(talk(args[1:]))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_forever(args))


if __name__ == "__main__":
    main()
