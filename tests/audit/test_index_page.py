"""index.html of the audit: the headline against aide, calibration per stage and mode, trial links, escaping."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest
from auditkit import prediction, tid, write_events, write_launch, write_report, write_status
from rich.console import Console

from mle_world.agent.journal import Checkpoint, Node, save_checkpoint
from mle_world.audit import audit, run_audit
from mle_world.audit.analysis import baseline_delta_rows, calibration_rows
from mle_world.audit.pages import trial_page_name
from mle_world.cli.display import RichDisplay

HOSTILE = "<script>alert(1)</script>"
MEDALS = {  # gated (configuration, task, seed) → medal
    ("aide", "A", 1): "gold", ("aide", "B", 1): "none", ("aide", "A", 2): "none", ("aide", "B", 2): "none",
    ("wm-point", "A", 1): "gold", ("wm-point", "B", 1): "silver", ("wm-point", "A", 2): "bronze",
    ("wm-point", "B", 2): "none",
}  # fmt: skip


def journal(trial_dir: Path, plan: str) -> None:
    nodes = [Node(id="a" * 32, step=0, stage="draft", plan=plan, executed=True, metric=0.5)]
    save_checkpoint(trial_dir / "journal.json", Checkpoint(trial_id="x", science_hash="h", nodes=nodes))


@pytest.fixture
def sweep(tmp_path: Path) -> tuple[Path, Path]:
    g, u = tmp_path / "gated", tmp_path / "ungated"
    write_launch(g, "gated", [tid("gated", c, t, s) for c, t, s in MEDALS])
    for (cfg, task, seed), medal in MEDALS.items():
        write_report(g, "gated", cfg, task, seed, score=0.5, medal=medal)
    write_status(g, "gated", "aide", "B", 2, "failed", f"agent said {HOSTILE}")
    journal(g / "runs" / "aide" / "A_seed1", f"plan {HOSTILE}")
    journal(g / "runs" / "wm-point" / "A_seed1", "plan")
    (g / "runs" / "aide" / "A_seed1" / "result.json").write_text(json.dumps({
        "trial_id": tid("gated", "aide", "A", 1), "status": "completed", "stop_reason": "max_steps",
        "steps": 5, "executed": 5,
    }))  # fmt: skip
    write_launch(u, "ungated", [tid("ungated", "wm-point", "A", 1)])
    write_report(u, "ungated", "wm-point", "A", 1, score=0.5)
    write_events(
        u, "wm-point", "A", 1,
        [prediction("not_gated", 0.9, True, actual_buggy=False, p_bug=0.2),
         prediction("not_gated", 0.2, False, actual_buggy=True, p_bug=0.6),
         prediction("not_gated", 0.6, False, stage="draft", mode="pairwise")],
    )  # fmt: skip
    return g, u


def test_baseline_deltas_and_calibration_per_stage_and_mode(sweep: tuple[Path, Path]) -> None:
    result = audit(list(sweep))
    (row,) = baseline_delta_rows(result.sweep)
    # wm-point − aide per (task, seed): A1 0, B1 +100, A2 +100, B2 0 → 50 ± sqrt(10000/3)/2
    assert (row.regime, row.configuration, row.pairs) == ("gated", "wm-point", 4)
    assert row.delta.mean == 50.0 and row.delta.sem == pytest.approx((10000 / 3) ** 0.5 / 2)
    rows = {(c.stage, c.mode): c for c in calibration_rows(result.sweep)}
    assert set(rows) == {("draft", "pairwise"), ("improve", "pointwise")}
    # improve/pointwise: p [.9, .2] vs [T, F] → (0.01 + 0.04) / 2; p_bug [.2, .6] vs [F, T] → (0.04 + 0.16) / 2
    improve = rows[("improve", "pointwise")]
    assert improve.labelled == 2 and improve.brier == pytest.approx(0.025) and improve.accuracy == 1.0
    assert improve.bug_brier == pytest.approx(0.1)
    assert rows[("draft", "pairwise")].brier == pytest.approx(0.36)


def run(sweep: tuple[Path, Path], out: Path) -> str:
    console = Console(file=io.StringIO(), width=200)
    assert run_audit(list(sweep), display=RichDisplay(console), out_dir=out, plots=False) == 0
    return (out / "index.html").read_text()


def test_index_shows_headline_trials_and_links_that_resolve(sweep: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "audit"
    page = run(sweep, out)
    assert "<title>Sweep report</title>" in page
    text = re.sub(r"<[^>]+>", "", page)
    assert "+50.0 ± 28.9 (4)" in text  # Δ aide of gated wm-point
    assert "+100.0 ± 0.0 (1)" in text  # Δ gated − ungated of wm-point (A1: gold vs none)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page.split('id="budget-table"')[1].split("</table>")[0])
    assert cells[:8] == [
        "gated",
        "aide",
        "1/4",  # 1 of 4 with result.json (the 4 alone read as 4 trials stopped by max_steps 1)
        "1",
        "0",
        "0",
        "5.0 ± 0.0",
        "5.0 ± 0.0",
    ]  # 1 of 4 with result.json
    assert 'id="brier-table"' in page and "0.0250" in page and "0.3600" in page
    assert "9 trials; 2 with a page." in page
    links = re.findall(r'href="([^"#]+)"', page)
    assert sorted(links) == sorted(
        f"trials/{trial_page_name(t)}" for t in ("gated/aide/A/seed1", "gated/wm-point/A/seed1")
    )
    for link in links:
        target = out / link
        assert target.is_file() and 'href="../index.html"' in target.read_text()
    # Nothing is fetched at view time and untrusted text stays text.
    for text in [page, *((out / link).read_text() for link in links)]:
        assert not re.search(r'(src|href)="(https?:)?//', text)
        assert "<script" not in text
    assert "agent said &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "plan &lt;script&gt;" in (out / links[0]).read_text()


def test_trial_pages_are_redrawn_only_when_their_files_change(
    sweep: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "audit"
    run(sweep, out)
    pages = {
        name: out / "trials" / trial_page_name(name)
        for name in ("gated/aide/A/seed1", "gated/wm-point/A/seed1")
    }
    for path in pages.values():
        os.utime(path, ns=(3 * 10**18, 3 * 10**18))  # far newer than any input (year 2065)
    changed = sweep[0] / "runs" / "wm-point" / "A_seed1" / "journal.json"
    journal(changed.parent, "a new plan")
    os.utime(changed, ns=(4 * 10**18, 4 * 10**18))
    run(sweep, out)
    assert pages["gated/aide/A/seed1"].stat().st_mtime_ns == 3 * 10**18
    assert "a new plan" in pages["gated/wm-point/A/seed1"].read_text()


def test_no_trial_pages(sweep: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "audit"
    console = Console(file=io.StringIO())
    run_audit(list(sweep), display=RichDisplay(console), out_dir=out, plots=False, trial_pages=False)
    assert not (out / "trials").exists() and "0 with a page" in (out / "index.html").read_text()
