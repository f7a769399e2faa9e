"""A re-audit whose inputs, flags and harness are unchanged shows and keeps what the last audit computed
(nothing read or computed); anything else that changed makes it compute again, and give what a fresh
audit gives.

Reads nothing; writes small synthetic sweeps (journals, statuses, a missing, a corrupt and an unexpected
report) and their audit dirs under tmp_path.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from synthetic import add_irregularities, make_sweep

import mle_world.audit as audit_package
from mle_world import layout
from mle_world.audit import memo, run_audit
from mle_world.audit.cache import stamp_of
from mle_world.cli.display import RichDisplay
from mle_world.launch.display import PlainDisplay

OUTPUTS = ("summary.csv", "report.md", "index.html")


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many audits computed (read the sweep) so far; the sweep's files are trusted however new."""
    # The sweeps here were written just now: a memo trusts files unchanged since the audit began.
    monkeypatch.setattr(memo, "SETTLED_NS", 0)
    calls = [0]
    real = audit_package.load_sweep

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(audit_package, "load_sweep", counted)
    return calls


def sweep(root: Path, n: int = 250, gathered: bool = True) -> list[Path]:
    dirs = make_sweep(root, n, events=True, seed=4, gathered=gathered)
    add_irregularities(dirs, seed=4)
    return dirs


def audited(dirs: list[Path], out: Path, **flags: Any) -> dict[str, str]:
    """What the audit writes and shows (its exit code under --strict among them)."""
    buf = io.StringIO()
    flags.setdefault("draw_plots", False)  # PNGs drawn cost most of a small audit; one test draws them
    code = run_audit(dirs, out_dir=out, display=PlainDisplay(buf), strict=True, **flags)
    files = {name: (out / name).read_text() for name in OUTPUTS}
    return {**files, "shown": buf.getvalue(), "code": str(code)}


def fresh(dirs: list[Path], tmp_path: Path, name: str, **flags: Any) -> dict[str, str]:
    """A fresh audit's outputs, its `wrote` line naming the dir it was asked for."""
    out = audited(dirs, tmp_path / name, **flags)
    out["shown"] = out["shown"].replace(str(tmp_path / name), str(tmp_path / "audit"))
    return out


def test_a_memoised_re_audit_writes_and_shows_what_a_computed_one_does(
    tmp_path: Path, computed: list[int]
) -> None:
    dirs = sweep(tmp_path / "sweep")
    out = tmp_path / "audit"
    first = audited(dirs, out)
    assert computed[0] == 1 and (out / memo.NAME).is_file()
    assert first["code"] == "1"  # the corrupt and missing reports: --strict's exit is kept too
    again = audited(dirs, out)
    assert computed[0] == 1  # shown from the memo: nothing read
    assert again == first
    (out / memo.NAME).unlink()
    assert audited(dirs, out) == first  # computed again, the same
    assert computed[0] == 2
    assert fresh(dirs, tmp_path, "fresh") == first


def test_the_cli_prints_the_same_tables_from_the_memo(tmp_path: Path, computed: list[int], cli: Any) -> None:
    dirs = sweep(tmp_path / "sweep", 250)
    argv = ("audit", *map(str, dirs), "--out", str(tmp_path / "audit"), "--no-trial-pages")
    first = cli.run(*argv, cwd=tmp_path)
    again = cli.run(*argv, cwd=tmp_path)
    assert computed[0] == 1
    assert first.returncode == again.returncode == 0 and again.stdout == first.stdout
    assert "Completeness" in again.stdout and "wrote " in again.stdout


def test_a_rich_display_shows_the_memo_as_it_showed_the_audit(tmp_path: Path, computed: list[int]) -> None:
    dirs = sweep(tmp_path / "sweep", 250)
    shown = []
    for _ in range(2):
        buf = io.StringIO()
        run_audit(dirs, out_dir=tmp_path / "audit", display=RichDisplay(Console(file=buf, width=120)))
        shown.append(buf.getvalue())
    assert computed[0] == 1 and shown[0] == shown[1]


