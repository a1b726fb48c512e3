"""One arithmetic for faster-whisper on every x86-64 machine: the same audio, the same reading.

CTranslate2 picks its matrix library by CPU vendor (Intel MKL on Intel, oneDNN elsewhere), and the
libraries and CTranslate2's own kernels pick theirs by instruction set (MKL runs AVX-512 where
there is one), so tiny.en int8 read short, borderline sounds differently on an Intel AVX-512
machine and on an AMD AVX2 one: CI on an AMD EPYC read a
silent second as " ." and Piper's "Right, right." as "right right", and 8 tests tuned on an Intel
Xeon failed (2026-12-07). `CPU_NUMERICS` pins the path an AVX2 machine without MKL takes: oneDNN
(`CT2_USE_MKL=0`), CTranslate2's AVX2 kernels (`CT2_FORCE_CPU_ISA`) and oneDNN's AVX2 kernels
(`ONEDNN_MAX_CPU_ISA`); on the Intel Xeon these reproduce 7 of the AMD machine's 8 failures
exactly. The eighth came from the audio: Piper runs on onnxruntime, which picks its kernels by CPU
too and has no such switch, and its "Heh heh." measured 2.4821439 dB between syllables there and
2.4821449 here, enough to move a reading 0.025 from its rule's edge. So a test's example keeps a
margin from each threshold beyond what one machine shows. Names and meanings: CTranslate2's
`docs/environment_variables.md` and oneDNN's `dev_guide_cpu_dispatcher_control`.

CTranslate2 reads `CT2_USE_MKL` when it is imported, so `pin_cpu_numerics` runs when the
`calibration` package is imported, before any module of the project imports faster-whisper. A
value already in the environment is kept (an operator may choose MKL for speed), and nothing is
pinned on a CPU without AVX2 or off x86-64 (there is no such path to pin to). The cost, on the
Intel Xeon only (an AMD machine already takes this path): the person's transcription p50 238
ms against 140 under MKL (`benchmarks/bench_asr_numerics.py`, 2026-12-07); CTranslate2's log
says MKL's GEMMs run on packed weights and oneDNN's do not.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

CPU_NUMERICS = {"CT2_USE_MKL": "0", "CT2_FORCE_CPU_ISA": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
"""The environment that pins faster-whisper's arithmetic: variable name -> value."""


def cpu_has_avx2(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True on an x86-64 machine whose CPU flags (Linux `cpuinfo`) list avx2; False otherwise,
    and wherever the flags cannot be read."""
    if platform.machine().lower() not in {"x86_64", "amd64"}:
        return False
    try:
        flags = next(line for line in cpuinfo.read_text().splitlines()
                     if line.startswith("flags"))
    except (OSError, StopIteration):
        return False
    return "avx2" in flags.split()


def pin_cpu_numerics() -> None:
    """Set each `CPU_NUMERICS` variable the environment does not already set, when the CPU has
    AVX2 (`cpu_has_avx2`). Takes effect for CTranslate2 only if it is not yet imported."""
    if cpu_has_avx2():
        for name, value in CPU_NUMERICS.items():
            os.environ.setdefault(name, value)
