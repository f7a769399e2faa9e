"""The audit's numbers on hand-built edge cases, each expected value computed by hand in the comments.

Reads nothing; writes small sweeps under tmp_path.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from auditkit import TS, prediction, tid, trial_dir, write_events, write_journal, write_launch, write_report
from gradekit import spec_for
from rich.console import Console

from mle_world.audit import audit, run_audit
from mle_world.audit.analysis import baseline_delta_rows
from mle_world.cli.display import RichDisplay
from mle_world.costs.account import write_trial_costs
from mle_world.costs.prices import load_prices


def test_would_skip_counts_a_veto_of_a_candidate_the_ungated_step_did_not_run(tmp_path: Path) -> None:
    """wm-rank4 ungated: the counterfactual veto falls on the best-ranked candidate, which the seeded
    choice need not have run; the step is still one the gate would have vetoed."""
    out = tmp_path / "u"
    write_launch(out, "ungated", [tid("ungated", "wm-rank4", "A", 34)])
    write_report(out, "ungated", "wm-rank4", "A", 34, score=0.5)
    # step 1: candidate 0 ranks first and would be vetoed; candidate 2 ran (did not improve).
    # step 2: the executed candidate ranks first and would run.
    vetoed_step = [
        prediction("not_selected", 0.1, None, executed=False, counterfactual_gate="skip"),
        prediction("not_selected", 0.2, None, executed=False, counterfactual_gate="not_selected"),
        prediction("not_gated", 0.3, False, counterfactual_gate="not_selected"),
        prediction("not_selected", 0.2, None, executed=False, counterfactual_gate="not_selected"),
    ]
    run_step = [
        prediction("not_gated", 0.9, True, counterfactual_gate="execute"),
        *(
            prediction("not_selected", 0.2, None, executed=False, counterfactual_gate="not_selected")
            for _ in range(3)
        ),
    ]
    write_events(out, "wm-rank4", "A", 34, [*vetoed_step, *run_step])
    (row, _) = audit([out]).world
    assert (row.decisions, row.not_selected, row.would_skip) == (2, 6, 1)
    # executed: step 1's (gate would not run it, did not improve), step 2's (would run it, improved)
    assert (row.gate_precision, row.gate_recall) == (1.0, 1.0)


def test_pooled_ungated_row_pools_every_statistic(tmp_path: Path) -> None:
    """The 'all' row pools the ungated configurations: steps, would-skip, gate precision/recall and the
    Brier score of p_bug too, not only p_improves (it showed 0 consulted and 0 would-skip)."""
    out = tmp_path / "u"
    write_launch(out, "ungated", [tid("ungated", c, "A", 34) for c in ("wm-point", "wm-blind")])
    write_events(out, "wm-point", "A", 34, [
        prediction("not_gated", 0.8, True, p_bug=0.1, actual_buggy=False, counterfactual_gate="execute"),
        prediction("not_gated", 0.3, False, p_bug=0.6, actual_buggy=True, counterfactual_gate="skip"),
        "{not json",
    ])  # fmt: skip
    write_events(out, "wm-blind", "A", 34, [
        prediction("not_gated", 0.4, False, p_bug=0.2, actual_buggy=False, counterfactual_gate="skip"),
        prediction("not_gated", 0.7, False, p_bug=0.5, actual_buggy=False, counterfactual_gate="execute"),
        "{not json",
    ])  # fmt: skip
    rows = {w.configuration: w for w in audit([out]).world}
    pooled = rows["all"]
    assert (pooled.predictions, pooled.decisions, pooled.would_skip, pooled.labelled) == (4, 4, 2, 4)
    # would not run: the two skips, neither improved → precision 2/2; not improved: 3, 2 flagged → 2/3
    assert pooled.gate_precision == 1.0 and pooled.gate_recall == pytest.approx(2 / 3)
    # p_improves ≥ 0.5 right for .8/T, .3/F, .4/F, wrong for .7/F; Brier (.04 + .09 + .16 + .49) / 4
    assert pooled.accuracy == 0.75 and pooled.brier == pytest.approx(0.195)
    # p_bug: (.1-0)² + (.6-1)² + (.2-0)² + (.5-0)² = .01 + .16 + .04 + .25 → / 4
    assert pooled.bug_labelled == 4 and pooled.bug_brier == pytest.approx(0.115)
    assert pooled.skip_rate is None and pooled.executions_saved == 0
    assert pooled.bad_event_lines == 2  # one unreadable line in each configuration's events


def _llm(role: str, prompt: int | None, completion: int | None) -> str:
    return json.dumps(
        {"type": "llm_call", "ts": TS, "role": role, "model": "local", "purpose": "draft",
         "prompt_tokens": prompt, "completion_tokens": completion, "latency_s": 1.0, "outcome": "ok"}
    )  # fmt: skip


def _execution(seconds: float, gpu: str | None) -> str:
    return json.dumps(
        {"type": "execution", "ts": TS, "node_id": "n", "kind": "full", "exec_time_s": seconds,
         "timeout_s": 9999, "timed_out": False, "exit_code": 0, "gpu": gpu}
    )  # fmt: skip


def test_unknown_tokens_and_gpu_hours_are_left_out_of_the_per_trial_means(tmp_path: Path) -> None:
    """Cost CSVs written by costs.account: a trial without events.jsonl knows neither tokens nor GPU-hours,
    one whose world endpoint reported no usage knows no tokens; they are not averaged in as zeros."""
    out = tmp_path / "g"
    write_launch(out, "gated", [tid("gated", "aide", "A", s) for s in (34, 35, 36)])
    events = {
        # coder 1000+200 + 3000+800, feedback 500+100, world 100+50 = 5750 tokens; 0.5 + 0.2 + 0 GPU-h
        34: [_llm("coder", 1000, 200), _llm("coder", 3000, 800), _llm("feedback", 500, 100),
             _llm("world", 100, 50), _execution(1800.0, "0"), _execution(360.0, "0,1"), _execution(100.0, None)],
        35: None,  # no events.jsonl: every cell empty
        36: [_llm("coder", 10, 1), _llm("world", None, None), _execution(3600.0, "0")],  # 1.0 GPU-h
    }  # fmt: skip
    for seed, lines in events.items():
        directory = trial_dir(out, "aide", "A", seed)
        if lines is not None:
            (directory / "events.jsonl").write_text("\n".join(lines) + "\n")
        spec = spec_for("A", seed=seed, regime="gated", configuration="aide")
        write_trial_costs(directory, spec, out, load_prices())
    (row,) = audit([out]).costs
    assert (row.with_costs, row.tokens_known, row.gpu_known) == (3, 1, 2)
    assert row.tokens_per_trial == 5750 and row.gpu_hours_per_trial == pytest.approx((0.7 + 1.0) / 2)


def _failed_without_submission(out: Path, regime: str, cfg: str, task: str, seed: int) -> None:
    status = {"trial_id": tid(regime, cfg, task, seed), "state": "failed", "cause": "endpoint_unavailable"}
    (trial_dir(out, cfg, task, seed) / "status.json").write_text(json.dumps(status))


def test_paired_deltas_count_a_failed_trial_without_submission_as_the_rates_do(tmp_path: Path) -> None:
    """A trial that failed for good without a submission is a settled non-medal in the rates; the paired
    deltas pair it the same way instead of dropping the pair (which hid the regime's failures)."""
    g, u = tmp_path / "g", tmp_path / "u"
    write_launch(g, "gated", [tid("gated", c, t, 34) for c in ("wm-point", "aide") for t in "AB"])
    write_launch(u, "ungated", [tid("ungated", "wm-point", t, 34) for t in "AB"])
    _failed_without_submission(g, "gated", "wm-point", "A", 34)
    write_report(g, "gated", "wm-point", "B", 34, score=0.85, medal="silver", above_median=True)
    write_report(u, "ungated", "wm-point", "A", 34, score=0.95, medal="gold", above_median=True)
    write_report(u, "ungated", "wm-point", "B", 34, score=0.6, above_median=True)
    write_report(g, "gated", "aide", "A", 34, score=0.5)
    _failed_without_submission(g, "gated", "aide", "B", 34)
    result = audit([g, u])
    (delta,) = result.deltas
    # any medal: A 0 − 100, B 100 − 0 → mean 0, SEM = sd(−100, 100) / √2 = 141.42 / 1.4142 = 100
    assert delta.pairs == 2 and delta.deltas["any_medal"] == (0.0, pytest.approx(100.0), 2)
    # valid: A 0 − 100, B 100 − 100 → −50 ± 50; above median: A 0 − 100, B 0 → −50 ± 50
    assert delta.deltas["valid_submission"] == (-50.0, pytest.approx(50.0), 2)
    assert delta.deltas["above_median"] == (-50.0, pytest.approx(50.0), 2)
    assert (delta.gated_better, delta.gated_worse, delta.ties) == (1, 1, 0)  # A: no score loses
    (against_aide,) = baseline_delta_rows(result.sweep, "aide")
    # gated wm-point − aide: A 0 − 0, B 100 − 0 → 50 ± 50 over 2 pairs
    assert (against_aide.regime, against_aide.configuration, against_aide.pairs) == ("gated", "wm-point", 2)
    assert against_aide.delta == (50.0, pytest.approx(50.0), 2)


def test_pad_missing_pads_the_seeds_that_have_results_not_seeds_that_never_ran(tmp_path: Path) -> None:
    """MLE-bench's --pad-missing zero-fills up to the largest number of reports a competition has: a
    seed with no result for any task (not run yet) is not a seed of zeros."""
    out = tmp_path / "g"
    write_launch(out, "gated", [tid("gated", "aide", t, s) for t in "AB" for s in (34, 35, 36)])
    write_report(out, "gated", "aide", "A", 34, score=0.95, medal="gold")
    write_report(out, "gated", "aide", "B", 34, score=0.1)
    write_report(out, "gated", "aide", "A", 35, score=0.1)  # B35 running; seed 36 not started
    (padded,) = audit([out], pad_missing=True).rates
    # seed 34: 1/2 → 50; seed 35: 0/2 (B missing = failure) → 0; mean 25, SEM = sd(50, 0) / √2 = 25
    assert padded.seeds_used == [34, 35] and padded.rates["any_medal"] == (25.0, pytest.approx(25.0), 2)
    (complete,) = audit([out]).rates
    assert complete.seeds_used == [34] and complete.rates["any_medal"] == (50.0, 0.0, 1)


def test_index_trial_table_calls_a_failed_trial_without_submission_settled_not_missing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "g"
    write_launch(out, "gated", [tid("gated", "aide", "A", 34), tid("gated", "aide", "A", 35)])
    _failed_without_submission(out, "gated", "aide", "A", 34)  # settled: no medal; seed 35 never ran
    assert run_audit([out], display=RichDisplay(Console(file=io.StringIO())), plots=False) == 0
    page = (out / "audit" / "index.html").read_text()
    settled = re.search(r"<tr>[^\n]*gated/aide/A/seed34[^\n]*</tr>", page)
    missing = re.search(r"<tr>[^\n]*gated/aide/A/seed35[^\n]*</tr>", page)
    assert settled is not None and missing is not None
    assert "no submission (no medal); endpoint_unavailable" in settled.group()
    assert "missing" not in settled.group() and "missing" in missing.group()


def test_summary_csv_keeps_sem_for_standard_errors(tmp_path: Path) -> None:
    """A calibration bin's mean prediction has its own row (it sat in the sem column), and gate
    precision and recall say what they are over."""
    out = tmp_path / "u"
    write_launch(out, "ungated", [tid("ungated", "wm-point", "A", 34)])
    write_events(out, "wm-point", "A", 34, [
        prediction("not_gated", 0.12, False, counterfactual_gate="skip"),
        prediction("not_gated", 0.18, True, counterfactual_gate="skip"),
        prediction("not_gated", 0.9, False, counterfactual_gate="execute"),
    ])  # fmt: skip
    assert run_audit([out], display=RichDisplay(Console(file=io.StringIO())), plots=False) == 0
    with open(out / "audit" / "summary.csv", newline="") as handle:
        rows = {
            (r["configuration"], r["metric"]): (r["value"], r["sem"], r["n"]) for r in csv.DictReader(handle)
        }
    # bin 0.1–0.2 holds 0.12 (not improved) and 0.18 (improved): observed 1/2, mean predicted 0.15
    assert rows[("wm-point", "bin_0.1_0.2_observed")] == ("0.5", "", "2")
    assert rows[("wm-point", "bin_0.1_0.2_mean_predicted")] == ("0.15", "", "2")
    # would not run: the two skips, one did not improve → 1/2; not improved: 0.12 and 0.9, one flagged
    assert rows[("wm-point", "gate_precision")] == ("0.5", "", "2")
    assert rows[("wm-point", "gate_recall")] == ("0.5", "", "2")


def test_best_metric_curve_counts_a_trial_that_never_found_a_good_node_as_zero(tmp_path: Path) -> None:
    """Every trial is 0 before its first good node; one that never had one stays 0 instead of leaving
    the average (which raised the curve of configurations whose trials fail more)."""
    out = tmp_path / "g"
    write_launch(out, "gated", [tid("gated", "aide", "A", s) for s in (34, 35)])
    write_journal(out, "aide", "A", 34, [(0.0, 0.2), (1.0, 0.8)], lower=False)
    buggy = {"id": "b", "step": 0, "ctime": 1_000_000.0, "executed": True, "is_buggy": True, "metric": None}
    data = {"trial_id": "x", "science_hash": "x", "lower_is_better": False, "nodes": [buggy]}
    (trial_dir(out, "aide", "A", 35) / "journal.json").write_text(json.dumps(data))
    (curve,) = audit([out]).curves
    # seed 34: 0.2 (the worst seen, 0) then 0.8 (the best, 1) from 1 h on; seed 35 is 0 throughout
    assert curve.trials == 2 and curve.values[-1] == 0.5 and curve.values[0] == 0.0


def test_best_metric_curve_of_a_lower_is_better_task_rises_as_the_metric_falls(tmp_path: Path) -> None:
    """Normalised per task with 1 = the best seen: for an error metric the lowest is best, so a trial
    going from 0.8 to 0.2 starts at 0 and ends at 1 (not the other way round)."""
    out = tmp_path / "g"
    write_launch(out, "gated", [tid("gated", "aide", "A", 34)])
    write_journal(out, "aide", "A", 34, [(0.0, 0.8), (1.0, 0.5), (2.0, 0.6), (3.0, 0.2)], lower=True)
    (curve,) = audit([out]).curves
    # bounds 0.2..0.8; best so far 0.8 → 0, then 0.5 → 0.5 (0.6 at 2 h is no improvement), then 0.2 → 1
    middle = [v for t, v in zip(curve.times, curve.values, strict=True) if 1.0 <= t < 3.0]
    assert curve.values[0] == 0.0 and curve.values[-1] == 1.0
    assert middle and middle == pytest.approx([0.5] * len(middle))
