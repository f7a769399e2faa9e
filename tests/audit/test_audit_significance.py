"""The audit's paired significance end to end: a small sweep with hand-computed sign tests and Holm values,
checked in summary.csv, report.md, index.html and the terminal's tables.

Reads nothing but what it writes: a gated and an ungated output dir (3 configurations × 3 tasks × 2 seeds,
one ungated report missing) and their audit under tmp_path.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from auditkit import tid, write_launch, write_report
from rich.console import Console

from mle_world.audit import audit, run_audit
from mle_world.audit.analysis import baseline_delta_rows
from mle_world.audit.comparisons import compare
from mle_world.audit.stats import paired_bootstrap
from mle_world.cli.display import RichDisplay

CONFIGS = ("aide", "wm-point", "wm-strict")
PAIRS = [(task, seed) for seed in (1, 2) for task in "ABC"]
MEDALS = {  # (regime, configuration) → the (task, seed) pairs that won a medal
    ("gated", "aide"): set(),
    ("gated", "wm-point"): set(PAIRS),
    ("gated", "wm-strict"): {("A", 1)},
    ("ungated", "aide"): {("A", 1), ("B", 1), ("C", 1)},
    ("ungated", "wm-point"): set(),
    ("ungated", "wm-strict"): {("A", 1), ("B", 1), ("C", 1)},
}
MISSING = ("ungated", "wm-strict", "C", 2)
"""Listed but never reported: its pairs are dropped from both comparisons it is in."""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("signif")
    dirs = []
    for regime in ("gated", "ungated"):
        out = root / regime
        write_launch(out, regime, [tid(regime, c, t, s) for c in CONFIGS for t, s in PAIRS])
        for cfg in CONFIGS:
            for task, seed in PAIRS:
                if (regime, cfg, task, seed) != MISSING:
                    medal = "gold" if (task, seed) in MEDALS[(regime, cfg)] else "none"
                    write_report(out, regime, cfg, task, seed, score=0.5, medal=medal)
        dirs.append(out)
    return dirs


# (regime, configuration) → pairs, better, worse, exact p, Holm p (None: in no family), family size.
# gated vs aide: wm-point 6/0 → 2/2^6 = 0.03125, wm-strict 1/0 → 1; Holm m=2: 0.0625, 1.
# ungated vs aide: wm-point 0/3 → 2/2^3 = 0.25, wm-strict 0/0 over 5 pairs (C2 missing) → 1; Holm 0.5, 1.
# gated − ungated: wm-point 6/0 → 0.03125, wm-strict 0/2 over 5 pairs → 2/2^2 = 0.5; Holm max(0.0625, 0.5)
# for the larger; aide 0/3 → 0.25, tested alone.
EXPECTED = {
    ("gated", "wm-point"): (6, 6, 0, 0.03125, 0.0625, 2),
    ("gated", "wm-strict"): (6, 1, 0, 1.0, 1.0, 2),
    ("ungated", "wm-point"): (6, 0, 3, 0.25, 0.5, 2),
    ("ungated", "wm-strict"): (5, 0, 0, 1.0, 1.0, 2),
    ("gated-ungated", "aide"): (6, 0, 3, 0.25, None, 0),
    ("gated-ungated", "wm-point"): (6, 6, 0, 0.03125, 0.0625, 2),
    ("gated-ungated", "wm-strict"): (5, 0, 2, 0.5, 0.5, 2),
}
DIFFS = {  # the pairs' 100 × (this − other) any-medal differences, for the bootstrap and the means
    ("gated-ungated", "wm-strict"): [0.0, -100.0, -100.0, 0.0, 0.0],
    ("ungated", "wm-point"): [-100.0] * 3 + [0.0] * 3,
    ("gated", "wm-strict"): [100.0] + [0.0] * 5,
}


def test_comparisons_have_the_hand_computed_tests_and_the_deltas_pairs(sweep: list[Path]) -> None:
    result = audit(sweep)
    found = {(c.regime, c.configuration): c for c in compare(result.sweep)}
    assert set(found) == set(EXPECTED)
    for key, (pairs, better, worse, p, p_holm, size) in EXPECTED.items():
        c = found[key]
        assert (c.pairs, c.better, c.worse, c.family_size) == (pairs, better, worse, size), key
        assert c.p_value == pytest.approx(p), key
        assert c.p_holm == (None if p_holm is None else pytest.approx(p_holm)), key
    assert found[("gated", "wm-point")].interval == (100.0, 100.0)  # every pair +100: a point
    for key, diffs in DIFFS.items():
        assert found[key].interval == paired_bootstrap(diffs)
        assert found[key].delta.mean == pytest.approx(sum(diffs) / len(diffs))
    # The same pairs as the Δ columns the audit already showed
    for row in baseline_delta_rows(result.sweep):
        assert found[(row.regime, row.configuration)].delta == row.delta
    for delta in result.deltas:
        assert found[("gated-ungated", delta.configuration)].delta == delta.deltas["any_medal"]


@pytest.fixture(scope="module")
def audited(sweep: list[Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("signif-audit")
    console = io.StringIO()
    display = RichDisplay(Console(file=console, width=200))
    assert run_audit(sweep, display=display, out_dir=out, plots=False) == 0
    return out, console.getvalue()


def test_summary_csv_has_a_significance_row_per_comparison_and_metric(audited: tuple[Path, str]) -> None:
    out, _ = audited
    with open(out / "summary.csv", newline="") as handle:
        rows = {
            (r["regime"], r["configuration"], r["metric"]): (r["value"], r["sem"], r["n"])
            for r in csv.DictReader(handle)
            if r["section"] == "significance"
        }
    assert {(regime, cfg) for regime, cfg, _ in rows} == set(EXPECTED)
    assert rows[("gated", "wm-point", "sign_test_p")] == ("0.03125", "", "6")  # n: discordant pairs
    assert rows[("gated", "wm-point", "sign_test_p_holm")] == ("0.0625", "", "2")  # n: the family's size
    assert rows[("gated", "wm-point", "any_medal_ci95_low")] == ("100.0", "", "6")
    assert rows[("gated", "wm-point", "discordant_better")] == ("6", "", "6")
    assert rows[("gated-ungated", "aide", "sign_test_p_holm")] == ("", "", "")  # tested alone
    assert rows[("gated-ungated", "wm-strict", "discordant_worse")] == ("2", "", "5")
    # −40 ± sd(0, −100, −100, 0, 0) / √5 = 54.772 / 2.236 = 24.495
    assert rows[("gated-ungated", "wm-strict", "any_medal_delta")] == ("-40.0", "24.494897", "5")
    low, high = paired_bootstrap(DIFFS[("gated-ungated", "wm-strict")])
    assert low is not None and high is not None
    assert rows[("gated-ungated", "wm-strict", "any_medal_ci95_low")][0] == repr(round(low, 6))
    assert rows[("gated-ungated", "wm-strict", "any_medal_ci95_high")][0] == repr(round(high, 6))


def test_report_index_and_terminal_show_intervals_and_p_values(audited: tuple[Path, str]) -> None:
    out, console = audited
    report = (out / "report.md").read_text()
    assert "## Any medal" in report
    # wm-point: gated 6/6 medals, Δ aide +100 over 6 pairs, p 0.031 (Holm 0.062); ungated 0/6; gated−ungated
    # +100 ± 0 (6), p 0.031 (0.062).
    assert (
        "| wm-point | 100.0 ± 0.0 | 2/2 | +100.0 ± 0.0 (6) | \\[+100.0, +100.0\\] | 0.031 (0.062) "
        "| 0.0 ± 0.0 | 2/2 | -50.0 ± 22.4 (6) |"
    ) in report
    assert "| aide | 0.0 ± 0.0 | 2/2 | baseline |  |  |" in report
    assert re.search(r"\| aide \|[^\n]*\| -50\.0 ± 22\.4 \(6\) \| \\\[[^|]*\] \| 0\.250 \(–\) \|\n", report)
    assert "| gated-ungated | wm-strict | ungated | 5 | -40.0 ± 24.5 |" in report
    assert "| 0/2 | 0.500 | 0.500 | 2 |" in report
    page = (out / "index.html").read_text()
    headline = page.split('id="headline-table"')[1].split("</table>")[0]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", headline)
    row = cells[cells.index("wm-point") :][:14]
    assert row[3:6] == ["+100.0 ± 0.0 (6)", "[+100.0, +100.0]", "0.031 (0.062)"]
    assert row[11:14][0] == "+100.0 ± 0.0 (6)" and row[13] == "0.031 (0.062)"
    assert '<td class="pos">[+100.0, +100.0]</td>' in headline  # an interval without 0 is coloured
    assert 'id="comparisons-table"' in page and "Holm-adjusted" in page
    assert "Any medal: paired comparisons" in console and "0.03125" not in console
    assert re.search(r"gated-ungated\s*│\s*wm-point\s*│\s*ungated\s*│\s*6\s*│\s*\+100\.0 ± 0\.0", console)
