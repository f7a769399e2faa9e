"""Benchmark: audit time for a synthetic sweep of N grading reports (default 10,000).

Writes a synthetic two-regime output layout (launch.json, reports, cost CSVs, events) under a temp
dir (or --keep DIR) and prints how long `audit` (collect + tables) and `run_audit` (+ files) take.

Usage: python benchmarks/audit.py [--reports 10000] [--no-events] [--keep DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import random
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console

from mle_world.audit import audit, run_audit

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
                                "stage": "improve", "mode": "pointwise", "valid": True, "p_improves": p,
                                "gate": gate, "executed": gate != "skip",
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


def main() -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--no-events", action="store_true")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="audit-bench-"))
    try:
        t0 = time.perf_counter()
        dirs = make_sweep(root, args.reports, events=not args.no_events)
        t1 = time.perf_counter()
        result = audit(dirs)
        t2 = time.perf_counter()
        code = run_audit(dirs, console=Console(file=io.StringIO()), out_dir=root / "audit")
        t3 = time.perf_counter()
        print(f"synthetic sweep: {len(result.sweep.trials)} trials, {len(result.sweep.found)} reports "
              f"(generated in {t1 - t0:.1f} s)")  # fmt: skip
        print(f"audit (collect + tables): {t2 - t1:.2f} s")
        print(f"run_audit (+ summary.csv, report.md, plots): {t3 - t2:.2f} s, exit code {code}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
