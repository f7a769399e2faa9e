"""The what-if gates: a world model of known accuracy recovered within its sampling error, small cases whose
every cell is computed by hand in the comments, and the table in report.md, summary.csv, index.html and
on the terminal.

Reads nothing; writes small ungated sweeps (launch.json, spec.json, events.jsonl) under tmp_path.
"""

from __future__ import annotations

import csv
import io
import math
import random
from pathlib import Path

import pytest
from auditkit import tid, write_launch
from rich.console import Console
from whatifkit import Said, known_accuracy_sweep, paper_settings, step_lines, write_trial

from mle_world.agent import rank_pointwise, rejects
from mle_world.audit import audit, run_audit
from mle_world.audit.whatif import Setting, WhatIfRow
from mle_world.cli.display import RichDisplay
from mle_world.records import Prediction, WorldModelSettings

PAPER = Setting(0.5, 0.6, 0.5)
"""wm-point's settings in paper.yaml (and wm-rank4's, wm-all-stages')."""


def _row(rows: list[WhatIfRow], setting: Setting, stage: str = "improve", cfg: str = "wm-point") -> WhatIfRow:
    (row,) = [r for r in rows if r.setting == setting and r.stage == stage and r.configuration == cfg]
    return row


def _sweep(out: Path, trials: dict[str, list[dict]], regime: str = "ungated") -> None:
    """One trial per configuration (task A, seed 34), its spec.json with paper.yaml's settings."""
    write_launch(out, regime, [tid(regime, cfg, "A", 34) for cfg in trials])
    for cfg, lines in trials.items():
        write_trial(out, cfg, "A", 34, lines, paper_settings(cfg))


def test_a_world_model_right_70_percent_of_the_time_gives_a_gate_70_percent_right(tmp_path: Path) -> None:
    """1,000 decisions, each improving with probability 1/2, the world model right with probability 0.7
    (whatifkit.known_accuracy_sweep). At the paper's settings the gate vetoes exactly the steps the model
    says will not improve, so its accuracy, precision and recall are all 0.7 in expectation (classes
    balanced) and the skip share 1/2; each estimate is binomial, and the fixed seed keeps it within three
    of its standard errors, sqrt(p (1 - p) / n) over the n it counts."""
    out = tmp_path / "u"
    known_accuracy_sweep(out, accuracy=0.7, trials=20, steps=50, seed=7)
    rows = audit([out]).whatif.rows
    row = _row(rows, PAPER)
    assert row.paper and row.decisions == 1000

    def within(value: float | None, expected: float, n: int) -> None:
        assert value is not None and abs(value - expected) <= 3 * math.sqrt(expected * (1 - expected) / n)

    within(row.accuracy, 0.7, row.decisions)
    within(row.precision, 0.7, row.would_skip)
    within(row.recall, 0.7, row.not_improved)
    within(row.skip_share, 0.5, row.decisions)
    # Every candidate ran for 60 + 600 s: the hours follow the counts exactly.
    assert row.hours == pytest.approx(1000 * 660 / 3600) and row.hours_saved == pytest.approx(
        row.would_skip * 660 / 3600
    )
    # Threshold 0.3 vetoes the same steps (p_improves 0.2 or 0.8); 0.9 vetoes every step: it loses every
    # improvement and its precision is the share that did not improve.
    low, high = _row(rows, Setting(0.3, 0.6, 0.5)), _row(rows, Setting(0.9, 0.6, 0.5))
    assert (low.would_skip, low.lost) == (row.would_skip, row.lost)
    assert (high.would_skip, high.lost, high.recall) == (1000, high.improved, 1.0)
    assert high.precision == pytest.approx(high.not_improved / 1000)


