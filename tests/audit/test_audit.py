"""Audit on a synthetic two-regime sweep whose answers were computed by hand (see comments)."""

from __future__ import annotations

import csv
import io
import json
import math
import random
from pathlib import Path

import pytest
from auditkit import (
    prediction,
    tid,
    trial_dir,
    write_costs,
    write_events,
    write_journal,
    write_launch,
    write_report,
    write_status,
)
from rich.console import Console

from mle_world.audit import audit, run_audit
from mle_world.audit.stats import accuracy_at, brier_score, calibration_bins, mean_sem
from mle_world.cli.display import RichDisplay
from mle_world.errors import UserError
from mle_world.records import AgentResult
from mle_world.storage import write_model

TASKS, SEEDS = ("A", "B"), (34, 35, 36)


@pytest.fixture(scope="module")
def sweep_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sweep")
    g, u = root / "paper-gated", root / "paper-ungated"
    gated_ids = [tid("gated", c, t, s) for c in ("wm-point", "aide") for t in TASKS for s in SEEDS]
    write_launch(g, "gated", [*gated_ids, tid("gated", "wm-point", "A", 34)])  # one duplicate
    write_launch(u, "ungated", [tid("ungated", "wm-point", t, s) for t in TASKS for s in SEEDS])
    # gated wm-point: B36 missing (failed), medals: A34 gold, B34 bronze, A35 silver.
    write_report(g, "gated", "wm-point", "A", 34, score=0.95, medal="gold", above_median=True)
    write_report(g, "gated", "wm-point", "B", 34, score=0.72, medal="bronze")
    write_report(g, "gated", "wm-point", "A", 35, score=0.85, medal="silver", above_median=True)
    write_report(g, "gated", "wm-point", "B", 35, score=0.6)
    write_report(g, "gated", "wm-point", "A", 36, score=0.2)
    write_status(g, "gated", "wm-point", "B", 36, "failed", "OOM in execution")
    # ... and it left a submission that was never graded: missing (a trial without one would count as
    # a non-medal for its seed, see test_failed_trial_without_submission_keeps_its_seed).
    left = trial_dir(g, "wm-point", "B", 36) / "submission" / "submission.csv"
    left.parent.mkdir(parents=True)
    left.write_text("id,y\n")
    # gated aide: A34 corrupted; the rest valid, no medals.
    for t in TASKS:
        for s in SEEDS:
            write_report(g, "gated", "aide", t, s, score=0.5)
    (g / "runs" / "aide" / "A_seed34_grading_report.json").write_text('{"competition_id": "A", "sco')
    # ungated wm-point: A34 gold (above median), B36 silver.
    write_report(u, "ungated", "wm-point", "A", 34, score=0.93, medal="gold", above_median=True)
    write_report(u, "ungated", "wm-point", "B", 34, score=0.6)
    write_report(u, "ungated", "wm-point", "A", 35, score=0.6)
    write_report(u, "ungated", "wm-point", "B", 35, score=0.6)
    write_report(u, "ungated", "wm-point", "A", 36, score=0.3)
    write_report(u, "ungated", "wm-point", "B", 36, score=0.82, medal="silver")
    write_report(u, "ungated", "wm-point", "C", 34, score=0.1)  # not in launch.json → unexpected
    # costs: gated wm-point A34 = 1.5, A35 = 2.5, B34 unknown.
    write_costs(g, "gated", "wm-point", "A", 34, ["1.0", "0.5"])
    write_costs(g, "gated", "wm-point", "A", 35, ["2.0", "0.5"])
    write_costs(g, "gated", "wm-point", "B", 34, ["1.0", ""])
    # world model: gated gates execute/skip/skip/forced; ungated p=[.9,.2,.6,.4] vs [T,F,F,T].
    write_events(
        g, "wm-point", "A", 34,
        [prediction("execute", 0.9, True), prediction("skip", 0.1, None),
         prediction("skip", 0.2, None), prediction("forced", 0.3, False)],
    )  # fmt: skip
    write_events(
        u, "wm-point", "A", 34,
        [prediction("not_gated", 0.9, True), prediction("not_gated", 0.2, False),
         prediction("not_gated", 0.6, False), prediction("not_gated", 0.4, True),
         prediction("not_gated", 0.99, False, valid=False),  # invalid: excluded
         prediction("not_gated", 0.7, None, executed=False),  # not executed: excluded
         "{corrupted line"],
    )  # fmt: skip
    write_journal(g, "wm-point", "A", 34, [(0.0, 0.5), (1.0, 0.8)], lower=False)
    write_journal(u, "wm-point", "A", 34, [(0.0, 0.6), (2.0, 0.7)], lower=False)
    return g, u


