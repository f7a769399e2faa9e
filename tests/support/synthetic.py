"""A synthetic two-regime sweep for audit benchmarks and golden tests: launch.json, reports, costs, events.

Reads nothing; writes the output dirs under the root given (deterministic for a given seed).
"""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mle_world.audit.digest import write_trial_digest
from mle_world.audit.digest_files import gather_digests

CONFIGS = ("aide", "wm-point", "wm-strict", "wm-rank4", "wm-pairwise4", "wm-all-stages", "wm-blind")
TASKS = tuple(f"task-{i:02d}" for i in range(17))
STEP = (
    {"type": "llm_call", "role": "coder", "model": "m", "purpose": "improve", "prompt_tokens": 3000,
     "completion_tokens": 600, "latency_s": 4.2, "outcome": "ok"},
    {"type": "llm_call", "role": "feedback", "model": "m", "purpose": "review", "prompt_tokens": 2000,
     "completion_tokens": 150, "latency_s": 1.3, "outcome": "ok"},
    {"type": "execution", "node_id": "n", "kind": "full", "exec_time_s": 93.5, "timeout_s": 3600.0,
     "timed_out": False, "exit_code": 0},
)  # fmt: skip
"""One agent step's lines besides a prediction (the shapes of `trial_events`' records)."""


def step_lines(i: int) -> str:
    """Agent step `i`'s lines of events.jsonl, each with its own timestamp."""
    ts = f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
    return "".join(json.dumps({**line, "ts": f"{ts}.{n}Z"}) + "\n" for n, line in enumerate(STEP))


COST_HEADER = (
    "trial_id,regime,configuration,task,seed,role,model,calls,calls_unknown_usage,prompt_tokens,"
    "completion_tokens,llm_seconds,exec_seconds,gpu_hours,pricing,cost_usd,prices_version,bad_event_lines"
)


def make_sweep(
    root: Path,
    n_reports: int,
    events: bool,
    seed: int = 0,
    regimes: tuple[str, ...] = ("gated", "ungated"),
    digests: bool = True,
    steps: int = 0,
    gathered: bool = True,
    journal_nodes: int = 0,
) -> list[Path]:
    """An output dir per regime (gated, ungated) holding about `n_reports` reports in total; with
    `digests`, each trial has the audit digest the harness writes when a trial ends (beside its dir), and with
    `gathered` too, each configuration the digests gathered when the launch ended; with `steps`,
    each events.jsonl begins with that many agent steps (`STEP`'s lines, a timestamp each), as a real
    trial's hundreds of lines do, before its 5 predictions; with `journal_nodes`, each trial dir also holds
    what a real trial leaves: status.json, result.json and a journal of that many nodes (`agent_records`)."""
    head = "".join(step_lines(i) for i in range(steps))
    rng = random.Random(seed)
    n_seeds = math.ceil(n_reports / (len(regimes) * len(CONFIGS) * len(TASKS)))
    dirs = []
    written = 0
    for regime in regimes:
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
                        (base / "events.jsonl").write_text(head + "\n".join(lines) + "\n")
                    if journal_nodes:
                        agent_records(base, trial_id, journal_nodes, rng)
                    if digests:
                        write_trial_digest(base, cost)
        record = {
            "argv": ["run_paper.py"], "harness_version": "0", "git_sha": None,
            "created_at": "2026-01-01T00:00:00Z", "regime": regime, "config_path": "c", "config_hash": "h",
            "cluster_path": None, "backend": "local", "runtime": "process", "dry_run": False, "sandbox": False,
            "data_dir": "/d", "endpoints": [], "trials": trials,
        }  # fmt: skip
        (out / "launch.json").write_text(json.dumps(record))
        if digests and gathered:
            gather_digests(out)  # as the launch that ran them does when it ends
        dirs.append(out)
    return dirs


def solution(node: int) -> str:
    """The script of an improve chain's `node`-th node: its parent's with a line changed (80 lines, 5 KB)."""
    lines = [
        f"feature_{k} = frame['col_{k}'].fillna({k % 7}) * {k}  # a step of the pipeline" for k in range(80)
    ]
    for j in range(node):
        lines[(j * 13) % 80] = f"feature_{j} = model_{j}.predict(frame[columns]) + {j}  # changed at node {j}"
    return "import pandas as pd\n" + "\n".join(lines) + "\n"