def _replace(path: Path, text: str) -> None:
    """Rewrite a file the way the harness does (a new file renamed over it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _report(dirs: list[Path]) -> Path:
    return sorted(dirs[0].glob("runs/wm-point/*_grading_report.json"))[-1]


def _rescore(dirs: list[Path]) -> None:
    path = _report(dirs)
    data = json.loads(path.read_text())
    data.update(score=0.99, any_medal=True, gold_medal=True, silver_medal=False, bronze_medal=False)
    _replace(path, json.dumps(data))


def _append_event(dirs: list[Path]) -> None:
    events = sorted(p for d in dirs for p in d.glob("runs/*/*/events.jsonl"))[0]
    line = events.read_text().splitlines()[0]
    with events.open("a") as handle:  # the agent appends: no new inode, no rename in the dir
        handle.write(line.replace('"p_improves": ', '"p_improves": 0.5 * 0 + ') + "\n")  # a bad line
        handle.write(line + "\n")


def _status_in_place(dirs: list[Path]) -> None:
    # Written in place (not renamed): only the file's own stamp shows it (one stat'ed after the read).
    status = sorted(dirs[0].glob("runs/*/*/status.json"))[0]
    data = json.loads(status.read_text())
    data.update(state="failed", cause="a much longer cause than before", failure_class="agent")
    with status.open("r+") as handle:
        handle.write(json.dumps(data))


def _add_report(dirs: list[Path]) -> None:
    (dirs[1] / "runs" / "aide" / "another_seed7_grading_report.json").write_text(_report(dirs).read_text())


def _add_cost_file(dirs: list[Path]) -> None:
    costs = sorted((dirs[0] / "costs").glob("*.csv"))
    (dirs[0] / "costs" / "zz.extra.csv").write_text(costs[0].read_text())  # the trial's rows twice


def _remove_cost_file(dirs: list[Path]) -> None:
    sorted((dirs[0] / "costs").glob("*.csv"))[0].unlink()


def _remove_report(dirs: list[Path]) -> None:
    _report(dirs).unlink()


def _remove_launch(dirs: list[Path]) -> None:
    (dirs[1] / "launch.json").unlink()


CHANGES: dict[str, Callable[[list[Path]], None]] = {
    "a report rewritten": _rescore,
    "events.jsonl appended to": _append_event,
    "status.json written in place": _status_in_place,
    "a report added": _add_report,
    "a cost file added": _add_cost_file,
    "a cost file removed": _remove_cost_file,
    "a report removed": _remove_report,
    "launch.json removed": _remove_launch,
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_changed_added_or_removed_input_is_audited_again(
    tmp_path: Path, computed: list[int], change: str
) -> None:
    dirs = sweep(tmp_path / "sweep")
    out = tmp_path / "audit"
    first = audited(dirs, out)
    assert audited(dirs, out) == first and computed[0] == 1
    CHANGES[change](dirs)
    changed = audited(dirs, out)
    assert computed[0] == 2
    assert changed != first
    assert changed == fresh(dirs, tmp_path, "fresh")
    assert audited(dirs, out) == changed and computed[0] == 3  # the fresh audit, not this one's
    assert audited(dirs, out) == changed and computed[0] == 3  # memo kept again


def test_a_recorded_trial_dir_that_appears_is_audited_again(tmp_path: Path, computed: list[int]) -> None:
    """launch.json may record a trial dir outside the canonical layout; while it is absent the trial is
    read from the canonical dir, and once it appears from it: its absence is one of the memo's inputs."""
    dirs = sweep(tmp_path / "sweep")
    launch = dirs[0] / "launch.json"
    data = json.loads(launch.read_text())
    trial = next(t for t in data["trials"] if (dirs[0] / t["trial_dir"] / "status.json").is_file())
    canonical = dirs[0] / trial["trial_dir"]
    trial["trial_dir"] = f"elsewhere/{canonical.name}"
    _replace(launch, json.dumps(data))
    out = tmp_path / "audit"
    first = audited(dirs, out)
    assert audited(dirs, out) == first and computed[0] == 1
    moved = dirs[0] / trial["trial_dir"]
    moved.parent.mkdir()
    moved.mkdir()
    status = json.loads((canonical / "status.json").read_text())
    status.update(state="failed", cause="the recorded dir's own status", failure_class="agent")
    (moved / "status.json").write_text(json.dumps(status))
    changed = audited(dirs, out)
    assert computed[0] == 2 and changed != first
    assert changed == fresh(dirs, tmp_path, "fresh")


@pytest.mark.parametrize(
    "flags", [{"pad_missing": True}, {"trial_pages": False}, {"draw_plots": True}, {"plots": False}]
)
def test_a_changed_flag_is_audited_again(tmp_path: Path, computed: list[int], flags: dict[str, bool]) -> None:
    dirs = sweep(tmp_path / "sweep", 250)
    out = tmp_path / "audit"
    audited(dirs, out)
    audited(dirs, out)
    assert computed[0] == 1
    flagged = audited(dirs, out, **flags)
    assert computed[0] == 2
    (out / memo.NAME).unlink()  # (--no-plots keeps the PNGs drawn before: not what a fresh dir has)
    assert audited(dirs, out, **flags) == flagged and computed[0] == 3
    assert audited(dirs, out, **flags) == flagged and computed[0] == 3