def test_stats_by_hand() -> None:
    # [1,2,3,4]: mean 2.5, sd = sqrt(5/3) = 1.290994, sem = sd / 2
    ms = mean_sem([1.0, 2.0, 3.0, 4.0])
    assert ms.mean == 2.5 and ms.sem == pytest.approx(math.sqrt(5 / 3) / 2) and ms.n == 4
    assert mean_sem([7.0]) == (7.0, 0.0, 1)
    assert mean_sem([]) == (None, None, 0)
    # Brier: (0.1² + 0.2² + 0.6² + 0.6²) / 4 = (0.01 + 0.04 + 0.36 + 0.36) / 4
    assert brier_score([0.9, 0.2, 0.6, 0.4], [True, False, False, True]) == pytest.approx(0.1925)
    assert accuracy_at([0.9, 0.2, 0.6, 0.4], [True, False, False, True]) == 0.5
    assert accuracy_at([0.5, 0.5], [True, True]) == 1.0  # p = 0.5 says 'improves' (p >= threshold)
    bins = calibration_bins([0.05, 0.15, 0.12, 1.0], [False, True, False, True], n_bins=10)
    assert (bins[1].size, bins[1].mean_predicted, bins[1].observed_rate) == (2, pytest.approx(0.135), 0.5)
    assert bins[9].size == 1 and bins[9].observed_rate == 1.0 and bins[5].size == 0


def _bins_by_definition(probabilities: list[float], outcomes: list[bool], n_bins: int) -> list[tuple]:
    """Each bin's members picked by int(p × n_bins) (clamped), summed left to right."""
    rows = []
    for i in range(n_bins):
        members = [
            (p, y)
            for p, y in zip(probabilities, outcomes, strict=True)
            if min(max(int(p * n_bins), 0), n_bins - 1) == i
        ]
        total = 0.0
        for p, _ in members:
            total += p
        n = len(members)
        rows.append(
            (
                i / n_bins,
                (i + 1) / n_bins,
                n,
                total / n if n else None,
                sum(y for _, y in members) / n if n else None,
            )
        )
    return rows


@pytest.mark.parametrize("n_bins", [1, 3, 7, 10])
def test_calibration_bins_equal_their_definition(n_bins: int) -> None:
    rng = random.Random(n_bins)
    edges = [0.0, 1.0, 0.1, 0.3, 0.5, 0.7, 0.9999999999999999, 1e-300]
    for n in (0, 1, 2, 50, 5000):
        probabilities = [rng.choice(edges) if rng.random() < 0.3 else rng.random() for _ in range(n)]
        outcomes = [rng.random() < 0.4 for _ in range(n)]
        got = calibration_bins(probabilities, outcomes, n_bins)
        assert [tuple(b) for b in got] == _bins_by_definition(probabilities, outcomes, n_bins)
        assert all(type(b.size) is int and type(b.mean_predicted) in (float, type(None)) for b in got)
    with pytest.raises(ValueError):
        calibration_bins([0.5], [True, False])


def test_completeness(sweep_dirs: tuple[Path, Path]) -> None:
    sweep = audit(list(sweep_dirs)).sweep
    assert len(sweep.trials) == 18
    assert len(sweep.found) == 16
    assert [t.trial_id for t in sweep.missing] == ["gated/wm-point/B/seed36"]
    assert [t.trial_id for t in sweep.invalid] == ["gated/aide/A/seed34"]
    assert sweep.invalid[0].problem is not None and "corrupt JSON" in sweep.invalid[0].problem
    assert sweep.duplicates == ["gated/wm-point/A/seed34"]
    assert [(t.trial_id, t.cause) for t in sweep.failed] == [("gated/wm-point/B/seed36", "OOM in execution")]
    assert [Path(p).name for p in sweep.unexpected] == ["C_seed34_grading_report.json"]


