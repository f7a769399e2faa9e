"""The audit's per-trial cost totals equal the sums over `costs.summary.read_cost_rows`' rows, for plain cost
CSVs (read on a fast path) and for every kind of file that path hands to the csv module.

Reads nothing; writes cost CSVs under tmp_path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mle_world.audit.cache import open_parsed_inputs
from mle_world.audit.sweep_costs import read_cost_totals
from mle_world.costs.summary import read_cost_rows, summarise_cost_rows

HEADER = "trial_id,role,cost_usd,prompt_tokens,completion_tokens,gpu_hours"
FILES: dict[str, bytes] = {
    "a.plain.csv": f"{HEADER}\nt1,coder,0.25,100,10,\nt1,world,0.5,1000,20,0.1\n".encode(),
    "b.unknown.csv": f"{HEADER}\nt2,coder,,5,5,\nt2,world,1.5,7.0,1,0.2\n".encode(),
    "c.crlf.csv": f"{HEADER}\r\nt3,coder,0.1,1,1,\r\n\r\nt3,world,0.2,2,2,0.5\r\n".encode(),
    "d.quoted.csv": f'{HEADER}\n"t4",coder,"0.3","1,0",2,\n'.replace('"1,0"', "10").encode(),
    "e.comma-in-quotes.csv": f'{HEADER},model\nt5,coder,0.3,1,2,,"a,b"\n'.encode(),
    "f.short-row.csv": f"{HEADER}\nt6,coder\nt6,world,0.4,1,1,0.1\n".encode(),
    "g.long-row.csv": f"{HEADER}\nt7,coder,0.4,1,1,0.1,extra,cells\n".encode(),
    "h.no-cost-column.csv": b"trial_id,role\nt8,coder\n",
    "i.blank-first-line.csv": f"\n{HEADER}\nt9,coder,0.1,1,1,\n".encode(),
    "j.repeated-column.csv": b"trial_id,role,cost_usd,cost_usd\nt10,coder,0.1,0.7\n",
    "k.bad-utf8.csv": f"{HEADER}\nt11,coder,0.1,1,1,\n".encode() + b"t11,world,\xff,1,1,\n",
    "l.nul.csv": f"{HEADER}\nt12,coder,0.1,1,1,\n".encode() + b"t12,wo\0rld,0.1,1,1,\n",
    "m.empty.csv": b"",
    "n.blank-lines.csv": f"{HEADER}\n\n\nt13,coder,0.1,1,1,\n\n".encode(),
    "o.spaces.csv": f"{HEADER}\nt14,coder, 0.5 ,1,1,\n".encode(),
}


def reference(costs_dir: Path) -> tuple[dict[Any, tuple[float, bool, int, float]], list[str]]:
    """What the audit summed before the fast path: read_cost_rows' dicts, added up per trial."""
    rows, bad = read_cost_rows(costs_dir)
    totals: dict[Any, list[Any]] = {}
    for row in rows:
        total = totals.setdefault(row["trial_id"], [0.0, True, 0, 0.0])
        cost = row.get("cost_usd", "")
        if cost in ("", None):
            total[1] = False
        else:
            total[0] += float(cost)
        for column in ("prompt_tokens", "completion_tokens"):
            if row.get(column):
                total[2] += int(float(row[column]))
        if row.get("gpu_hours"):
            total[3] += float(row["gpu_hours"])
    return {k: tuple(v) for k, v in totals.items()}, bad  # type: ignore[misc]


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_kind_of_cost_file_sums_as_before(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(FILES[name])
    totals, bad = read_cost_totals(str(tmp_path))
    got = {k: (t.cost, t.known, t.tokens, t.gpu) for k, t in totals.items()}
    assert (got, bad) == reference(tmp_path)


def test_a_folder_of_them_sums_as_before(tmp_path: Path) -> None:
    for name, data in FILES.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "summary.csv").write_text(f"{HEADER}\nnot,a,trial,,,\n")  # costs/summary.csv is skipped
    totals, bad = read_cost_totals(str(tmp_path))
    got = {k: (t.cost, t.known, t.tokens, t.gpu) for k, t in totals.items()}
    expected, expected_bad = reference(tmp_path)
    assert (got, bad) == (expected, expected_bad)
    assert got["t1"] == (0.75, True, 1130, 0.1) and got["t2"][1] is False
    assert "h.no-cost-column.csv" in bad and "k.bad-utf8.csv" in bad and "m.empty.csv" in bad


