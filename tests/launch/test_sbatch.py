"""The sbatch script of a Slurm sweep as a cluster operator meets it: the rendered script against golden
files (the shipped cluster.yaml and one with every placement option), cluster.yaml's sbatch options that
the harness owns refused, and the options reaching the real local Slurm exactly.

Golden files live in tests/launch/golden/; set UPDATE_GOLDEN=1 to re-record them. Writes under pytest's
tmp paths; the Slurm test submits one held job and cancels it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from launchkit import make_plan

from mle_world.errors import ConfigError
from mle_world.launch import write_sbatch_preview
from mle_world.plan.cluster import ClusterConfig
from mle_world.plan.config import load_cluster_config
from mle_world.plan.sweep_plan import LaunchOptions

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
SLURM = LaunchOptions(backend="slurm", show_progress=False)

PLACED = {
    "slurm": {
        "partition": "gpu",
        "account": "proj-mlew",
        "qos": "normal",
        "gpus_per_trial": 1,
        "gpu_type": "a100",
        "cpus_per_trial": 2,
        "mem_gb": 3,
        "array_parallelism": 4,
        "grading_margin_min": 30,
        "extra_sbatch": {
            "constraint": "a100&nvlink",
            "exclude": "node17",
            "exclusive": True,
            "--mail-type": "FAIL",
            "overcommit": None,
            "contiguous": False,
        },
        "setup": ["module load cuda/12.4"],
    }
}


def preview(tmp_path: Path, cluster: ClusterConfig, n: int = 5, budget_s: float = 43200.0) -> str:
    out = tmp_path / "out"
    plan = make_plan(out, tmp_path / "data", n, budget_s=budget_s, cluster=cluster)
    [path] = write_sbatch_preview(plan, SLURM)
    folder = str((out / "slurm").absolute())
    return path.read_text().replace(folder, "<OUT>/slurm").replace(shlex.quote(sys.executable), "<PYTHON>")


def check_golden(name: str, text: str) -> None:
    golden = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"{golden} is missing: record it with UPDATE_GOLDEN=1 and review the diff"
    assert text == golden.read_text()


def test_shipped_cluster_config_renders_the_golden_script(tmp_path: Path) -> None:
    """12 h budget + 30 min margin, --requeue whatever the cluster's JobRequeue default, USR2 90 s
    before the limit, one log per array task under the output dir."""
    cluster = load_cluster_config(REPO / "configs" / "cluster.yaml")
    check_golden("shipped.sbatch", preview(tmp_path, cluster))


def test_every_placement_option_reaches_the_script(tmp_path: Path) -> None:
    """account, qos, constraint (shell-quoted), bare flags from true/null, false left out, setup lines."""
    text = preview(tmp_path, ClusterConfig.model_validate(PLACED))
    check_golden("placed.sbatch", text)
    assert "#SBATCH --exclusive\n" in text and "#SBATCH --overcommit\n" in text
    assert "contiguous" not in text and "=True" not in text and "=None" not in text


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("job-name", "finds a submission's array"),
        ("job_name", "finds a submission's array"),
        ("--output", "logs go to"),
        ("time", "grading_margin_min"),
        ("array", "array_parallelism"),
        ("signal", "checkpoints and requeues"),
        ("no-requeue", "requeued and resume"),
        ("hold", "recorded its job ids"),
        ("partition", "use slurm.partition"),
    ],
)
def test_options_the_harness_sets_are_refused(tmp_path: Path, key: str, why: str) -> None:
    """A job name of the user's broke the reconciliation of submissions (found by name), `time` the
    wall limit's margin, `output` the logs: each was passed through and silently replaced the harness's."""
    path = tmp_path / "cluster.yaml"
    path.write_text(f"slurm:\n  extra_sbatch: {{{key}: x}}\n")
    with pytest.raises(ConfigError) as err:
        load_cluster_config(path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path}: slurm.extra_sbatch: {key}: set by the harness")
    assert why in line


@pytest.mark.slurm
def test_the_options_reach_slurm_exactly(slurm_cluster: None, tmp_path: Path) -> None:
    """The rendered script submitted as is (held by its own --hold until a launcher would release it,
    then cancelled): Slurm records each option, and the
    bare flags from cluster.yaml's true/null parse (`requeue: true` used to render `--requeue=1`, which
    sbatch refuses)."""
    placed = {**PLACED["slurm"], "account": None, "qos": None, "setup": [], "gpu_type": None}
    placed["extra_sbatch"] = {
        "comment": "mlew golden",
        "overcommit": None,
        "requeue": True,
        "contiguous": False,
    }
    out = tmp_path / "out"
    plan = make_plan(
        out, tmp_path / "data", 3, budget_s=600.0, cluster=ClusterConfig.model_validate({"slurm": placed})
    )
    [path] = write_sbatch_preview(plan, SLURM)
    proc = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip().split(";")[0]
    try:
        show = subprocess.run(
            ["scontrol", "show", "job", job], capture_output=True, text=True, check=True
        ).stdout
    finally:
        subprocess.run(["scancel", job], check=False)
    fields = dict(re.findall(r"(\w+)=(\S*)", show))
    assert fields["Requeue"] == "1" and fields["Partition"] == "gpu" and fields["Reason"] == "JobHeldUser"
    assert fields["TimeLimit"] == "00:40:00"  # 600 s budget + 30 min margin
    assert re.search(r"^\s*Comment=mlew golden\s*$", show, re.M)  # submitit's quotes: sbatch strips them
    assert fields["ArrayTaskThrottle"] == "3"  # min(array_parallelism 4, 3 trials)
    assert fields["MinMemoryNode"] == "3G" and fields["JobName"] == "mlew-ungated"
    assert fields["StdOut"].startswith(str((out / "slurm").absolute()))
