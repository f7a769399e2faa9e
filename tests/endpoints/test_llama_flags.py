"""The CMake flags scripts/install_llama.sh builds llama.cpp with, for CPUs other than this one.

Runs the script's `--print-cmake-args` (it exits before building) with a cpuinfo file of another CPU in
a temp dir; writes nothing else.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install_llama.sh"
V3 = "fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt avx f16c fma bmi1 bmi2 avx2"
"""x86-64-v3: the level the flags had before, for every x86-64 CPU."""

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 flags (uname -m)")


def cmake_args(tmp_path: Path, flags: str | None) -> dict[str, str]:
    """GGML_* option -> ON/OFF the script would build with on a CPU listing `flags` (None: no cpuinfo)."""
    cpuinfo = tmp_path / "cpuinfo"
    if flags is not None:
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n")
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_CMAKE_ARGS"}
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--print-cmake-args"],
        env={**env, "CPUINFO": str(cpuinfo)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    pairs = (arg.removeprefix("-D").split("=") for arg in proc.stdout.split())
    return {name.removeprefix("GGML_"): value for name, value in pairs}


def test_a_cpu_without_avx_gets_a_build_without_avx(tmp_path: Path) -> None:
    # A Nehalem (x86-64-v2, no AVX): the x86-64-v3 build died there with SIGILL in its first completion,
    # and one with these flags completed it (both run under `qemu-x86_64 -cpu Nehalem`).
    args = cmake_args(tmp_path, "fpu sse sse2 ssse3 cx16 sse4_1 sse4_2 popcnt lahf_lm hypervisor")
    assert args["NATIVE"] == "OFF"
    assert args["SSE42"] == "ON"
    for option in ("AVX", "AVX2", "BMI2", "FMA", "F16C"):
        assert args[option] == "OFF", option


def test_each_listed_level_feature_is_used_and_only_those(tmp_path: Path) -> None:
    args = cmake_args(tmp_path, "fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt avx")  # x86-64-v2 plus AVX
    assert [args[o] for o in ("SSE42", "AVX", "AVX2", "BMI2", "FMA", "F16C")] == ["ON", "ON"] + ["OFF"] * 4
    # Without SSE4.2 (x86-64-v1, which numpy 2 no longer runs on), not even that.
    assert cmake_args(tmp_path, "fpu sse sse2 pni cx16 lahf_lm")["SSE42"] == "OFF"
    v3 = cmake_args(tmp_path, V3)
    assert all(v3[o] == "ON" for o in ("SSE42", "AVX", "AVX2", "BMI2", "FMA", "F16C"))


def test_advertised_avx512_vnni_and_amx_stay_off(tmp_path: Path) -> None:
    args = cmake_args(tmp_path, V3 + " avx512f avx512bw avx512_vnni avx512_bf16 avx_vnni amx_tile amx_int8")
    for option in ("AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AVX_VNNI", "AMX_TILE", "AMX_INT8"):
        assert args[option] == "OFF", option
    assert args["AVX2"] == "ON"


def test_no_readable_cpuinfo_means_the_x86_64_baseline(tmp_path: Path) -> None:
    args = cmake_args(tmp_path, None)
    assert all(args[o] == "OFF" for o in ("SSE42", "AVX", "AVX2", "BMI2", "FMA", "F16C"))
