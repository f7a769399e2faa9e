"""The audit's summary.csv against a second, deliberately plain computation from the raw files.

Reads nothing of the repository; writes irregular sweeps (tests/support/irregular.py) under tmp_path.
The oracle below reads launch.json, reports, status.json, submissions, result.json, cost CSVs and
events.jsonl with json/csv only and applies docs/numbers.md's rules in the most obvious way; any number
of summary.csv's rates, paired_delta, significance (but its bootstrap intervals), costs, budget and world
sections that it computes must agree.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from irregular import make_irregular_sweep
from rich.console import Console

from mle_world.audit import run_audit
from mle_world.cli.display import RichDisplay

Key = tuple[str, str, str, str]
Value = tuple[Any, Any, Any]
MEDALS = ("gold_medal", "silver_medal", "bronze_medal")
RATES = ("valid_submission", "any_medal", *MEDALS, "above_median")
NO_RESULT = dict.fromkeys(("valid_submission", "above_median", *MEDALS), False) | {"score": None}


def mean_sem(values: list[float]) -> Value:
    if not values:
        return None, None, 0
    sem = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return sum(values) / len(values), sem, len(values)


def indicator(report: dict[str, Any], metric: str) -> bool:
    """MLE-bench's aggregator: any medal is gold or silver or bronze."""
    return any(report[m] for m in MEDALS) if metric == "any_medal" else bool(report[metric])


def read_trials(dirs: list[Path]) -> dict[str, dict[str, Any]]:
    trials: dict[str, dict[str, Any]] = {}
    for out in dirs:
        for listed in json.loads((out / "launch.json").read_text())["trials"]:
            regime, cfg, task, seed = listed["trial_id"].split("/")
            directory = out / listed["trial_dir"]
            report = None
            try:
                data = json.loads((directory.parent / f"{directory.name}_grading_report.json").read_text())
                report = data if data["trial_id"] == listed["trial_id"] else None
            except (OSError, ValueError):
                pass
            status = json.loads((directory / "status.json").read_text())
            state, infra = status["state"], status.get("failure_class") == "infra"
            left = (directory / "submission" / "submission.csv").is_file()
            result = directory / "result.json"
            trials.setdefault(listed["trial_id"], {
                "regime": regime, "cfg": cfg, "task": task, "seed": int(seed[4:]), "dir": directory,
                "out": out, "report": report, "settled": report is None and state == "failed" and not infra and not left,
                "result": json.loads(result.read_text()) if result.exists() else None,
            })  # fmt: skip
    return trials


def oracle(dirs: list[Path], pad: bool) -> dict[Key, Value]:
    trials = read_trials(dirs)
    out: dict[Key, Value] = {}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for trial in trials.values():
        groups[(trial["regime"], trial["cfg"])].append(trial)
    for (regime, cfg), group in sorted(groups.items()):
        tasks = {t["task"] for t in group}
        done = {(t["seed"], t["task"]): t for t in group if t["report"] is not None or t["settled"]}
        used = [
            s
            for s in sorted({t["seed"] for t in group})
            if all((s, k) in done for k in tasks) or (pad and any((s, k) in done for k in tasks))
        ]
        out[("rates", regime, cfg, "seeds_used")] = (len(used), None, None)
        for metric in RATES:
            per_seed = []
            for s in used:
                hits = [done[(s, k)]["report"] for k in tasks if (s, k) in done and done[(s, k)]["report"]]
                per_seed.append(100 * sum(indicator(r, metric) for r in hits) / len(tasks))
            out[("rates", regime, cfg, metric)] = mean_sem(per_seed)
        add_costs(out, regime, cfg, group)
        add_budget(out, regime, cfg, [t["result"] for t in group if t["result"] is not None])
        add_world(out, regime, cfg, group)
    add_deltas(out, trials)
    add_significance(out, trials)
    return out


def two_sided_binomial(k: int, n: int) -> float:
    """P(an outcome no likelier than k) under Binomial(n, 1/2), summed outcome by outcome."""
    pmf = [math.comb(n, i) / 2**n for i in range(n + 1)]
    return min(1.0, sum(q for q in pmf if q <= pmf[k] * (1 + 1e-9)))


