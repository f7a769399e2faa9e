"""The real MLE-bench for conformance tests: the python of `MLEBENCH_VENV` and what it says of its mlebench.

Reads MLEBENCH_VENV (and CI) from the environment and runs that venv's python in /tmp; writes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mle_world.grading.mlebench_version import SOURCE_CODE


def find_mlebench_python() -> tuple[Path | None, str]:
    """The venv's python when `import mlebench.grade` works there, else None and why not."""
    venv = os.environ.get("MLEBENCH_VENV")
    if not venv:
        return None, "MLEBENCH_VENV is not set"
    python = Path(venv) / "bin" / "python"
    if not python.is_file():
        return None, f"MLEBENCH_VENV={venv}: no bin/python"
    probe = subprocess.run(
        [str(python), "-c", "import mlebench.grade"],
        capture_output=True,
        text=True,
        cwd="/tmp",
        timeout=120,
        check=False,
    )
    if probe.returncode:
        return None, f"MLEBENCH_VENV={venv}: import mlebench.grade failed: {probe.stderr.strip()[-300:]}"
    return python, ""


def require_mlebench(python: Path | None, why_not: str) -> None:
    """CI installs MLE-bench on every run (scripts/test.sh): there a missing one fails the test, so the
    skip these tests had for years cannot silently come back; elsewhere it skips."""
    if python is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but no MLE-bench: {why_not} (scripts/test.sh installs it)")
        pytest.skip(f"no MLE-bench: {why_not}")


def installed_source(python: Path, env: dict[str, str] | None = None) -> dict[str, str | None]:
    """What `python` says of the mlebench it imports (mlebench_version.SOURCE_CODE)."""
    done = subprocess.run(
        [str(python), "-c", SOURCE_CODE + "import json; print(json.dumps(source))"],
        capture_output=True,
        text=True,
        cwd="/tmp",
        timeout=120,
        check=True,
        env=env,
    )
    source: dict[str, str | None] = json.loads(done.stdout)
    return source
