"""Builders for synthetic sweeps on disk: launch.json, grading reports, status, events, costs.

Reads nothing; writes an output-dir layout (DESIGN §3) under the path it is given.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mle_world.grading.report import GradingReport
from mle_world.records import Prediction

TS = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
HEADER = (
    "trial_id,regime,configuration,task,seed,role,model,calls,calls_unknown_usage,prompt_tokens,"
    "completion_tokens,llm_seconds,exec_seconds,gpu_hours,pricing,cost_usd,prices_version,bad_event_lines"
)


def tid(regime: str, cfg: str, task: str, seed: int) -> str:
    return f"{regime}/{cfg}/{task}/seed{seed}"


def write_launch(out: Path, regime: str, trial_ids: list[str]) -> None:
    trials = []
    for trial_id in trial_ids:
        _, cfg, task, seed = trial_id.split("/")
        trials.append(
            {
                "trial_id": trial_id,
                "science_hash": "abc",
                "trial_dir": f"runs/{cfg}/{task}_{seed}",
                "command": "x",
            }
        )
    record = {
        "argv": ["run_paper.py"], "harness_version": "0.1.0", "git_sha": None, "created_at": TS,
        "regime": regime, "config_path": "configs/paper.yaml", "config_hash": "h", "cluster_path": None,
        "backend": "local", "runtime": "process", "dry_run": False, "sandbox": False, "data_dir": "/data",
        "endpoints": [], "trials": trials,
    }  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "launch.json").write_text(json.dumps(record))


def write_report(
    out: Path,
    regime: str,
    cfg: str,
    task: str,
    seed: int,
    *,
    score: float | None,
    medal: str = "none",
    above_median: bool = False,
    lower: bool = False,
) -> Path:
    report = GradingReport(
        competition_id=task, score=score, gold_threshold=0.9, silver_threshold=0.8, bronze_threshold=0.7,
        median_threshold=0.5, any_medal=medal != "none", gold_medal=medal == "gold",
        silver_medal=medal == "silver", bronze_medal=medal == "bronze", above_median=above_median,
        submission_exists=score is not None, valid_submission=score is not None, is_lower_better=lower,
        created_at=datetime(2026, 1, 1), submission_path="s.csv",  # noqa: DTZ001 - MLE-bench's naive time
        trial_id=tid(regime, cfg, task, seed), regime=regime, configuration=cfg, seed=seed,
    )  # fmt: skip
    path = out / "runs" / cfg / f"{task}_seed{seed}_grading_report.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.model_dump_json(indent=2))
    (out / "runs" / cfg / f"{task}_seed{seed}").mkdir(exist_ok=True)
    return path


def trial_dir(out: Path, cfg: str, task: str, seed: int) -> Path:
    path = out / "runs" / cfg / f"{task}_seed{seed}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_status(
    out: Path,
    regime: str,
    cfg: str,
    task: str,
    seed: int,
    state: str,
    cause: str | None,
    failure_class: str | None = None,
) -> None:
    status = {"trial_id": tid(regime, cfg, task, seed), "state": state, "cause": cause}
    if failure_class is not None:
        status["failure_class"] = failure_class
    (trial_dir(out, cfg, task, seed) / "status.json").write_text(json.dumps(status))


def prediction(gate: str, p_improves: float | None, improved: bool | None, **extra: Any) -> dict[str, Any]:
    """A prediction line of events.jsonl as the agent writes it; `extra` sets event or prediction fields."""
    said: dict[str, Any] = {"mode": "pointwise", "valid": True, "p_improves": p_improves}
    event: dict[str, Any] = {
        "type": "prediction", "ts": TS, "node_id": "n", "stage": "improve", "gate": gate,
        "executed": gate != "skip", "actual_improved": improved,
    }  # fmt: skip
    for key, value in extra.items():
        (said if key in Prediction.model_fields else event)[key] = value
    return {**event, "prediction": said}


def write_events(out: Path, cfg: str, task: str, seed: int, events: list[dict[str, Any] | str]) -> None:
    lines = [e if isinstance(e, str) else json.dumps(e) for e in events]
    (trial_dir(out, cfg, task, seed) / "events.jsonl").write_text("\n".join(lines) + "\n")


def write_costs(out: Path, regime: str, cfg: str, task: str, seed: int, costs: list[str]) -> None:
    """One row per given cost cell ('' = unknown)."""
    roles = ["coder", "feedback", "world", "execution"]
    rows = [HEADER]
    for role, cost in zip(roles, costs, strict=False):
        rows.append(
            f"{tid(regime, cfg, task, seed)},{regime},{cfg},{task},{seed},{role},m,1,0,100,10,1.0,,0.25,x,{cost},1@x,0"
        )
    path = out / "costs" / f"{cfg}.{task}.seed{seed}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n")


def write_journal(
    out: Path, cfg: str, task: str, seed: int, points: list[tuple[float, float]], lower: bool
) -> None:
    nodes = [
        {"id": str(i), "step": i, "ctime": 1_000_000.0 + 3600.0 * hours, "metric": metric, "executed": True,
         "is_buggy": False}
        for i, (hours, metric) in enumerate(points)
    ]  # fmt: skip
    data = {"trial_id": "x", "science_hash": "x", "lower_is_better": lower, "nodes": nodes}
    (trial_dir(out, cfg, task, seed) / "journal.json").write_text(json.dumps(data))
