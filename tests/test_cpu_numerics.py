"""faster-whisper's arithmetic is pinned (`calibration.cpu_numerics`): the same audio gets the same
reading on an Intel AVX-512 machine and an AMD AVX2 one, as CI's machines are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from calibration.cpu_numerics import CPU_NUMERICS, cpu_has_avx2, pin_cpu_numerics

ROOT = Path(__file__).resolve().parents[1]


def test_avx2_is_read_from_the_cpu_flags(tmp_path: Path) -> None:
    """The flags line decides; a machine without it, or without the file, pins nothing."""
    with_avx2 = tmp_path / "with"
    with_avx2.write_text("processor\t: 0\nflags\t\t: fpu sse4_1 avx avx2 fma\n")
    without = tmp_path / "without"
    without.write_text("processor\t: 0\nflags\t\t: fpu sse4_1 avx avx2_x\n")
    expected = os.uname().machine in {"x86_64", "amd64"}
    assert cpu_has_avx2(with_avx2) is expected
    assert not cpu_has_avx2(without)
    assert not cpu_has_avx2(tmp_path / "missing")


def test_an_operator_s_choice_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable the environment sets is left alone; the others are pinned."""
    monkeypatch.setenv("CT2_USE_MKL", "1")
    for name in set(CPU_NUMERICS) - {"CT2_USE_MKL"}:
        monkeypatch.delenv(name, raising=False)
    pin_cpu_numerics()
    assert os.environ["CT2_USE_MKL"] == "1"
    for name in set(CPU_NUMERICS) - {"CT2_USE_MKL"}:
        assert os.environ.get(name) == (CPU_NUMERICS[name] if cpu_has_avx2() else None)


def test_the_server_loads_whisper_on_the_pinned_path() -> None:
    """A process that starts as the server does (`server.__main__`) and then loads tiny.en runs
    CTranslate2's AVX2 kernels without MKL on any CPU with AVX2, whatever its vendor (CTranslate2's
    own log, `CT2_VERBOSE=1`, says which it chose); on a CPU without AVX2 nothing is pinned."""
    env = {name: value for name, value in os.environ.items() if name not in CPU_NUMERICS}
    env["CT2_VERBOSE"] = "1"
    code = ("import os, server.__main__\n"
            "from calibration.local_asr import load_whisper_model\n"
            "load_whisper_model()\n"
            f"print(sorted(name for name in {sorted(CPU_NUMERICS)!r} if name in os.environ))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                            capture_output=True, text=True, timeout=120)
    log = result.stderr + result.stdout
    pinned = result.stdout.strip().splitlines()[-1]
    if cpu_has_avx2():
        assert pinned == repr(sorted(CPU_NUMERICS))
        assert "Selected ISA: AVX2" in log
        assert "Use Intel MKL: false" in log
    else:
        assert pinned == "[]"
