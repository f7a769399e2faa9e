"""An irregular two-regime sweep for cross-checking the audit: every fate a trial can have on disk.

Reads nothing; writes launch.json, grading reports (medals by MLE-bench's rules, both directions, ties at
the thresholds), statuses, submissions, result.json, cost CSVs (priced, partly unknown, no events.jsonl,
absent) and events.jsonl (gated and ungated labels, counterfactual decisions, bad lines) under a root.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

CONFIGS = ("aide", "wm-point", "wm-rank4")
TASKS = ("t0", "t1", "t2", "t3", "t4")
SEEDS = (34, 35, 36)
LOWER = {task: i % 2 == 1 for i, task in enumerate(TASKS)}
THRESHOLDS = {"gold": 0.9, "silver": 0.8, "bronze": 0.7, "median": 0.5}
COST_HEADER = (
    "trial_id,regime,configuration,task,seed,role,model,calls,calls_unknown_usage,prompt_tokens,"
    "completion_tokens,llm_seconds,exec_seconds,gpu_hours,pricing,cost_usd,prices_version,bad_event_lines"
)
FATES = {
    "graded": 70,  # a report with a score, a submission on disk
    "invalid_submission": 8,  # a report with no score
    "failed_without_submission": 6,  # settled: no report, nothing to grade
    "failed_and_graded": 5,
    "running": 4,  # missing
    "corrupt_report": 3,  # invalid
    "failed_not_graded": 2,  # a submission nobody graded: missing
}


def report(trial_id: str, task: str, score: float | None, state: str) -> dict[str, Any]:
    """A grading report with MLE-bench's medal rules (inclusive, exclusive between medals, strict median)."""
    regime, cfg, _, seed = trial_id.split("/")
    lower = LOWER[task]
    th = {k: 1 - v if lower else v for k, v in THRESHOLDS.items()}
    gold = silver = bronze = above = False
    if score is not None:
        reach = (lambda t: score <= t) if lower else (lambda t: score >= t)
        gold = reach(th["gold"])
        silver = not gold and reach(th["silver"])
        bronze = not gold and not silver and reach(th["bronze"])
        above = score < th["median"] if lower else score > th["median"]
    return {
        "competition_id": task, "score": score, "gold_threshold": th["gold"], "silver_threshold": th["silver"],
        "bronze_threshold": th["bronze"], "median_threshold": th["median"], "any_medal": gold or silver or bronze,
        "gold_medal": gold, "silver_medal": silver, "bronze_medal": bronze, "above_median": above,
        "submission_exists": True, "valid_submission": score is not None, "is_lower_better": lower,
        "created_at": "2026-01-01T00:00:00", "submission_path": "s.csv", "trial_id": trial_id,
        "regime": regime, "configuration": cfg, "seed": int(seed[4:]), "trial_state": state,
    }  # fmt: skip


def _score(rng: random.Random, task: str) -> float:
    if rng.random() < 0.4:  # exactly on a threshold
        value = rng.choice([0.9, 0.8, 0.7, 0.5])
        return round(1 - value, 5) if LOWER[task] else value
    return round(rng.random(), 5)


def _cost_rows(rng: random.Random, trial_id: str, fate: str) -> list[str]:
    prefix = f"{trial_id},{','.join(trial_id.split('/')[:3])},{trial_id.split('/')[3][4:]}"
    rows = [COST_HEADER]
    for role in ("coder", "feedback", "world", "execution"):
        if fate == "no_events":
            rows.append(f"{prefix},{role},,,,,,,,,unknown: no events.jsonl,,1@x,0")
            continue
        cost = "" if fate == "partly_unknown" and role == "world" else str(round(rng.random(), 6))
        if role == "execution":
            rows.append(f"{prefix},{role},,0,0,,,,12.0,{round(rng.random(), 6)},gpu-hour,{cost},1@x,0")
        elif fate == "no_usage" and role == "world":
            rows.append(f"{prefix},{role},m,3,3,,,5.0,,,per-token,,1@x,0")
        else:
            tokens = f"{rng.randint(0, 5000)},{rng.randint(0, 500)}"
            rows.append(f"{prefix},{role},m,3,0,{tokens},5.0,,,per-token,{cost},1@x,0")
    return rows