def test_hand_computed_decisions_at_three_settings(tmp_path: Path) -> None:
    """wm-point (threshold 0.5, min_confidence 0.6, bug_threshold 0.5), six steps:
    0: p_improves 0.2, conf 0.9           → vetoed; did not improve; 360 + 3240 s = 1 h
    1: p_improves 0.9, conf 0.9           → runs;   improved;        0.5 h
    2: p_improves 0.3, conf 0.5           → runs (conf < 0.6), vetoed at min_confidence 0; improved; 2 h
    3: p_improves 0.6, p_bug 0.7, conf 0.9 → vetoed (p_bug ≥ 0.5), runs at bug_threshold 0.8; not improved; 0.25 h
    4: invalid prediction                  → runs (fail open); not improved; 1 h
    5: p_improves 0.1, conf 0.9, no time left to run it → no decision
    """
    steps = [
        step_lines(0, [Said(0.2)], improved=False, exec_s=[360, 3240]),
        step_lines(1, [Said(0.9)], improved=True, exec_s=[0, 1800]),
        step_lines(2, [Said(0.3, confidence=0.5)], improved=True, exec_s=[7200]),
        step_lines(3, [Said(0.6, p_bug=0.7)], improved=False, exec_s=[900]),
        step_lines(4, [Said(None, confidence=None, p_bug=None, valid=False)], improved=False, exec_s=[3600]),
        step_lines(5, [Said(0.1)], improved=None),
    ]
    out = tmp_path / "u"
    _sweep(out, {"wm-point": [line for step in steps for line in step]})
    rows = audit([out]).whatif.rows
    paper = _row(rows, PAPER)
    # vetoed 0 and 3 of 5; improved 1 and 2, none lost; not improved 0, 3, 4 (recall 2/3); right: 0, 3, 1, 2
    assert paper.paper and (paper.decisions, paper.would_skip, paper.improved, paper.lost) == (5, 2, 2, 0)
    assert (paper.hours, paper.hours_saved) == (pytest.approx(4.75), pytest.approx(1.25))
    assert (paper.skip_share, paper.precision, paper.recall, paper.accuracy) == (
        0.4,
        1.0,
        pytest.approx(2 / 3),
        0.8,
    )
    assert paper.forced == 0  # never three vetoes in a row
    # min_confidence 0: step 2 is vetoed too, losing its improvement: 3 vetoes, 2 right; right: 0, 3, 1
    trusting = _row(rows, Setting(0.5, 0.0, 0.5))
    assert not trusting.paper and (trusting.would_skip, trusting.lost) == (3, 1)
    assert trusting.hours_saved == pytest.approx(3.25)
    assert (trusting.precision, trusting.recall, trusting.accuracy) == (
        pytest.approx(2 / 3),
        pytest.approx(2 / 3),
        0.6,
    )
    # bug_threshold 0.8: step 3 runs; only step 0 is vetoed
    lenient = _row(rows, Setting(0.5, 0.6, 0.8))
    assert (lenient.would_skip, lenient.recall) == (1, pytest.approx(1 / 3))
    # the grid (4 thresholds × 3 min_confidences × 2 bug_thresholds) holds the paper's settings: 24 rows
    assert len(rows) == 24 and sum(r.paper for r in rows) == 1


def test_max_consecutive_skips_forces_a_run_in_the_recorded_order_unless_a_step_ran_between(
    tmp_path: Path,
) -> None:
    """Five vetoed steps in a row: skip, skip, skip, then forced (max_consecutive_skips 3), then skip. With
    steps 3 and 4 not consulted (they ran a node: a draft, say), steps 0-2 and 5-6 never reach three."""
    vetoed = [Said(0.1)]
    in_a_row = [line for s in range(5) for line in step_lines(s, vetoed, improved=False, exec_s=[60])]
    apart = [line for s in (0, 1, 2, 5, 6) for line in step_lines(s, vetoed, improved=False, exec_s=[60])]
    out = tmp_path / "u"
    _sweep(out, {"wm-point": in_a_row, "wm-blind": apart})
    rows = audit([out]).whatif.rows
    row = _row(rows, PAPER)
    assert (row.would_skip, row.forced) == (5, 1)  # per decision: a forced step still counts as vetoed
    assert (_row(rows, PAPER, cfg="wm-blind").would_skip, _row(rows, PAPER, cfg="wm-blind").forced) == (5, 0)


def test_several_candidates_are_ranked_as_the_agent_ranks_them(tmp_path: Path) -> None:
    """wm-rank4: a step is vetoed only when its best-ranked candidate is rejected, i.e. every one is; an
    invalid verdict ranks above rejected ones (fail open). The executed candidate is the ungated one.
    0: candidate 1 accepted, candidate 0 (rejected) ran → the gate runs candidate 1: no skip
    1: all four rejected, candidate 2 ran (improved)     → vetoed, its improvement lost
    2: one invalid, three rejected, candidate 3 ran       → runs the invalid one: no skip
    """
    rejected, accepted, invalid = Said(0.1), Said(0.8), Said(None, confidence=None, valid=False)
    lines = [
        *step_lines(0, [rejected, accepted, rejected, rejected], executed=0, improved=False, exec_s=[3600]),
        *step_lines(1, [rejected] * 4, executed=2, improved=True, exec_s=[7200]),
        *step_lines(2, [invalid, rejected, rejected, rejected], executed=3, improved=False, exec_s=[3600]),
    ]
    out = tmp_path / "u"
    _sweep(out, {"wm-rank4": lines})
    row = _row(audit([out]).whatif.rows, PAPER, cfg="wm-rank4")
    assert (row.decisions, row.would_skip, row.lost, row.hours_saved) == (3, 1, 1, pytest.approx(2.0))
    assert (row.precision, row.recall) == (0.0, 0.0)