def test_rates_complete_seeds_only(sweep_dirs: tuple[Path, Path]) -> None:
    rows = {(r.regime, r.configuration): r for r in audit(list(sweep_dirs)).rates}
    gated = rows[("gated", "wm-point")]
    assert gated.seeds_used == [34, 35] and gated.tasks == 2
    # any medal per seed: s34 100 (A gold, B bronze), s35 50 (A silver) → 75 ± 25
    assert gated.rates["any_medal"] == (75.0, pytest.approx(25.0), 2)
    assert gated.rates["gold_medal"] == (25.0, pytest.approx(25.0), 2)
    assert gated.rates["bronze_medal"] == (25.0, pytest.approx(25.0), 2)
    assert gated.rates["valid_submission"] == (100.0, 0.0, 2)
    assert gated.rates["above_median"] == (50.0, 0.0, 2)
    ungated = rows[("ungated", "wm-point")]
    # s34 50, s35 0, s36 50 → 33.33 ± 16.67
    assert ungated.rates["any_medal"].mean == pytest.approx(100 / 3)
    assert ungated.rates["any_medal"].sem == pytest.approx(50 / 3)
    aide = rows[("gated", "aide")]  # A34 corrupted → seed 34 incomplete
    assert aide.seeds_used == [35, 36] and aide.rates["valid_submission"] == (100.0, 0.0, 2)


def test_rates_pad_missing(sweep_dirs: tuple[Path, Path]) -> None:
    rows = {(r.regime, r.configuration): r for r in audit(list(sweep_dirs), pad_missing=True).rates}
    gated = rows[("gated", "wm-point")]
    assert gated.seeds_used == [34, 35, 36]
    # [100, 50, 0] → 50 ± 50/sqrt(3)
    assert gated.rates["any_medal"] == (50.0, pytest.approx(50 / math.sqrt(3)), 3)
    # valid: [100, 100, 50] → 83.33 ± 16.67
    assert gated.rates["valid_submission"].mean == pytest.approx(250 / 3)
    assert gated.rates["valid_submission"].sem == pytest.approx(50 / 3)


def test_paired_deltas(sweep_dirs: tuple[Path, Path]) -> None:
    deltas = audit(list(sweep_dirs)).deltas
    assert [d.configuration for d in deltas] == ["wm-point"]
    d = deltas[0]
    assert d.pairs == 5  # B36 has no gated report
    # any medal diffs: A34 0, B34 +100, A35 +100, B35 0, A36 0 → 40 ± sqrt(3000)/sqrt(5)
    assert d.deltas["any_medal"] == (40.0, pytest.approx(math.sqrt(3000) / math.sqrt(5)), 5)
    # above median diffs: 0, 0, +100, 0, 0 → 20 ± 20
    assert d.deltas["above_median"] == (20.0, pytest.approx(20.0), 5)
    assert d.deltas["valid_submission"] == (0.0, 0.0, 5)
    # scores: A34 .95>.93, B34 .72>.6, A35 .85>.6 better; B35 tie; A36 .2<.3 worse
    assert (d.gated_better, d.gated_worse, d.ties) == (3, 1, 1)


def test_costs(sweep_dirs: tuple[Path, Path]) -> None:
    rows = {(c.regime, c.configuration): c for c in audit(list(sweep_dirs)).costs}
    c = rows[("gated", "wm-point")]
    assert (c.trials, c.with_costs, c.cost_known) == (6, 3, 2)
    assert c.cost_per_trial == (2.0, pytest.approx(0.5), 2)
    assert c.total_cost == pytest.approx(4.0) and c.medals == 2 and c.cost_per_medal == pytest.approx(2.0)
    assert c.tokens_per_trial == 220 and c.gpu_hours_per_trial == pytest.approx(0.5)
    assert rows[("ungated", "wm-point")].with_costs == 0


def test_world_model(sweep_dirs: tuple[Path, Path]) -> None:
    rows = {(w.regime, w.configuration): w for w in audit(list(sweep_dirs)).world}
    gated = rows[("gated", "wm-point")]
    assert (gated.predictions, gated.decisions, gated.skipped, gated.forced) == (4, 4, 2, 1)
    assert gated.executions_saved == 2 and gated.not_selected == 0
    assert gated.skip_rate == 0.5 and gated.labelled == 0  # gated trials are not calibration data
    ungated = rows[("ungated", "wm-point")]
    assert (ungated.predictions, ungated.invalid, ungated.labelled) == (6, 1, 4)
    assert ungated.accuracy == 0.5 and ungated.brier == pytest.approx(0.1925)
    assert ungated.bad_event_lines == 1 and ungated.skip_rate is None
    overall = rows[("ungated", "all")]
    assert overall.brier == pytest.approx(0.1925)
    assert [(b.size, b.observed_rate) for b in overall.bins if b.size] == [
        (1, 0.0),
        (1, 1.0),
        (1, 0.0),
        (1, 1.0),
    ]


