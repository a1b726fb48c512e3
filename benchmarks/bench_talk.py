"""`duplex-demo talk` on ALSA's null device: are the ACKed positions the frames the audio
callback consumed?

Starts a real `server.app.DemoServer` with the uniform voice (`--calibration marks`) in this
process on 127.0.0.1 and runs `python -m server talk --log-level debug` as a child process with
a temporary `HOME` whose `.asoundrc` makes ALSA's `null` PCM the default device (PortAudio then
sees one device with input and output that consumes frames as fast as the callback gives them:
positions are checked, not timing). The child types `--rounds` prompts (a 26-word `say:`
reply); odd rounds are stopped with Enter at a random 0.3-2.5 s after the reply's first ACK,
even rounds play to the end. Every ACK and barge-in is logged by the client with the frames the
callback consumed (`rendered_frames`) and the output latency; the table gives, per kind of
ACK, the largest difference between the frames of the reply the callback consumed and the
frames ACKed (final ACKs: the frames of the whole reply and the frames ACKed). The client
subtracts the output latency PortAudio reports from the stream position (on a sound card the
ACK trails the consumed frames by that latency); on the null device silence follows each piece
of audio at once, so the ACKed position should equal the frames consumed.

Target (issue 14): within one callback block. Prints the command, the machine facts and the
table with PASS/FAIL. Run from the project root: `.venv/bin/python -m benchmarks.bench_talk`
(about 1 minute; it imports `tests.test_local_audio` helpers, so it must run as a module).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
from pathlib import Path

from benchmarks.measuring import print_run_header
from benchmarks.tables import print_table
from server.app import DemoServer
from server.config import ServerConfig, build_services, server_options
from tests.test_local_audio import LONG, NULL_ASOUNDRC, RATE, TalkProcess, acks

WORDS = len(LONG.removeprefix("say: ").split())
"""Words of the reply; 400 ms each with the uniform voice."""


async def run(rounds: int, seed: int) -> list[tuple[str, int, int, int, int, int]]:
    """Talk for `rounds` replies; (kind, played, rendered, latency, block, reply frames) per
    logged ACK or barge-in (`kind`: periodic, barge_in or final)."""
    rng = random.Random(seed)
    config = ServerConfig(port=0, tts="uniform", calibration="marks", deterministic=True)
    services = await asyncio.to_thread(build_services, config)
    demo = DemoServer(services, config.allow_origin, server_options(config))
    await demo.start("127.0.0.1", 0)
    url = f"ws://127.0.0.1:{demo.port()}/v1/realtime"
    total_frames = WORDS * 400 * RATE // 1000
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / ".asoundrc").write_text(NULL_ASOUNDRC, encoding="utf-8")
        talk = await TalkProcess.start(Path(home), "--url", url, "--log-level", "debug")
        try:
            await talk.wait_line(talk.stdout, r"^connected to ")
            for round_index in range(rounds):
                seen = len(talk.stderr)
                await talk.type(LONG)
                if round_index % 2:
                    await talk.wait_line(talk.stderr, r"ack \S+ played_ms=\d+", after=seen)
                    await asyncio.sleep(rng.uniform(0.3, 2.5))
                    await talk.type("")
                    await talk.wait_line(talk.stderr, r"barge_in ", after=seen)
                else:
                    await talk.wait_line(
                        talk.stderr, rf"ack \S+ played_ms={total_frames * 1000 // RATE} ",
                        timeout=60, after=seen)
        finally:
            await talk.stop()
            assert demo.server is not None
            demo.server.close()
            await demo.server.wait_closed()
    rows = []
    for kind, _, _, played, rendered, latency, block in acks(talk.stderr):
        final = kind == "ack" and played == rendered == total_frames
        rows.append(("final" if final else "periodic" if kind == "ack" else kind,
                     played, rendered, latency, block, total_frames))
    return rows


def main() -> None:
    """Parse flags, run, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="replies (default 6)")
    parser.add_argument("--seed", type=int, default=1, help="barge-in moments (default 1)")
    args = parser.parse_args()
    print_run_header()
    rows = asyncio.run(run(args.rounds, args.seed))
    table = []
    for kind in ("periodic", "barge_in", "final"):
        chosen = [row for row in rows if row[0] == kind]
        errors = [abs((total if kind == "final" else rendered) - played)
                  for _, played, rendered, _, _, total in chosen]
        blocks = sorted({row[4] for row in chosen})
        worst = max(errors, default=0)
        within = all(error <= row[4] for error, row in zip(errors, chosen, strict=True))
        table.append((kind, len(chosen), worst, "/".join(map(str, blocks)) or "-",
                      "<= 1 block", "PASS" if chosen and within else "FAIL"))
    print_table("ACKed position vs frames the callback consumed (frames at 24 kHz)",
                ("ACKs", "count", "max |consumed - ACKed|", "block", "target", "result"),
                table)


if __name__ == "__main__":
    main()