def test_rows_per_stage_and_what_is_left_out(tmp_path: Path) -> None:
    """wm-all-stages gives a row per stage (draft, debug, improve); a replayed step counts once; gated
    trials, pairwise configurations and a configuration without spec.json give none."""
    out = tmp_path / "u"
    lines = [
        *step_lines(0, [Said(0.2)], improved=True, exec_s=[60], stage="draft"),
        *step_lines(1, [Said(0.2)], improved=False, exec_s=[60], stage="debug"),
        *step_lines(2, [Said(0.9)], improved=True, exec_s=[60], stage="improve"),
        *step_lines(2, [Said(0.9)], improved=True, exec_s=[60], stage="improve"),  # replayed after a kill
    ]
    one_step = step_lines(0, [Said(0.2)], improved=False, exec_s=[60])
    _sweep(out, {"wm-all-stages": lines, "wm-pairwise4": one_step, "wm-point": one_step})
    (out / "runs" / "wm-point" / "A_seed34" / "spec.json").unlink()
    gated = tmp_path / "g"
    _sweep(gated, {"wm-blind": one_step}, regime="gated")
    rows = [r for r in audit([out, gated]).whatif.rows if r.paper]
    assert [(r.configuration, r.stage, r.decisions, r.would_skip, r.lost) for r in rows] == [
        ("wm-all-stages", "draft", 1, 1, 1),
        ("wm-all-stages", "debug", 1, 1, 0),
        ("wm-all-stages", "improve", 1, 0, 0),
    ]


def test_the_table_in_every_output(tmp_path: Path) -> None:
    """report.md's section (the paper's row marked), summary.csv's rows, index.html's table and plot, the
    terminal's table of the paper's settings, and the plot file."""
    out = tmp_path / "u"
    steps = [
        step_lines(0, [Said(0.2)], improved=False, exec_s=[1800]),
        step_lines(1, [Said(0.9)], improved=True),
    ]
    _sweep(out, {"wm-point": [line for step in steps for line in step]})
    buf = io.StringIO()
    assert run_audit([out], display=RichDisplay(Console(file=buf, width=220)), trial_pages=False) == 0
    audit_dir = out / "audit"
    report = (audit_dir / "report.md").read_text()
    assert "## What-if gates" in report
    assert (
        "| wm-point | improve | 0.50 | 0.60 | 0.50 | paper | 2 | 1 | 0.500 | 0 | 0.50 | 0.50 | 1 | 0 | 1.000 | 1.000 | 1.000 |"
        in report
    )
    assert report.index("## What-if gates") < report.index("## Plots") and "![whatif_gates.png]" in report
    summary = list(csv.DictReader((audit_dir / "summary.csv").open()))
    point = "improve.threshold=0.5.min_confidence=0.6.bug_threshold=0.5"
    mine = {
        r["metric"]: r for r in summary if r["section"] == "whatif" and r["metric"].startswith(point + ".")
    }
    assert mine[f"{point}.paper_settings"]["value"] == "1"
    assert (mine[f"{point}.would_skip"]["value"], mine[f"{point}.would_skip"]["n"]) == ("1", "2")
    assert mine[f"{point}.hours_saved"]["value"] == "0.5" and mine[f"{point}.recall"]["n"] == "1"
    assert sum(r["metric"].endswith(".paper_settings") for r in summary) == 1
    assert sum(r["section"] == "whatif" for r in summary) == 24 * 9 + 1  # nine measures per row, and the mark
    page = (audit_dir / "index.html").read_text()
    assert 'id="whatif-table"' in page and 'alt="What-if gates"' in page
    assert (audit_dir / "whatif_gates.png").read_bytes().startswith(b"\x89PNG")
    console = buf.getvalue()
    assert "What-if gates at each configuration's settings" in console
    assert console.count("│ wm-point      │ improve │") == 1  # the paper's row only


def test_no_rows_without_ungated_pointwise_predictions(tmp_path: Path) -> None:
    """An ungated dir whose world-model trials have no consulted step: no section, no plot, no rows."""
    out = tmp_path / "u"
    _sweep(out, {"wm-point": []})
    run_audit([out], trial_pages=False)
    assert "What-if" not in (out / "audit" / "report.md").read_text()
    assert not (out / "audit" / "whatif_gates.png").exists()


def test_a_step_is_vetoed_exactly_when_every_candidate_is_rejected() -> None:
    """What the what-if's replay relies on to rank only vetoed steps: `consult` vetoes a step when the
    candidate `rank_pointwise` puts first is rejected, which is when `rejects` rejects every candidate.
    Checked over random steps of one to four candidates (valid or not, with or without a confidence,
    p_improves or p_bug) at random settings; a change of the gate's ranking fails here."""
    rng = random.Random(11)

    def maybe(value: float) -> float | None:
        return None if rng.random() < 0.15 else round(value, 2)

    for _ in range(20_000):
        settings = WorldModelSettings(
            threshold=round(rng.random(), 1),
            min_confidence=round(rng.random(), 1),
            bug_threshold=round(rng.random(), 1),
        )
        predictions = [
            Prediction(
                mode="pointwise", valid=rng.random() > 0.1, p_improves=maybe(rng.random()), p_bug=maybe(rng.random()),
                confidence=maybe(rng.random()), predicted_metric=maybe(rng.random()),
            )
            for _ in range(rng.randint(1, 4))
        ]  # fmt: skip
        order = rank_pointwise(predictions, settings, rng.choice([None, True, False]))
        assert rejects(predictions[order[0]], settings) == all(rejects(p, settings) for p in predictions)