@pytest.mark.parametrize("failure_class", [None, "agent", "infra"])
def test_failed_trial_without_submission_keeps_its_seed_unless_infra(
    tmp_path: Path, failure_class: str | None
) -> None:
    """MLE-bench-style seed alignment by seed number; a trial that failed for the agent's own reasons
    and left nothing is a non-medal; one the infrastructure failed is missing (it is to be retried)."""
    out = tmp_path / "out"
    ids = [tid("gated", "aide", t, s) for t in TASKS for s in (34, 35)]
    write_launch(out, "gated", ids)
    write_report(out, "gated", "aide", "A", 34, score=0.9, medal="gold")
    write_report(out, "gated", "aide", "B", 34, score=0.9, medal="gold")
    write_report(out, "gated", "aide", "A", 35, score=0.9, medal="gold")
    write_status(out, "gated", "aide", "B", 35, "failed", "slurm job 12_3 NODE_FAIL", failure_class)
    result = audit([out])
    (row,) = result.rates
    assert [t.trial_id for t in result.sweep.failed] == [ids[3]]
    if failure_class == "infra":
        assert row.seeds_used == [34] and row.rates["any_medal"] == (100.0, 0.0, 1)
        assert [t.trial_id for t in result.sweep.missing] == [ids[3]]
        padded = audit([out], pad_missing=True).rates[0]
        assert padded.seeds_used == [34, 35] and padded.rates["any_medal"][0] == 75.0
    else:
        assert row.seeds_used == [34, 35]  # seed 35 kept: B35 counts as no medal
        assert row.rates["any_medal"] == (75.0, pytest.approx(25.0), 2)
        assert result.sweep.missing == []


def test_rank4_accept_all_has_skip_rate_zero(tmp_path: Path) -> None:
    """Candidates that lost the ranking are 'not selected', not skips (no 75 % floor for k = 4)."""
    out = tmp_path / "rank4"
    write_launch(out, "gated", [tid("gated", "wm-rank4", "A", 34)])
    write_report(out, "gated", "wm-rank4", "A", 34, score=0.5)
    step = [
        prediction("execute", 0.9, True),
        *(prediction("not_selected", 0.8, None, executed=False) for _ in range(3)),
    ]
    write_events(out, "wm-rank4", "A", 34, step * 5)
    (row,) = audit([out]).world
    assert (row.decisions, row.skipped, row.not_selected) == (5, 0, 15) and row.skip_rate == 0.0


def test_budget_table_reports_which_limit_stopped_each_trial(tmp_path: Path) -> None:
    out = tmp_path / "budget"
    ids = [tid("gated", "wm-rank4", t, 34) for t in ("A", "B", "C")]
    write_launch(out, "gated", ids)
    results = [
        AgentResult(trial_id=ids[0], status="completed", stop_reason="max_steps", executed=10, steps=13,
                    consulted_steps=9, vetoed_steps=3, not_selected=27, direction_source="task",
                    metric_mismatches=2),
        AgentResult(trial_id=ids[1], status="completed", stop_reason="time_limit", executed=6, steps=6,
                    direction_disagreements=1, context_overflows=1),
        AgentResult(trial_id=ids[2], status="failed", stop_reason="endpoint_unavailable: world"),
    ]  # fmt: skip
    for task, result in zip("ABC", results, strict=True):
        write_model(trial_dir(out, "wm-rank4", task, 34) / "result.json", result)
    (row,) = audit([out]).budgets
    assert row.stopped == {"max_steps": 1, "time_limit": 1, "failed": 1} and row.with_result == 3
    assert row.executed.mean == pytest.approx(16 / 3) and row.steps.mean == pytest.approx(19 / 3)
    assert (row.consulted_steps, row.vetoed_steps, row.not_selected) == (9, 3, 27)
    assert (row.direction_from_task, row.direction_disagreements, row.metric_mismatches, row.context_overflows) == (
        1, 1, 2, 1
    )  # fmt: skip


def test_best_metric_curves(sweep_dirs: tuple[Path, Path]) -> None:
    curves = {(c.regime, c.configuration): c for c in audit(list(sweep_dirs)).curves}
    # task A bounds 0.5..0.8: gated ends at 0.8 → 1.0, ungated at 0.7 → 2/3
    assert curves[("gated", "wm-point")].values[-1] == pytest.approx(1.0)
    assert curves[("ungated", "wm-point")].values[-1] == pytest.approx(2 / 3)
    assert curves[("gated", "wm-point")].times[-1] == pytest.approx(2.0)


