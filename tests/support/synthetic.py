"""A synthetic two-regime sweep for audit benchmarks and golden tests: launch.json, reports, costs, events.

Reads nothing; writes the output dirs under the root given (deterministic for a given seed).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

CONFIGS = ("aide", "wm-point", "wm-strict", "wm-rank4", "wm-pairwise4", "wm-all-stages", "wm-blind")
TASKS = tuple(f"task-{i:02d}" for i in range(17))
COST_HEADER = (
    "trial_id,regime,configuration,task,seed,role,model,calls,calls_unknown_usage,prompt_tokens,"
    "completion_tokens,llm_seconds,exec_seconds,gpu_hours,pricing,cost_usd,prices_version,bad_event_lines"
)


def make_sweep(root: Path, n_reports: int, events: bool, seed: int = 0) -> list[Path]:
    """Two output dirs (gated, ungated) holding about `n_reports` reports in total."""
    rng = random.Random(seed)
    n_seeds = math.ceil(n_reports / (2 * len(CONFIGS) * len(TASKS)))
    dirs = []
    written = 0
    for regime in ("gated", "ungated"):
        out = root / f"paper-{regime}"
        trials = []
        for cfg in CONFIGS:
            (out / "runs" / cfg).mkdir(parents=True, exist_ok=True)
            for task in TASKS:
                for s in range(n_seeds):
                    if written >= n_reports:
                        break
                    written += 1
                    trial_id = f"{regime}/{cfg}/{task}/seed{s}"
                    trials.append({"trial_id": trial_id, "science_hash": "h",
                                   "trial_dir": f"runs/{cfg}/{task}_seed{s}", "command": "x"})  # fmt: skip
                    score = rng.random()
                    medal = rng.choice(["gold", "silver", "bronze", "none", "none", "none"])
                    report = {
                        "competition_id": task, "score": score, "gold_threshold": 0.9, "silver_threshold": 0.8,
                        "bronze_threshold": 0.7, "median_threshold": 0.5, "any_medal": medal != "none",
                        "gold_medal": medal == "gold", "silver_medal": medal == "silver",
                        "bronze_medal": medal == "bronze", "above_median": score > 0.5,
                        "submission_exists": True, "valid_submission": True, "is_lower_better": False,
                        "created_at": "2026-01-01T00:00:00", "submission_path": "s.csv",
                        "trial_id": trial_id, "regime": regime, "configuration": cfg, "seed": s,
                    }  # fmt: skip
                    base = out / "runs" / cfg / f"{task}_seed{s}"
                    Path(f"{base}_grading_report.json").write_text(json.dumps(report))
                    cost = out / "costs" / f"{cfg}.{task}.seed{s}.csv"
                    cost.parent.mkdir(exist_ok=True)
                    rows = [COST_HEADER] + [
                        f"{trial_id},{regime},{cfg},{task},{s},{role},m,3,0,1000,100,5.0,,0.1,x,0.25,1@x,0"
                        for role in ("coder", "feedback", "world", "execution")
                    ]
                    cost.write_text("\n".join(rows) + "\n")
                    if events and cfg != "aide":
                        base.mkdir(exist_ok=True)
                        lines = []
                        for _ in range(5):
                            p = rng.random()
                            gate = "not_gated" if regime == "ungated" else rng.choice(["execute", "skip"])
                            lines.append(json.dumps({
                                "type": "prediction", "ts": "2026-01-01T00:00:00Z", "node_id": "n",
                                "stage": "improve", "gate": gate, "executed": gate != "skip",
                                "prediction": {"mode": "pointwise", "valid": True, "p_improves": p},
                                "actual_improved": rng.random() < p if gate != "skip" else None,
                            }))  # fmt: skip
                        (base / "events.jsonl").write_text("\n".join(lines) + "\n")
        record = {
            "argv": ["run_paper.py"], "harness_version": "0", "git_sha": None,
            "created_at": "2026-01-01T00:00:00Z", "regime": regime, "config_path": "c", "config_hash": "h",
            "cluster_path": None, "backend": "local", "runtime": "process", "dry_run": False, "sandbox": False,
            "data_dir": "/d", "endpoints": [], "trials": trials,
        }  # fmt: skip
        (out / "launch.json").write_text(json.dumps(record))
        dirs.append(out)
    return dirs


def add_irregularities(dirs: list[Path], seed: int = 0) -> None:
    """Journals, statuses, a missing, a corrupt and an unexpected report: the audit's other paths."""
    rng = random.Random(seed)
    for out in dirs:
        record = json.loads((out / "launch.json").read_text())
        for i, trial in enumerate(record["trials"][:24]):
            trial_dir = out / trial["trial_dir"]
            trial_dir.mkdir(parents=True, exist_ok=True)
            nodes = []
            for step in range(6):
                buggy = rng.random() < 0.3
                nodes.append({
                    "id": f"n{step}", "step": step, "stage": "draft" if step == 0 else "improve",
                    "ctime": 1_700_000_000 + 1800 * step + 60 * i, "executed": step != 3, "is_buggy": buggy,
                    "metric": None if buggy else round(rng.random(), 4),
                })  # fmt: skip
            (trial_dir / "journal.json").write_text(
                json.dumps(
                    {
                        "trial_id": trial["trial_id"],
                        "science_hash": "h",
                        "lower_is_better": i % 5 == 0,
                        "nodes": nodes,
                    }
                )  # fmt: skip
            )
            state = ("succeeded", "failed", "running")[i % 3]
            (trial_dir / "status.json").write_text(json.dumps({"trial_id": trial["trial_id"], "state": state,
                                                               "cause": "boom" if state == "failed" else None}))  # fmt: skip
        runs = out / "runs"
        reports = sorted(runs.glob("*/*_grading_report.json"))
        reports[1].unlink()
        reports[2].write_text("{not json")
        (runs / "aide" / "stray_seed9_grading_report.json").write_text(reports[3].read_text())