def add_significance(out: dict[Key, Value], trials: dict[str, dict[str, Any]]) -> None:
    """Sign tests and Holm per family: each regime's configurations against aide; gated against ungated."""
    settled = {
        i: t["report"] or NO_RESULT for i, t in trials.items() if t["report"] is not None or t["settled"]
    }
    tests: dict[tuple[str, str], list[tuple[bool, bool]]] = defaultdict(list)
    for trial_id, report in settled.items():
        regime, cfg, task, seed = trial_id.split("/")
        if cfg != "aide" and f"{regime}/aide/{task}/{seed}" in settled:
            tests[(regime, cfg)].append((report, settled[f"{regime}/aide/{task}/{seed}"]))
        if regime == "gated" and f"ungated/{cfg}/{task}/{seed}" in settled:
            tests[("gated-ungated", cfg)].append((report, settled[f"ungated/{cfg}/{task}/{seed}"]))
    p_values = {}
    for (regime, cfg), pairs in tests.items():
        medals = [(indicator(a, "any_medal"), indicator(b, "any_medal")) for a, b in pairs]
        better, worse = sum(a and not b for a, b in medals), sum(b and not a for a, b in medals)
        p_values[(regime, cfg)] = two_sided_binomial(better, better + worse) if better + worse else 1.0
        out[("significance", regime, cfg, "any_medal_delta")] = mean_sem([100.0 * (a - b) for a, b in medals])
        out[("significance", regime, cfg, "discordant_better")] = (better, None, len(pairs))
        out[("significance", regime, cfg, "discordant_worse")] = (worse, None, len(pairs))
        out[("significance", regime, cfg, "sign_test_p")] = (p_values[(regime, cfg)], None, better + worse)
    families: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for regime, cfg in p_values:
        if cfg != "aide":
            families[regime].append((regime, cfg))
    for members in families.values():
        ranked = sorted(members, key=lambda key: p_values[key])
        for i, key in enumerate(ranked):
            adjusted = max(min(1.0, (len(ranked) - j) * p_values[ranked[j]]) for j in range(i + 1))
            out[("significance", *key, "sign_test_p_holm")] = (adjusted, None, len(ranked))


def add_deltas(out: dict[Key, Value], trials: dict[str, dict[str, Any]]) -> None:
    pairs: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for trial_id, gated in trials.items():
        ungated = trials.get(trial_id.replace("gated/", "ungated/", 1))
        if gated["regime"] == "gated" and ungated is not None:
            if all(t["report"] is not None or t["settled"] for t in (gated, ungated)):
                pairs[gated["cfg"]].append((gated["report"] or NO_RESULT, ungated["report"] or NO_RESULT))
    for cfg, pair_list in pairs.items():
        for metric in ("any_medal", "above_median", "valid_submission"):
            diffs = [100.0 * (indicator(g, metric) - indicator(u, metric)) for g, u in pair_list]
            out[("paired_delta", "gated-ungated", cfg, metric)] = mean_sem(diffs)
        wins = []
        for g, u in pair_list:
            lower = (g if g["score"] is not None else u).get("is_lower_better", False)
            if g["score"] == u["score"]:
                wins.append(0)
            elif g["score"] is None or u["score"] is None:
                wins.append(1 if u["score"] is None else -1)
            else:
                wins.append(1 if (g["score"] < u["score"]) == lower else -1)
        for name, sign in (("better", 1), ("worse", -1), ("ties", 0)):
            metric = "score_ties" if sign == 0 else f"score_gated_{name}"
            out[("paired_delta", "gated-ungated", cfg, metric)] = (wins.count(sign), None, len(pair_list))


def add_costs(out: dict[Key, Value], regime: str, cfg: str, group: list[dict[str, Any]]) -> None:
    priced, medals, tokens, gpu = [], 0, [], []
    for trial in group:
        path = trial["out"] / "costs" / f"{cfg}.{trial['task']}.seed{trial['seed']}.csv"
        if not path.exists():
            continue
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
        if all(r["cost_usd"] for r in rows):
            priced.append(sum(float(r["cost_usd"]) for r in rows))
            medals += bool(trial["report"] and indicator(trial["report"], "any_medal"))
        if all(r["prompt_tokens"] and r["completion_tokens"] for r in rows if r["role"] != "execution"):
            tokens.append(sum(int(r["prompt_tokens"] or 0) + int(r["completion_tokens"] or 0) for r in rows))
        if all(r["gpu_hours"] for r in rows if r["role"] == "execution"):
            gpu.append(sum(float(r["gpu_hours"] or 0) for r in rows))
    total = sum(priced) if priced else None
    out[("costs", regime, cfg, "cost_per_trial_usd")] = mean_sem(priced)
    out[("costs", regime, cfg, "total_cost_usd")] = (total, None, len(priced))
    per_medal = total / medals if total is not None and medals else None
    out[("costs", regime, cfg, "cost_per_medal_usd")] = (per_medal, None, medals)
    out[("costs", regime, cfg, "tokens_per_trial")] = (
        sum(tokens) / len(tokens) if tokens else None,
        None,
        len(tokens),
    )
    out[("costs", regime, cfg, "gpu_hours_per_trial")] = (
        sum(gpu) / len(gpu) if gpu else None,
        None,
        len(gpu),
    )