def test_time_axis_is_the_budget_clock(tmp_path: Path) -> None:
    """A trial requeued for 10 h between two nodes: the curve uses budget time, not wall-clock ctime."""
    out = tmp_path / "clock"
    write_launch(out, "gated", [tid("gated", "aide", "A", 34)])
    nodes = [
        {"id": "a", "step": 0, "ctime": 1_000_000.0, "budget_time_s": 1800.0, "metric": 0.5, "executed": True},
        {"id": "b", "step": 1, "ctime": 1_036_000.0 + 3600, "budget_time_s": 5400.0, "metric": 0.8, "executed": True},
    ]  # fmt: skip
    data = {"trial_id": "x", "science_hash": "x", "lower_is_better": False, "nodes": nodes}
    (trial_dir(out, "aide", "A", 34) / "journal.json").write_text(json.dumps(data))
    (curve,) = audit([out]).curves
    assert curve.times[-1] == pytest.approx(1.5)


def test_run_audit_outputs_and_exit_codes(sweep_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=200)
    out = tmp_path / "audit"
    display = RichDisplay(console)
    assert run_audit(list(sweep_dirs), strict=False, pad_missing=False, display=display, out_dir=out) == 0
    strict = run_audit(
        list(sweep_dirs), strict=True, pad_missing=False, display=display, out_dir=out, plots=False
    )
    assert strict == 1
    for name in (
        "summary.csv",
        "report.md",
        "medal_rates.png",
        "calibration.png",
        "best_metric_over_time.png",
    ):
        assert (out / name).stat().st_size > 0, name
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert (
        "Completeness" in text
        and "invalid: corrupt JSON" in text
        and "failed: gated/wm-point/B/seed36" in text
    )
    with open(out / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    any_medal = next(
        r for r in rows
        if (r["section"], r["regime"], r["configuration"], r["metric"]) == ("rates", "gated", "wm-point", "any_medal")
    )  # fmt: skip
    assert (float(any_medal["value"]), float(any_medal["sem"]), any_medal["n"]) == (75.0, 25.0, "2")
    report = (out / "report.md").read_text()
    assert "## Paired gated − ungated" in report and "## Budget and data quality" in report
    assert "| improve | pointwise | 4 | 0.500 | 0.1925 |" in report  # calibration per stage and mode


def test_default_out_dir_is_first_dir(sweep_dirs: tuple[Path, Path]) -> None:
    console = Console(file=io.StringIO())
    display = RichDisplay(console)
    run_audit([sweep_dirs[1]], strict=False, pad_missing=False, display=display, out_dir=None, plots=False)
    assert (sweep_dirs[1] / "audit" / "summary.csv").is_file()


def test_clean_sweep_passes_strict(tmp_path: Path) -> None:
    out = tmp_path / "clean"
    write_launch(out, "gated", [tid("gated", "aide", "A", 34)])
    write_report(out, "gated", "aide", "A", 34, score=0.1, lower=True)
    assert run_audit([out], strict=True, display=RichDisplay(Console(file=io.StringIO())), plots=False) == 0


def test_missing_launch_json_is_flagged_not_fatal(tmp_path: Path) -> None:
    out = tmp_path / "nolaunch"
    write_report(out, "gated", "aide", "A", 34, score=0.1)
    result = audit([out])
    assert len(result.sweep.found) == 1 and "launch.json" in result.sweep.problems[0]
    assert run_audit([out], strict=True, display=RichDisplay(Console(file=io.StringIO())), plots=False) == 1


def test_missing_dir_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such directory"):
        run_audit([tmp_path / "nope"], display=RichDisplay(Console(file=io.StringIO())))


def test_unexpected_reports_are_every_report_no_launch_lists_in_name_order(tmp_path: Path) -> None:
    """What `layout.report_paths` would glob beside the expected reports: sorted by dir, then name; a
    hidden name, or one that does not end as a report's, is not one; an expected trial's report found in
    another configuration's dir is unexpected there."""
    out = tmp_path / "paper-gated"
    write_launch(out, "gated", [tid("gated", "aide", "B", 34), tid("gated", "wm-point", "A", 34)])
    text = write_report(out, "gated", "aide", "B", 34, score=0.5).read_text()
    write_report(out, "gated", "wm-point", "A", 34, score=0.5)
    aide, point = out / "runs" / "aide", out / "runs" / "wm-point"
    for name in ("Z_seed1", "A_seed9", ".hidden_seed1", "B_seed340"):
        (aide / f"{name}_grading_report.json").write_text(text)
    (aide / "notes_grading_report.json.bak").write_text(text)
    (point / "B_seed34_grading_report.json").write_text(text)
    sweep = audit([out]).sweep
    assert sweep.unexpected == [
        str(aide / "A_seed9_grading_report.json"),
        str(aide / "B_seed340_grading_report.json"),
        str(aide / "Z_seed1_grading_report.json"),
        str(point / "B_seed34_grading_report.json"),
    ]
