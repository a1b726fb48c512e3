"""ASR numerics benchmark: what pinning faster-whisper's arithmetic (`calibration.cpu_numerics`)
costs on this machine, and how many readings it changes.

Each arithmetic runs in its own process (CTranslate2 reads its switches when it is imported):
`pinned` (the project's default: oneDNN, AVX2 kernels) and `native` (CTranslate2's and oneDNN's
own choice for this CPU: Intel MKL and AVX-512 on an Intel Xeon, oneDNN and AVX2 on an AMD EPYC
without AVX-512, where the two are one path). Each process transcribes, as the person's
transcriber does (`bench_asr_window.measure` in the person's window, tiny.en int8, 2 threads), the
120 sentences and 175 short utterances of `bench_asr_window`; the rounds alternate the two.

Table: per arithmetic, CTranslate2's ISA and MKL use (its own log), word error rate, the wall time
of one sentence's transcription (p50 / p95 over every round), the backchannels and others taken
for backchannels, and the transcripts that differ from `pinned`'s. Target: `pinned` takes at
most 1.25 times `native`'s p50. Exit status 1 when it fails. About 4 minutes per round on an
idle 2-core machine.

Run from the project root: `.venv/bin/python -m benchmarks.bench_asr_numerics [--rounds N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

from benchmarks.measuring import percentile, print_run_header, verdict
from benchmarks.tables import print_table
from calibration.cpu_numerics import CPU_NUMERICS

ARITHMETICS = {"pinned": {}, "native": {"CT2_USE_MKL": "", "CT2_FORCE_CPU_ISA": "",
                                        "ONEDNN_MAX_CPU_ISA": "ALL"}}
"""Arithmetic name -> environment over the pins: empty CTranslate2 switches mean its own choice
(`pin_cpu_numerics` keeps a variable already set), oneDNN's `ALL` its own."""

MAX_SLOWDOWN = 1.25
"""Target: `pinned`'s p50 over `native`'s."""


def transcribe_all() -> dict:
    """In this process: the transcripts, times (ms) and backchannel verdicts of
    `bench_asr_window`'s sentences and short utterances in the person's window."""
    from benchmarks.bench_asr_window import VOICES, short_utterances
    from calibration.local_asr import LocalWhisperTranscriber
    from calibration.whisper_window import PERSON_WINDOW_S, WHISPER_RATE_HZ
    from server.listening.backchannel import Verdict, classify
    from tests import speech_fixtures
    from tests.echo_room import word_errors, words
    from tests.test_vad import SENTENCES

    transcriber = LocalWhisperTranscriber(word_timestamps=False, temperature_fallback=False,
                                          window_s=PERSON_WINDOW_S)
    transcriber.load()
    out: dict = {"transcripts": [], "times_ms": [], "errors": 0, "words": 0,
                 "backchannels": 0, "others": 0}
    for text in SENTENCES:
        for engine, voice in VOICES:
            pcm = np.concatenate((speech_fixtures.silence(300),
                                  speech_fixtures.speech(text, engine, voice),
                                  speech_fixtures.silence(300))).astype(np.float32)
            started = time.perf_counter()
            heard = transcriber.transcribe_blocking(pcm, WHISPER_RATE_HZ)
            out["times_ms"].append((time.perf_counter() - started) * 1000.0)
            out["transcripts"].append(str(heard))
            out["errors"] += word_errors(text, heard)
            out["words"] += len(words(text))
    for recording in short_utterances():
        pcm = np.concatenate((speech_fixtures.silence(300), recording.pcm,
                              speech_fixtures.silence(150))).astype(np.float32)
        heard = transcriber.transcribe_blocking(pcm, WHISPER_RATE_HZ)
        out["transcripts"].append(str(heard))
        if classify(heard, pcm, WHISPER_RATE_HZ).verdict is Verdict.BACKCHANNEL:
            out["backchannels" if recording.kind == "backchannel" else "others"] += 1
    return out


def run_child(name: str) -> dict:
    """`transcribe_all` in a new process under arithmetic `name`, with CTranslate2's log of
    the ISA and MKL use it chose."""
    env = {key: value for key, value in os.environ.items() if key not in CPU_NUMERICS}
    env.update(ARITHMETICS[name], CT2_VERBOSE="1")
    result = subprocess.run([sys.executable, "-m", "benchmarks.bench_asr_numerics", "--child"],
                            env=env, check=True, capture_output=True, text=True)
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    log = result.stderr + result.stdout
    isa = re.search(r"Selected ISA: (\w+)", log)
    mkl = re.search(r"Use Intel MKL: (\w+)", log)
    measured["path"] = (f"{isa.group(1) if isa else '?'}, "
                        f"MKL {mkl.group(1) if mkl else '?'}")
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds of both (default 1)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(transcribe_all()))
        return
    print_run_header()
    runs: dict[str, list[dict]] = {name: [] for name in ARITHMETICS}
    for _ in range(args.rounds):
        for name in ARITHMETICS:
            runs[name].append(run_child(name))
    reference = runs["pinned"][0]["transcripts"]
    rows = []
    for name, measured in runs.items():
        first = measured[0]
        times = [t for run in measured for t in run["times_ms"]]
        differ = sum(a != b for a, b in zip(first["transcripts"], reference, strict=True))
        rows.append([name, first["path"], f"{100.0 * first['errors'] / first['words']:.2f}",
                     f"{percentile(times, 50):.0f}", f"{percentile(times, 95):.0f}",
                     str(first["backchannels"]), str(first["others"]),
                     f"{differ} of {len(reference)}"])
    print_table(f"{args.rounds} round(s), tiny.en int8 in the person's window", [
        "arithmetic", "path", "WER %", "ms p50", "ms p95", "backchannels taken",
        "others taken", "transcripts unlike pinned"], rows)
    pinned = percentile([t for run in runs["pinned"] for t in run["times_ms"]], 50)
    native = percentile([t for run in runs["native"] for t in run["times_ms"]], 50)
    ok = pinned <= MAX_SLOWDOWN * native
    print(f"pinned p50 {pinned:.0f} ms vs native {native:.0f} ms "
          f"({pinned / native:.2f}x, target <= {MAX_SLOWDOWN}x): {verdict(ok)}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
