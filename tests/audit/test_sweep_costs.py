"""A trial's cost total is taken from its digest with the trial only while its cost CSV is unchanged and holds
that trial's rows alone; costs/ is read for the rest, and every trial's totals are those an audit without
digests gives, to the last bit: rows of a trial in another CSV (before or after its own in file order), a
CSV whose rows are another trial's, a CSV rewritten since its digest, and a CSV that is unreadable.

Reads nothing; writes small synthetic sweeps (tests/support/synthetic.py, with their trials' digests gathered
as a launch leaves them) under tmp_path.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from synthetic import make_sweep

from mle_world import layout
from mle_world.audit.cache import open_parsed_inputs
from mle_world.audit.collect import load_sweep
from mle_world.audit.digest import write_trial_digest
from mle_world.audit.digest_files import gather_digests
from mle_world.audit.sweep_costs import read_cost_totals

HEADER = (
    "trial_id,regime,configuration,task,seed,role,model,calls,calls_unknown_usage,prompt_tokens,"
    "completion_tokens,llm_seconds,exec_seconds,gpu_hours,pricing,cost_usd,prices_version,bad_event_lines\n"
)


def costs_of(dirs: list[Path], digests: bool = True) -> tuple[dict[str, tuple[object, ...]], list[str], int]:
    """Each trial's cost fields, the sweep's problems and how many files the collection read."""
    parsed = open_parsed_inputs(None) if digests else None
    sweep = load_sweep(dirs, parsed)
    fields = {
        t.trial_id: (t.has_costs, t.cost_known, t.cost_usd, t.tokens, t.gpu_hours) for t in sweep.trials
    }
    return fields, sweep.problems, parsed.read if parsed is not None else -1


def without_digests(dirs: list[Path], tmp_path: Path) -> tuple[dict[str, tuple[object, ...]], list[str]]:
    """What the collection of a copy of `dirs` without any digest gives (the problems name the copy's paths,
    so they are compared by name)."""
    copies = []
    for directory in dirs:
        copy = tmp_path / "bare" / directory.name
        shutil.copytree(directory, copy)
        for digest in [
            *copy.glob(f"runs/*/*{layout.AUDIT_DIGEST_SUFFIX}"),
            *copy.glob("runs/*/audit-digests.tsv"),
        ]:
            digest.unlink()
        copies.append(copy)
    fields, problems, _ = costs_of(copies, digests=False)
    return fields, [p.replace(str(tmp_path / "bare"), "") for p in problems]


def trial_with_costs(dirs: list[Path]) -> tuple[Path, str, Path]:
    """A trial dir with a digest and a cost CSV of its own: (dir, trial id, cost CSV)."""
    for report in sorted(dirs[0].glob(f"runs/*/*{layout.REPORT_SUFFIX}")):
        trial = report.with_name(report.name.removesuffix(layout.REPORT_SUFFIX))
        task, _, seed = trial.name.rpartition("_seed")
        csv = layout.cost_path(dirs[0], trial.parent.name, task, int(seed))
        if trial.is_dir() and csv.is_file():
            return trial, f"gated/{trial.parent.name}/{task}/seed{seed}", csv
    raise AssertionError("no trial with a dir and costs")


def same(dirs: list[Path], tmp_path: Path) -> dict[str, tuple[object, ...]]:
    fields, problems, _ = costs_of(dirs)
    bare = without_digests(dirs, tmp_path)
    assert fields == bare[0]
    assert [p.replace(str(dirs[0].parent), "") for p in problems] == bare[1]
    return fields


def test_the_cost_csvs_of_a_sweep_with_digests_are_not_read_and_total_the_same(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 200, events=True, seed=4)
    fields, _, read = costs_of(dirs)
    assert read == 0
    assert sum(1 for f in fields.values() if f[0]) > 150  # most trials have costs, all taken with the trial
    assert fields == same(dirs, tmp_path)


@pytest.mark.parametrize("extra", ["0-first.csv", "zz-last.csv"])
def test_rows_of_a_trial_in_another_csv_add_up_in_file_order(tmp_path: Path, extra: str) -> None:
    dirs = make_sweep(tmp_path / "sweep", 120, events=True, seed=5)
    _, trial_id, _ = trial_with_costs(dirs)
    cfg, task, seed = trial_id.split("/")[1], trial_id.split("/")[2], trial_id.rpartition("seed")[2]
    row = f"{trial_id},gated,{cfg},{task},{seed},coder,m,1,0,7,3,1.0,,0.1,x,{{}},1@x,0\n"
    # Costs whose float sum depends on the order the rows are added in.
    (layout.costs_dir(dirs[0]) / extra).write_text(HEADER + row.format(0.1) + row.format(0.7))
    fields = same(dirs, tmp_path)
    assert fields[trial_id][2] not in (None, 1.0) and fields[trial_id][3] == 4 * 1100 + 20


def test_a_csv_of_another_trials_rows_and_one_rewritten_since_its_digest(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 120, events=True, seed=6, gathered=False)
    trial, trial_id, csv = trial_with_costs(dirs)
    # Its CSV now holds another trial's rows, and its digest (written again) says so.
    other = next(p for p in sorted(csv.parent.glob("*.csv")) if p != csv)
    shutil.copyfile(other, csv)
    assert write_trial_digest(trial, csv) is not None
    # Another trial's CSV rewritten after its digest: its entry's stamp no longer matches.
    later = next(p for p in sorted(csv.parent.glob("*.csv")) if p not in (csv, other))
    later.write_text(later.read_text().replace(",0.25,", ",0.5,"))
    gather_digests(dirs[0])
    fields, _, read = costs_of(dirs)
    # Its CSV (the other trial's rows, not taken) and the rewritten one, read; then, as the other trial's rows
    # are in two CSVs, those two and the other trial's own, read in file order: and no other file.
    assert read == 4
    assert fields[trial_id][0] is False  # its CSV's rows are the other trial's
    assert fields == same(dirs, tmp_path)


def test_an_unreadable_csv_is_a_problem_with_digests_as_without(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 120, events=True, seed=7)
    _, _, csv = trial_with_costs(dirs)
    csv.write_bytes(csv.read_bytes()[:-30] + b"\xff\xfe")
    _, problems, _ = costs_of(dirs)
    assert any(p.endswith(f"{csv.name}: unreadable cost CSV") for p in problems)
    same(dirs, tmp_path)


def test_read_cost_totals_skips_the_names_it_is_given(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 60, events=False, seed=8, digests=False)
    costs = layout.costs_dir(dirs[0])
    names = sorted(p.name for p in costs.glob("*.csv"))
    every, _ = read_cost_totals(str(costs))
    some, _ = read_cost_totals(str(costs), None, set(names[1:]))
    assert len(every) == len(names) and len(some) == 1 and some.items() <= every.items()
