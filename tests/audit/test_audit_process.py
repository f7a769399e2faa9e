"""One audit process: `run_paper.py audit` imports none of the stages before it that it does not use (the
Slurm backend, the trial supervisor, the sweep planner and their libraries), and what it read is freed
when `run_audit` returns (not left to the collection at exit).

Reads nothing of the repository; writes a small synthetic sweep and its audit under tmp_path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from synthetic import make_sweep

UNUSED = (
    "mle_world.launch.slurm.backend",
    "mle_world.launch.trial",
    "mle_world.launch.launcher",
    "mle_world.plan",
    "submitit",
    "yaml",
)

AUDIT = """
import contextlib, io, json, sys
from mle_world.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["audit", *sys.argv[1:3], "--out", sys.argv[3]])
print(json.dumps({"code": code, "loaded": sorted(m for m in sys.argv[4:] if m in sys.modules)}))
"""


def test_audit_loads_no_earlier_stage(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path, 30, events=True)
    out = subprocess.run(
        [sys.executable, "-c", AUDIT, *map(str, dirs), str(tmp_path / "audit"), *UNUSED],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "loaded": []}, out.stderr
    assert (tmp_path / "audit" / "index.html").is_file()


KEPT = """
import gc, sys
from pathlib import Path
from mle_world.audit import run_audit
from mle_world.audit.collect import Sweep, Trial
run_audit([Path(d) for d in sys.argv[1:3]], out_dir=Path(sys.argv[3]))
print(sum(isinstance(o, Sweep | Trial) for o in gc.get_objects()))  # no collection before counting
"""


def test_audit_frees_what_it_read(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path, 30, events=True)
    out = subprocess.run(
        [sys.executable, "-c", KEPT, *map(str, dirs), str(tmp_path / "audit")],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert out.stdout.strip().splitlines()[-1] == "0", out.stderr


NO_PLOTS = """
import contextlib, io, json, sys
from mle_world.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["audit", *sys.argv[1:]])
print(json.dumps({"code": code, "matplotlib": "matplotlib" in sys.modules}))
"""


def test_no_plots_draws_nothing_and_keeps_the_current_plots(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path, 300, events=True)  # ungated predictions too: a calibration plot
    out = tmp_path / "audit"

    def audit(*flags: str) -> tuple[bool, str]:
        """(matplotlib imported, report.md's plots section) of one audit process."""
        run = subprocess.run(
            [sys.executable, "-c", NO_PLOTS, *map(str, dirs), "--out", str(out), *flags],
            capture_output=True, text=True, check=True, cwd=tmp_path,
        )  # fmt: skip
        result = json.loads(run.stdout.strip().splitlines()[-1])
        assert result["code"] == 0, run.stderr
        return result["matplotlib"], (out / "report.md").read_text().partition("## Plots")[2]

    assert audit("--no-plots") == (False, "")
    assert not list(out.glob("*.png"))
    drew, plots = audit()
    assert drew and "(medal_rates.png)" in plots and "(calibration.png)" in plots
    drawn = {p.name: p.read_bytes() for p in out.glob("*.png")}
    # Unchanged numbers: the PNGs drawn are still the sweep's, shown without drawing anything.
    assert audit("--no-plots") == (False, plots)
    assert 'src="data:image/png;base64,' in (out / "index.html").read_text()
    report = next(dirs[0].glob("runs/aide/*_grading_report.json"))
    data = json.loads(report.read_text())
    data.update(gold_medal=not data["gold_medal"], any_medal=not data["gold_medal"])
    report.write_text(json.dumps(data))
    # A medal changed: medal_rates.png shows old numbers, so it is left out (and left as it was).
    drew, plots = audit("--no-plots")
    assert not drew and "medal_rates.png" not in plots and "(calibration.png)" in plots
    assert {p.name: p.read_bytes() for p in out.glob("*.png")} == drawn