def _events(rng: random.Random, regime: str, k: int) -> list[str]:
    lines = []
    for step in range(rng.randint(0, 6)):
        best, ran, vetoed = rng.randrange(k), rng.randrange(k), rng.random() < 0.4
        for c in range(k):
            said: dict[str, Any] = {"mode": "pointwise", "valid": rng.random() < 0.9}
            if said["valid"]:
                said["p_improves"] = round(rng.random(), 3)
                if rng.random() < 0.8:
                    said["p_bug"] = round(rng.random(), 3)
            if regime == "gated":
                gate = (
                    ("skip" if vetoed else rng.choice(["execute"] * 9 + ["forced"]))
                    if c == best
                    else "not_selected"
                )
            else:
                gate = "not_gated" if c == ran else "not_selected"
                said["counterfactual_gate"] = (
                    ("skip" if vetoed else "execute") if c == best else "not_selected"
                )
            event: dict[str, Any] = {
                "type": "prediction", "ts": "2026-01-01T00:00:00Z", "node_id": f"n{step}.{c}",
                "stage": rng.choice(["draft", "improve", "debug"]), "step": step, "candidate": c,
                "prediction": said, "gate": gate, "executed": gate in ("execute", "forced", "not_gated"),
            }  # fmt: skip
            if event["executed"]:
                event["actual_buggy"] = rng.random() < 0.3
                event["actual_improved"] = not event["actual_buggy"] and rng.random() < 0.5
            lines.append(json.dumps(event))
    if rng.random() < 0.1:
        lines.append("{garbage")
    return lines


def make_irregular_sweep(root: Path, seed: int) -> list[Path]:
    """Two output dirs (gated, ungated) of 45 expected trials each, a few listed twice."""
    rng = random.Random(seed)
    dirs = []
    for regime in ("gated", "ungated"):
        out = root / f"paper-{regime}"
        (out / "costs").mkdir(parents=True)
        listed = []
        for cfg in CONFIGS:
            for task in TASKS:
                for s in SEEDS:
                    trial_id = f"{regime}/{cfg}/{task}/seed{s}"
                    entry = {"trial_id": trial_id, "science_hash": "h", "trial_dir": f"runs/{cfg}/{task}_seed{s}",
                             "command": "x"}  # fmt: skip
                    listed += [entry, entry] if rng.random() < 0.03 else [entry]
                    trial = out / "runs" / cfg / f"{task}_seed{s}"
                    trial.mkdir(parents=True)
                    graded = out / "runs" / cfg / f"{task}_seed{s}_grading_report.json"
                    fate = rng.choices(list(FATES), list(FATES.values()))[0]
                    state = {"running": "running"}.get(
                        fate, "failed" if fate.startswith("failed") else "succeeded"
                    )
                    if fate in ("graded", "failed_and_graded", "failed_not_graded"):
                        (trial / "submission").mkdir()
                        (trial / "submission" / "submission.csv").write_text("id\n")
                    if fate in ("graded", "failed_and_graded", "invalid_submission"):
                        score = None if fate == "invalid_submission" else _score(rng, task)
                        graded.write_text(json.dumps(report(trial_id, task, score, state)))
                    elif fate == "corrupt_report":
                        graded.write_text("{not json")
                    status = {
                        "trial_id": trial_id,
                        "state": state,
                        "cause": "boom" if state == "failed" else None,
                        # both classes, without a draw from rng (the sweeps stay as they were)
                        "failure_class": ("infra" if s % 2 else "agent") if state == "failed" else None,
                    }
                    (trial / "status.json").write_text(json.dumps(status))
                    if state != "running" and rng.random() < 0.9:
                        completed = state == "succeeded"
                        result = {
                            "trial_id": trial_id, "status": "completed" if completed else "failed",
                            "stop_reason": rng.choice(["max_steps", "time_limit"]) if completed else "error: x",
                            "steps": rng.randint(1, 30), "executed": rng.randint(1, 30),
                            "consulted_steps": rng.randint(0, 10), "vetoed_steps": rng.randint(0, 3),
                            "not_selected": rng.randint(0, 9),
                            "direction_source": rng.choice(["task", "reviews", None]),
                            "direction_disagreements": rng.randint(0, 2), "metric_mismatches": rng.randint(0, 2),
                            "context_overflows": rng.randint(0, 1),
                        }  # fmt: skip
                        (trial / "result.json").write_text(json.dumps(result))
                    costs = rng.choices(
                        ["priced", "partly_unknown", "no_usage", "no_events", "none"], [70, 10, 5, 8, 7]
                    )[0]
                    if costs != "none":
                        text = "\n".join(_cost_rows(rng, trial_id, costs)) + "\n"
                        (out / "costs" / f"{cfg}.{task}.seed{s}.csv").write_text(text)
                    if cfg != "aide" and state != "running":
                        lines = _events(rng, regime, 4 if cfg == "wm-rank4" else 1)
                        (trial / "events.jsonl").write_text("".join(line + "\n" for line in lines))
        record = {
            "argv": ["run_paper.py"], "harness_version": "0", "git_sha": None, "created_at": "2026-01-01T00:00:00Z",
            "regime": regime, "config_path": "c", "config_hash": "h", "cluster_path": None, "backend": "local",
            "runtime": "process", "dry_run": False, "sandbox": False, "data_dir": "/d", "endpoints": [],
            "trials": listed,
        }  # fmt: skip
        (out / "launch.json").write_text(json.dumps(record))
        dirs.append(out)
    return dirs
