"""The llama.cpp build made by scripts/install_llama.sh: portable flags, and a real chat completion.

Runs the install script (idempotent: it keeps an install that completes a request) and reads the
library's own report of the CPU features it was compiled with; writes nothing outside pip's site.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.llama, pytest.mark.slow]


def _installed() -> bool:
    proc = subprocess.run([sys.executable, "-c", "import llama_cpp"], capture_output=True)
    return proc.returncode == 0


@pytest.fixture(scope="module")
def installed() -> None:
    if not _installed():
        if os.environ.get("CI"):
            pytest.fail("llama-cpp-python missing: scripts/test.sh runs scripts/install_llama.sh")
        pytest.skip("llama.cpp not installed (bash scripts/install_llama.sh)")


def test_install_step_proves_a_chat_completion(installed: None) -> None:
    proc = subprocess.run(
        ["bash", str(REPO / "scripts/install_llama.sh")],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr
    assert "completes a chat request" in proc.stderr


def test_build_has_no_native_amx_or_avx512_code(installed: None) -> None:
    # llama.cpp reports the CPU features compiled into its CPU backend; a native build on a machine
    # advertising AMX/AVX-512 lists them and then crashes on hosts that cannot execute them.
    code = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"
    info = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert info.returncode == 0, info.stderr
    flags = {
        part.split("=")[0].strip(): part.split("=")[1].strip()
        for part in info.stdout.replace("|", "\n").splitlines()
        if "=" in part
    }
    assert flags, info.stdout
    for feature in ("AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8"):
        assert flags.get(feature, "0") == "0", (feature, info.stdout)