def agent_records(trial_dir: Path, trial_id: str, nodes: int, rng: random.Random) -> None:
    """status.json, result.json and journal.json as a trial that ran `nodes` steps leaves them: a draft, then
    a chain of improvements, each node with its script, plan, output and review (about 8 KB a node)."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    (trial_dir / "status.json").write_text(json.dumps({
        "trial_id": trial_id, "state": "succeeded", "attempt": 1, "backend": "slurm",
        "started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T10:00:00Z",
        "updated_at": "2026-01-01T10:00:00Z",
    }))  # fmt: skip
    (trial_dir / "result.json").write_text(json.dumps({
        "trial_id": trial_id, "status": "completed", "stop_reason": "time_limit", "best_metric": 0.8,
        "steps": nodes, "nodes": nodes, "executed": nodes,
    }))  # fmt: skip
    journal = [
        {"id": f"n{i}", "step": i, "stage": "draft" if i == 0 else "improve",
         "parent_id": None if i == 0 else f"n{i - 1}", "plan": "Plan: do the next thing well. " * 30,
         "code": solution(i), "ctime": 1.7e9 + 600 * i, "term_out": "epoch 1 loss 0.5\n" * 60,
         "exec_time": 90.0, "exit_code": 0, "analysis": "It ran; the metric moved. " * 20,
         "metric": rng.random(), "executed": True, "is_buggy": False}
        for i in range(nodes)
    ]  # fmt: skip
    (trial_dir / "journal.json").write_text(
        json.dumps({"trial_id": trial_id, "science_hash": "h", "nodes": journal})
    )


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


INFRA_CAUSES = (
    "slurm job {array}_{index} CANCELLED without a result",
    "slurm job {array}_{index} NODE_FAIL without a result",
    "killed by SIGKILL",
    "wall limit 43200+900 s exceeded",
    "exit 1 without result.json: ModuleNotFoundError: No module named 'torch' (pid {index})",
    "agent failed: endpoint_unavailable: coder http://gpu{index}:8000/v1 unreachable for 900 s",
)
AGENT_CAUSES = (
    "agent failed: error: ValueError: could not convert string to float: 'x{index}'",
    "agent failed: error: \x1b]52;c;aGk=\x07RuntimeError: CUDA error in step {index}",
)


def add_statuses(out: Path, seed: int = 0, running: int = 64, array: int = 4_000_000) -> dict[str, int]:
    """status.json for every trial of an output dir's launch.json, as a Slurm sweep days in: most
    succeeded, some failed (infra and agent, varied causes, a hostile one), `running` running, the
    rest submitted or pending; failed trials get a logs/launcher.log; launch.json gets a real argv.
    Times are relative to now. Slurm job ids start at `array` (none the local cluster knows). Returns
    the counts by state."""
    rng = random.Random(seed)
    record = json.loads((out / "launch.json").read_text())
    record["argv"] = ["--regime", record["regime"], "--backend", "slurm", "--grade", "--output-dir", str(out)]
    (out / "launch.json").write_text(json.dumps(record))
    now = datetime.now(UTC)
    counts: dict[str, int] = {}
    for i, trial in enumerate(record["trials"]):
        slot = i % 100
        state = "succeeded" if slot < 60 else "failed" if slot < 66 else "submitted"
        if state == "submitted" and counts.get("running", 0) < running:
            state = "running"
        elif state == "submitted" and slot >= 98:
            state = "pending"
        counts[state] = counts.get(state, 0) + 1
        status: dict[str, object] = {"trial_id": trial["trial_id"], "state": state, "backend": "slurm"}
        if state != "pending":
            status.update(attempt=1, token="s1", slurm_job_id=f"{array + i // 1000}_{i % 1000}",
                          slurm_array_id=str(array + i // 1000),
                          submitted_at=(now - timedelta(days=3)).isoformat())  # fmt: skip
        if state in ("succeeded", "failed", "running"):
            started = now - timedelta(seconds=rng.uniform(60, 43_200))
            status.update(host=f"gpu{i % 16:02d}", gpu=str(i % 4), started_at=started.isoformat())
        if state in ("succeeded", "failed"):
            status.update(ended_at=now.isoformat(), wall_used_s=round(rng.uniform(3_600, 43_200), 1),
                          exit_code=0 if state == "succeeded" else 1)  # fmt: skip
        if state == "failed":
            infra = slot < 64
            causes = INFRA_CAUSES if infra else AGENT_CAUSES
            cause = causes[i % len(causes)].format(array=array + i // 1000, index=i % 1000)
            status.update(failure_class="infra" if infra else "agent", cause=cause)
            logs = out / trial["trial_dir"] / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            lines = [f"step {n}: executing node n{n}" for n in range(40)] + [cause]
            (logs / "launcher.log").write_text("\n".join(lines) + "\n")
        path = out / trial["trial_dir"] / "status.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(status))
    return counts
