"""A dry run imports no heavy library it does not use (pandas, numpy, matplotlib, openai, submitit, ...)
and no later stage it does not use (the launcher proper, grading, audit, agent).

Reads the packaged configs; writes a dry run's launch.json and agent-config.yaml under tmp_path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("pandas", "numpy", "matplotlib", "scipy", "sklearn", "openai", "httpx2", "submitit", "tenacity")
# ...nor the packages of later stages
LATER = (
    "mle_world.launch.launcher",
    "mle_world.launch.slurm.backend",
    "mle_world.grading",
    "mle_world.audit",
    "mle_world.agent",
)

DRY_RUN = """
import contextlib, io, json, sys
from mle_world.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["--regime", "gated", "--dry-run", "--summary", "--output-dir", sys.argv[1],
                 "--enroot-image", "/img/aide.sqsh"])
print(json.dumps({"code": code, "loaded": sorted(m for m in sys.argv[2:] if m in sys.modules)}))
"""


def test_dry_run_loads_no_heavy_library(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", DRY_RUN, str(tmp_path / "out"), *HEAVY, *LATER],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "loaded": []}, out.stderr
    assert (tmp_path / "out" / "launch.json").is_file()
