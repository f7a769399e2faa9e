"""The audit's rates against MLE-bench's own `experiments/aggregate_grading_reports.py`, on the same reports.

Needs a real MLE-bench in `MLEBENCH_VENV` (fails without one under CI=true, skips elsewhere; see
test_mlebench_conformance.py). Writes a synthetic sweep and MLE-bench's report files under pytest's tmp paths.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from auditkit import tid, write_launch, write_report
from mlebenchkit import find_mlebench_python, installed_source, require_mlebench

from mle_world.audit import audit

MLEBENCH_PYTHON, WHY_NOT = find_mlebench_python()


@pytest.fixture(autouse=True)
def _real_mlebench() -> None:
    require_mlebench(MLEBENCH_PYTHON, WHY_NOT)


AGGREGATED = {  # MLE-bench's aggregate_grading_reports.py's metric: the audit's rate
    "valid_submissions_percentage": "valid_submission",
    "any_medal_percentage": "any_medal",
    "gold_medal_percentage": "gold_medal",
    "silver_medal_percentage": "silver_medal",
    "bronze_medal_percentage": "bronze_medal",
    "above_median_percentage": "above_median",
}


def test_the_audits_rates_are_mlebench_aggregate_grading_reports_numbers(tmp_path: Path) -> None:
    """Per configuration, the audit's rates (mean ± SEM over seeds of the % of tasks) are what MLE-bench's
    own experiments/aggregate_grading_reports.py gives for the same reports: medals of every kind,
    invalid submissions, above-median without a medal."""
    aggregator = (
        Path(str(installed_source(MLEBENCH_PYTHON)["file"])).parent.parent
        / "experiments"
        / "aggregate_grading_reports.py"
    )
    rng = random.Random(0)
    out, tasks, configs, seeds = tmp_path / "sweep", ["A", "B", "C", "D"], ["aide", "wm-point"], range(5)
    ids, paths = [], {cfg: [] for cfg in configs}
    for cfg in configs:
        for task in tasks:
            for seed in seeds:
                medal = rng.choice(["gold", "silver", "bronze", "none", "none", "none"])
                valid = medal != "none" or rng.random() < 0.6
                above = medal != "none" or (valid and rng.random() < 0.5)
                paths[cfg].append(
                    write_report(
                        out,
                        "gated",
                        cfg,
                        task,
                        seed,
                        score=0.5 if valid else None,
                        medal=medal,
                        above_median=above,
                    )
                )
                ids.append(tid("gated", cfg, task, seed))
    write_launch(out, "gated", ids)
    rates = {r.configuration: r.rates for r in audit([out]).rates}
    split = tmp_path / "split.txt"
    split.write_text("\n".join(tasks) + "\n")
    for cfg in configs:
        wrapped = []  # MLE-bench's run-group report: {"competition_reports": [...]}
        for path in paths[cfg]:
            wrapped.append(tmp_path / "mlebench" / cfg / path.name)
            wrapped[-1].parent.mkdir(parents=True, exist_ok=True)
            wrapped[-1].write_text(json.dumps({"competition_reports": [json.loads(path.read_text())]}))
        assert MLEBENCH_PYTHON is not None
        done = subprocess.run(
            [
                str(MLEBENCH_PYTHON),
                str(aggregator),
                "--grading-reports",
                *map(str, wrapped),
                "--split",
                str(split),
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
            check=True,
        )
        theirs = json.loads(done.stdout.split("Average metrics across seeds:", 1)[1])
        assert theirs["num_seeds_averaged"] == len(seeds)
        for metric, ours in AGGREGATED.items():
            mean, sem, n = rates[cfg][ours]
            assert n == len(seeds)
            assert mean == pytest.approx(theirs["metrics"][metric]["mean"], abs=1e-9), (cfg, metric)
            assert sem == pytest.approx(theirs["metrics"][metric]["standard_error"], abs=1e-9), (cfg, metric)