def test_another_harness_version_or_code_is_audited_again(
    tmp_path: Path, computed: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = sweep(tmp_path / "sweep", 250)
    out = tmp_path / "audit"
    first = audited(dirs, out)
    monkeypatch.setattr(memo, "__version__", "0.0.0+other")
    assert audited(dirs, out) == first and computed[0] == 2
    assert audited(dirs, out) == first and computed[0] == 2
    package = Path(memo.__file__).parents[1]
    code = sorted(package.rglob("*.py"))
    real = Path.read_bytes

    def edited(path: Path) -> bytes:  # as if one module of the harness had changed since
        data = real(path)
        return data + b"\n# edited\n" if path == code[0] else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert audited(dirs, out) == first and computed[0] == 3


def test_an_output_changed_or_removed_is_written_again(tmp_path: Path, computed: list[int]) -> None:
    dirs = sweep(tmp_path / "sweep", 250)
    out = tmp_path / "audit"
    first = audited(dirs, out, draw_plots=True)
    (out / "report.md").write_text("edited by hand\n")
    assert audited(dirs, out, draw_plots=True) == first and computed[0] == 2
    next(out.glob("*.png")).unlink()
    assert audited(dirs, out, draw_plots=True) == first and computed[0] == 3
    for page in (out / "trials").iterdir():
        page.unlink()
    assert audited(dirs, out, draw_plots=True) == first and computed[0] == 4
    assert any((out / "trials").iterdir())


def test_no_memo_trusts_an_input_that_changed_as_the_audit_began(
    tmp_path: Path, computed: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = sweep(tmp_path / "sweep", 250)
    out = tmp_path / "audit"
    # Every file stat'ed after it was read counts as changed since the audit began (as a file being
    # written while the audit reads it would): none of its stamps is trusted, no memo is kept.
    monkeypatch.setattr(memo, "SETTLED_NS", 10**18)
    first = audited(dirs, out)
    assert not (out / memo.NAME).exists()
    assert audited(dirs, out) == first and computed[0] == 2


@pytest.mark.parametrize("garbage", [b"garbage", b'{"key": 1}', b"[]"])
def test_an_unreadable_memo_is_computed_again(tmp_path: Path, computed: list[int], garbage: bytes) -> None:
    dirs = sweep(tmp_path / "sweep", 250)
    out = tmp_path / "audit"
    first = audited(dirs, out)
    data = json.loads((out / memo.NAME).read_text())
    data["shown"] = [["table", "x"]]  # the right key, a malformed call
    (out / memo.NAME).write_text(json.dumps(data))
    assert audited(dirs, out) == first and computed[0] == 2
    (out / memo.NAME).write_bytes(garbage)
    assert audited(dirs, out) == first and computed[0] == 3


@pytest.mark.parametrize("name", [f"*{layout.AUDIT_DIGEST_SUFFIX}", layout.GATHERED_DIGESTS])
def test_a_trial_digest_is_stamped_as_it_was_read_and_one_rewritten_since_is_computed_again(
    tmp_path: Path, computed: list[int], name: str
) -> None:
    # Each trial's own digest (none gathered), or each configuration's gathered digests.
    dirs = sweep(tmp_path / "sweep", 250, gathered=name == layout.GATHERED_DIGESTS)
    found = sorted(p for d in dirs for p in d.glob(f"runs/*/{name}"))
    assert len(found) > (50 if name != layout.GATHERED_DIGESTS else 7)
    out = tmp_path / "audit"
    first = audited(dirs, out)
    # The stamp the audit took with its read of each digest, the one the file still has.
    inputs = json.loads((out / memo.NAME).read_text())["inputs"]
    assert all(inputs[str(p)] == stamp_of(str(p)) for p in found)
    assert audited(dirs, out) == first and computed[0] == 1
    found[7].write_bytes(found[7].read_bytes())  # the same bytes, a new stamp
    assert audited(dirs, out) == first and computed[0] == 2
    assert audited(dirs, out) == first and computed[0] == 2


def test_the_input_dirs_are_stamped_apart_and_checked_before_any_trial_file(
    tmp_path: Path, computed: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sweep still running changes its configuration dirs most often: a re-audit then stats no trial's file.
    dirs = sweep(tmp_path / "sweep")
    out = tmp_path / "audit"
    audited(dirs, out)
    data = json.loads((out / memo.NAME).read_text())
    expected = set()
    for d in dirs:
        expected |= {str(d / "launch.json"), str(d / "runs"), str(d / "costs")}
        expected |= {str(c) for c in (d / "runs").iterdir() if c.is_dir()}
    assert set(data["heads"]) == expected
    assert all(data["heads"][path] == stamp_of(path) for path in expected)
    assert data["inputs"] and not expected & set(data["inputs"])
    (dirs[0] / "runs" / "aide" / "stray.txt").write_text("")  # the configuration dir's stamp moves
    stats: list[str] = []
    monkeypatch.setattr(memo, "stamp_of", lambda path: stats.append(path) or stamp_of(path))
    kept = memo.load_memo(out, data["key"])
    assert kept is not None and not kept.current()
    assert stats and set(stats) <= set(data["outputs"]) | expected
    audited(dirs, out)
    assert computed[0] == 2


def test_the_memo_keeps_which_digest_entries_were_used_not_their_files_stamps(
    tmp_path: Path, computed: list[int]
) -> None:
    dirs = make_sweep(tmp_path / "sweep", 250, events=True, seed=4, journal_nodes=2)
    out = tmp_path / "audit"
    first = audited(dirs, out)
    data = json.loads((out / memo.NAME).read_text())
    gathered = sorted(str(p) for d in dirs for p in d.glob(f"runs/*/{layout.GATHERED_DIGESTS}"))
    assert sorted(data["digests"]) == gathered
    used = {
        f"{Path(source).parent}/{name}": kinds
        for source, trials in data["digests"].items()
        for name, kinds in trials
    }
    trial_dirs = sorted(str(p) for d in dirs for p in d.glob("runs/*/*") if p.is_dir())
    assert sorted(used) == trial_dirs  # every trial's entries, each trial once
    for trial, kinds in used.items():
        assert {"dir", "report", "status", "result", "journal", "cost"} <= set(kinds)
        assert ("events" in kinds) == Path(trial, "events.jsonl").is_file()
    stood = {*used, *(f"{t}{layout.REPORT_SUFFIX}" for t in used), *(f"{t}/events.jsonl" for t in used)}
    assert not stood & set(data["inputs"])  # kept once, in the digests
    assert set(gathered) <= set(data["inputs"])  # the digests themselves are stamped as read
    assert audited(dirs, out) == first and computed[0] == 1


def test_a_digest_entry_gone_stale_before_the_audit_is_not_used_and_the_memo_still_serves(
    tmp_path: Path, computed: list[int]
) -> None:
    # A report graded again after its trial's digest: the first audit reads the report itself, and the
    # memo stamps it; the stale entry is not one it used, so the re-audit is served by the memo.
    dirs = sweep(tmp_path / "sweep")
    _rescore(dirs)
    out = tmp_path / "audit"
    first = audited(dirs, out)
    assert first == fresh(dirs, tmp_path, "fresh")
    data = json.loads((out / memo.NAME).read_text())
    report = str(_report(dirs))
    assert data["inputs"][report] == stamp_of(report)
    name = Path(report).name.removesuffix(layout.REPORT_SUFFIX)
    kinds = dict(data["digests"][str(Path(report).parent / layout.GATHERED_DIGESTS)])
    assert "report" not in kinds[name] and "dir" in kinds[name]
    assert audited(dirs, out) == first and computed[0] == 2  # the fresh audit's, not this one's


@pytest.mark.parametrize(
    "digests",
    [
        {"nowhere/audit-digests.tsv": [["a", ["report"]]]},
        "GATHERED: a trial it does not hold",
        "GATHERED: a kind no digest has",
        "GATHERED: not a list",
    ],
)
def test_a_memo_whose_digest_entries_do_not_stand_is_computed_again(
    tmp_path: Path, computed: list[int], digests: Any
) -> None:
    dirs = sweep(tmp_path / "sweep")
    out = tmp_path / "audit"
    first = audited(dirs, out)
    data = json.loads((out / memo.NAME).read_text())
    source, trials = next(iter(data["digests"].items()))
    if digests == "GATHERED: a trial it does not hold":
        digests = {source: [*trials, ["absent_seed1", ["report"]]]}
    elif digests == "GATHERED: a kind no digest has":
        digests = {source: [[trials[0][0], ["nothing"]]]}
    elif digests == "GATHERED: not a list":
        digests = {source: [trials[0][0]]}
    data["digests"] = {**data["digests"], **digests}
    (out / memo.NAME).write_text(json.dumps(data))
    assert audited(dirs, out) == first and computed[0] == 2