def test_odd_entries_sum_as_before(tmp_path: Path) -> None:
    """A directory, a symlink and a dangling symlink named like cost CSVs (read_stamped declines some)."""
    (tmp_path / "a.plain.csv").write_bytes(FILES["a.plain.csv"])
    (tmp_path / "b.dir.csv").mkdir()
    (tmp_path / "c.link.csv").symlink_to(tmp_path / "a.plain.csv")
    (tmp_path / "d.dangling.csv").symlink_to(tmp_path / "nowhere.csv")
    (tmp_path / "e.big.csv").write_bytes(FILES["a.plain.csv"] + b"t1,world,0.5,1000,20,0.1\n" * 20_000)
    totals, bad = read_cost_totals(str(tmp_path))
    got = {k: (t.cost, t.known, t.tokens, t.gpu) for k, t in totals.items()}
    assert (got, bad) == reference(tmp_path)
    assert bad == ["b.dir.csv", "d.dangling.csv"]


@pytest.mark.parametrize("quoted", [False, True], ids=["plain", "csv-module"])
def test_cells_that_are_not_finite_numbers_are_unknown(tmp_path: Path, quoted: bool) -> None:
    """A cost, token count or GPU-hours cell that is not a finite number is unknown, and so is the trial's
    total of it (never a NaN or inf in the audit); neither may stop the audit. `costs.summary` sums what
    it can read."""
    trial = '"t20"' if quoted else "t20"
    text = f"{HEADER}\n{trial},coder,abc,x,1e400,zz\n{trial},world,0.5,10,5,0.1\n{trial},feedback,0.25,nan,2,inf\n"
    (tmp_path / "t20.csv").write_text(text)
    totals, bad = read_cost_totals(str(tmp_path))
    assert bad == []
    total = totals["t20"]
    assert (total.known, total.cost, total.tokens_known, total.gpu_known) == (False, 0.75, False, False)
    assert (total.tokens, total.gpu) == (15, 0.1)  # what the rows that know them add up to

    rows, _ = read_cost_rows(tmp_path)
    summary = {row.role: row for row in summarise_cost_rows(rows)}
    assert summary["coder"].cost_usd is None and summary["coder"].prompt_tokens is None
    assert summary["coder"].completion_tokens is None  # 1e400 is no count
    assert summary["world"].prompt_tokens == 10 and summary["world"].cost_usd == 0.5


def test_kept_entries_sum_as_a_first_read(tmp_path: Path) -> None:
    """A re-audit's totals from the kept entries (a file of one trial kept as its total, others as rows)
    equal a first read's, also for a trial whose rows are in two files and for unreadable files."""
    costs, audit_dir = tmp_path / "costs", tmp_path / "audit"
    costs.mkdir()
    audit_dir.mkdir()
    for name, data in FILES.items():
        (costs / name).write_bytes(data)
    (costs / "p.t1-again.csv").write_text(f"{HEADER}\nt1,coder,0.1,1,1,0.3\n")  # t1's rows in two files
    (costs / "q.two-trials.csv").write_text(f"{HEADER}\nt30,coder,0.1,1,1,\nt31,coder,0.2,2,2,\n")
    first = open_parsed_inputs(audit_dir)
    fresh = read_cost_totals(str(costs), first)
    assert fresh == read_cost_totals(str(costs))
    first.save()
    again = open_parsed_inputs(audit_dir)
    assert read_cost_totals(str(costs), again) == fresh
    assert again.read == 0  # every entry used (p.t1-again.csv's rows read again: t1's total began in a.)
    assert fresh[0]["t1"].cost == 0.25 + 0.5 + 0.1 and fresh[0]["t1"].gpu == 0.1 + 0.3
    entries = again.entries["cost"]
    assert len(entries[str(costs / "a.plain.csv")][1]) == 3  # (readable, trial id, total)
    assert len(entries[str(costs / "q.two-trials.csv")][1]) == 2  # (readable, rows)