def add_budget(out: dict[Key, Value], regime: str, cfg: str, results: list[dict[str, Any]]) -> None:
    n = len(results)
    stops = [r["stop_reason"] if r["status"] == "completed" else "failed" for r in results]
    for stop in ("max_steps", "time_limit", "failed"):
        out[("budget", regime, cfg, f"stopped_{stop}")] = (stops.count(stop), None, n)
    out[("budget", regime, cfg, "executed_per_trial")] = mean_sem([float(r["executed"]) for r in results])
    out[("budget", regime, cfg, "steps_per_trial")] = mean_sem([float(r["steps"]) for r in results])
    for name in (
        "consulted_steps",
        "vetoed_steps",
        "not_selected",
        "direction_disagreements",
        "context_overflows",
    ):
        out[("budget", regime, cfg, name)] = (sum(r[name] for r in results), None, n)
    out[("budget", regime, cfg, "direction_from_task")] = (
        sum(r["direction_source"] == "task" for r in results),
        None,
        n,
    )


def add_world(out: dict[Key, Value], regime: str, cfg: str, group: list[dict[str, Any]]) -> None:
    events = []
    for trial in group:
        path = trial["dir"] / "events.jsonl"
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    if not events:
        return
    steps = [e for e in events if e["gate"] != "not_selected"]
    vetoed = sum(e["gate"] == "skip" for e in steps)
    out[("world", regime, cfg, "skip_rate")] = (
        vetoed / len(steps) if regime == "gated" and steps else None,
        None,
        len(steps),
    )
    out[("world", regime, cfg, "executions_saved")] = (vetoed, None, len(steps))
    would = sum(e["prediction"].get("counterfactual_gate") == "skip" for e in events)
    out[("world", regime, cfg, "would_skip")] = (would, None, len(steps))
    ran = [e for e in events if e["executed"] and e["prediction"].get("counterfactual_gate")]
    ran = [e for e in ran if e["actual_improved"] is not None]
    flagged = [e for e in ran if e["prediction"]["counterfactual_gate"] != "execute"]
    worse = [e for e in ran if not e["actual_improved"]]
    precision = sum(not e["actual_improved"] for e in flagged) / len(flagged) if flagged else None
    recall = sum(e in flagged for e in worse) / len(worse) if worse else None
    out[("world", regime, cfg, "gate_precision")] = (precision, None, len(flagged))
    out[("world", regime, cfg, "gate_recall")] = (recall, None, len(worse))
    calibrated = [e for e in events if regime == "ungated" and e["prediction"]["valid"] and e["executed"]]
    pairs = [
        (e["prediction"]["p_improves"], e["actual_improved"])
        for e in calibrated
        if "p_improves" in e["prediction"]
    ]
    bugs = [(e["prediction"]["p_bug"], e["actual_buggy"]) for e in calibrated if "p_bug" in e["prediction"]]
    accuracy = sum((p >= 0.5) == y for p, y in pairs) / len(pairs) if pairs else None
    out[("world", regime, cfg, "accuracy")] = (accuracy, None, len(pairs))
    out[("world", regime, cfg, "brier")] = (brier(pairs), None, len(pairs))
    out[("world", regime, cfg, "bug_brier")] = (brier(bugs), None, len(bugs))


def brier(pairs: list[tuple[float, bool]]) -> float | None:
    return sum((p - y) ** 2 for p, y in pairs) / len(pairs) if pairs else None


def same(mine: Any, cell: str) -> bool:
    if mine is None:
        return cell == ""
    return cell != "" and math.isclose(float(mine), float(cell), rel_tol=1e-6, abs_tol=1e-6)


@pytest.mark.parametrize("pad", [False, True], ids=["complete-seeds", "pad-missing"])
@pytest.mark.parametrize("sweep_seed", [1, 2])
def test_summary_csv_agrees_with_a_plain_recomputation(tmp_path: Path, sweep_seed: int, pad: bool) -> None:
    dirs = make_irregular_sweep(tmp_path, sweep_seed)
    display = RichDisplay(Console(file=io.StringIO()))
    run_audit(
        dirs, pad_missing=pad, display=display, out_dir=tmp_path / "audit", plots=False, trial_pages=False
    )
    with open(tmp_path / "audit" / "summary.csv", newline="") as handle:
        theirs = {
            (r["section"], r["regime"], r["configuration"], r["metric"]): r for r in csv.DictReader(handle)
        }
    expected = oracle(dirs, pad)
    assert len(expected) > 150 and any(key[0] == "significance" for key in expected)
    wrong = []
    for key, (value, sem, n) in expected.items():
        row = theirs.get(key)
        if row is None:
            wrong.append(f"{key}: not in summary.csv")
            continue
        if not same(value, row["value"]) or (sem is not None and not same(sem, row["sem"])):
            wrong.append(f"{key}: oracle {value} ± {sem}, summary.csv {row['value']} ± {row['sem']}")
        if n is not None and row["n"] != "" and int(row["n"]) != n:
            wrong.append(f"{key}: oracle n={n}, summary.csv n={row['n']}")
    assert not wrong, "\n".join(wrong)
