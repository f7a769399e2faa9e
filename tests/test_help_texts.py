"""Every benchmark and setup script the docs show answers `--help` with its usage instead of running,
and a script that takes no arguments refuses one.

Runs each `--help` in a real subprocess; writes nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Scripts whose knobs are environment variables; before, each ignored its arguments and ran
# (`bash scripts/demo.sh --help` installed packages, built llama.cpp and ran two sweeps).
NO_ARGUMENT_SCRIPTS = [
    "scripts/demo.sh",
    "scripts/install_llama.sh",
    "scripts/install_mlebench.sh",
    "scripts/install_runtimes.sh",
    "scripts/serve/serve_llama_local.sh",
    "scripts/image/build_aide_enroot.sh",
    "scripts/image/build_ci_image.sh",
]


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "benchmarks").glob("*.py")))
def test_benchmark_help(script: str) -> None:
    # plan.py had no options and ran its benchmark on --help.
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:"), proc.stdout[:300]


@pytest.mark.parametrize("script", NO_ARGUMENT_SCRIPTS)
def test_script_help_and_stray_argument(script: str) -> None:
    path = REPO / script
    header = path.read_text().splitlines()[1].removeprefix("# ")
    shown = subprocess.run(["bash", str(path), "--help"], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == header
    assert not any(line.startswith(("#", "set ")) for line in shown.stdout.splitlines())
    stray = subprocess.run(["bash", str(path), "--bogus"], capture_output=True, text=True, timeout=30)
    assert stray.returncode == 2
    # install_llama.sh and install_runtimes.sh take a flag or two, and say so in the same line.
    only = {"install_llama.sh": " but --print-cmake-args", "install_runtimes.sh": " but --force or --check"}
    only = only.get(path.name, "")
    assert stray.stderr.strip() == (
        f"{path.name}: unknown argument --bogus (it takes none{only}: set its environment variables, see --help)"
    )


@pytest.mark.skipif(
    not Path("/usr/lib/python3.11/EXTERNALLY-MANAGED").exists() or not Path("/usr/bin/python3").exists(),
    reason="needs Debian's externally managed python3",
)
def test_demo_refuses_the_system_python_before_installing_anything(tmp_path: Path) -> None:
    """With Debian's own python3 first on PATH, demo.sh failed in pip's PEP 668 error after apt-get."""
    (tmp_path / "python3").symlink_to("/usr/bin/python3")
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "demo.sh")],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.strip().startswith("demo.sh: ") and "externally managed" in proc.stderr
    assert "python3 -m venv" in proc.stderr and proc.stdout == ""
