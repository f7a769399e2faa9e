"""A first audit takes what each trial's audit digest holds only while the digested files and dir are the ones
it read, and gives exactly what an audit of the same sweep without digests gives: after events.jsonl is
appended to, the cost CSV or the report rewritten, a file added to the trial dir, a digest copied to another
trial, written by other code, or garbage.

Reads nothing; writes small synthetic sweeps (tests/support/synthetic.py, whose trials get digests as the
harness writes them, not gathered: tests/audit/test_digest_files.py has those) and their audit dirs under
tmp_path.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from synthetic import make_sweep

from mle_world import layout
from mle_world.audit import collect, run_audit
from mle_world.audit.cache import NAME, open_parsed_inputs, stamp_of
from mle_world.audit.collect import load_sweep
from mle_world.audit.digest import write_trial_digest

OUTPUTS = ("summary.csv", "report.md")


def outputs(dirs: list[Path], out: Path) -> dict[str, str]:
    assert run_audit(dirs, out_dir=out, plots=False, trial_pages=False) == 0
    return {name: (out / name).read_text() for name in OUTPUTS}


def digests(dirs: list[Path]) -> list[Path]:
    return sorted(p for d in dirs for p in d.glob(f"runs/*/*{layout.AUDIT_DIGEST_SUFFIX}"))


def trial_of(digest: Path) -> Path:
    """The trial dir a digest beside it stands for."""
    return digest.with_name(digest.name.removesuffix(layout.AUDIT_DIGEST_SUFFIX))


def files_read(dirs: list[Path]) -> int:
    """How many input files a first audit's collection reads (not taken from a digest)."""
    parsed = open_parsed_inputs(None)
    load_sweep(dirs, parsed)
    return parsed.read


def cost_csv(trial_dir: Path) -> Path:
    cfg, (task, _, seed) = trial_dir.parent.name, trial_dir.name.rpartition("_seed")
    return layout.cost_path(trial_dir.parents[2], cfg, task, int(seed))


KINDS = ("dir", "report", "status", "result", "events", "cost")
"""What a digest can stand for: the trial dir's listing and the files the audit reads."""


def stood_for(digest: Path) -> int:
    """How many of the trial's reads its digest stands for."""
    return sum(1 for kind in KINDS if kind in json.loads(digest.read_text()))


def with_dirs(found: list[Path]) -> list[Path]:
    """The digests of trials that have a dir (the synthetic aide trials have none: a report and costs only)."""
    return [d for d in found if trial_of(d).is_dir()]


def test_a_first_audit_with_digests_reads_no_trial_file_and_says_the_same(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 400, events=True, seed=3, gathered=False)
    found = digests(dirs)
    assert len(found) > 300 and len(with_dirs(found)) > 100
    # A trial with a dir: its listing, report, events.jsonl and cost CSV; one without: report and costs.
    assert {stood_for(d) for d in with_dirs(found)} == {4} and sum(map(stood_for, found)) > 4 * 100
    with_digests = files_read(dirs), outputs(dirs, tmp_path / "audit-with")
    for digest in found:
        digest.unlink()
    assert with_digests == (0, outputs(dirs, tmp_path / "audit-without"))
    assert "wm-point" in with_digests[1]["report.md"]


def test_every_read_a_digest_stands_for_is_one_a_first_audit_without_it_makes(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 200, events=True, seed=8, gathered=False)
    found = digests(dirs)
    counts = [stood_for(d) for d in found]
    for digest in found:
        digest.unlink()
    assert files_read(dirs) == sum(counts)


def test_what_a_digest_stands_for_is_not_kept_again_and_a_re_audit_without_it_says_the_same(
    tmp_path: Path,
) -> None:
    dirs = make_sweep(tmp_path / "sweep", 300, events=True, seed=6, gathered=False)
    found = with_dirs(digests(dirs))
    out = tmp_path / "audit"
    first = outputs(dirs, out)
    # Every trial has a digest here: nothing is kept, each file is left to its digest (and a report's
    # stamp alone, which serves only the memo of the audit that read it, is never kept).
    assert not (out / NAME).exists()
    for digest in found[::2]:
        digest.unlink()  # half of them gone: those trials' files are parsed again, and kept
    assert outputs(dirs, out) == first
    again = json.loads((out / NAME).read_text())["entries"]
    assert set(again) == {"dir", "events", "cost"}
    assert set(again["events"]) == {str(trial_of(d) / layout.EVENTS) for d in found[::2]}
    assert set(again["dir"]) == {str(trial_of(d)) for d in found[::2]}
    assert set(again["cost"]) == {str(cost_csv(trial_of(d))) for d in found[::2]}


def test_a_digest_of_files_that_changed_since_is_not_used(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 300, events=True, seed=4, gathered=False)
    found = with_dirs(digests(dirs))
    original = outputs(dirs, tmp_path / "original")
    appended, rewritten, same_bytes, regraded, added = (trial_of(d) for d in found[:5])
    line = (appended / layout.EVENTS).read_text().splitlines()[0]
    with (appended / layout.EVENTS).open("a") as handle:  # the trial ran again and appended
        for _ in range(40):
            handle.write(line.replace('"p_improves": ', '"p_improves": 0.001 + 0 * ') + "\n")  # bad lines
    cost = cost_csv(rewritten)
    text = cost.read_text()
    tmp = cost.with_name(".tmp.csv")
    tmp.write_text(text.replace(",0.25,", ",750.25,"))
    os.replace(tmp, cost)  # its costs accounted again
    events = same_bytes / layout.EVENTS
    kept = events.read_bytes()
    events.unlink()
    events.write_bytes(kept)  # the same bytes in a new file: another inode, and the dir changed
    report = layout.report_beside(regraded)
    graded = json.loads(report.read_text())
    graded.update(gold_medal=True, any_medal=True, score=0.99)
    tmp = report.with_name(".tmp.json")
    tmp.write_text(json.dumps(graded))
    os.replace(tmp, report)  # graded again
    (added / layout.STATUS).write_text("{not a status")  # a file the digest never saw
    shutil.copyfile(found[5], found[6])  # another trial's digest: neither file's stamp matches its own
    stale = found[:7]
    # The changed files are read; each entry stands alone: of the 4 each of the first five digests stands
    # for, 3, 3, 2 (its events and dir changed), 3 and 3 (its dir changed) still serve; the copy none.
    assert files_read(dirs) == files_read_without(dirs, stale) - (3 + 3 + 2 + 3 + 3 + 4)

    changed = outputs(dirs, tmp_path / "audit")
    for digest in digests(dirs):
        digest.unlink()
    assert changed == outputs(dirs, tmp_path / "no-digests") != original
    causes = {t.dir_text: t.cause for t in load_sweep(dirs, open_parsed_inputs(None)).trials}
    assert causes[str(added)] == "unreadable status.json"


def files_read_without(dirs: list[Path], stale: list[Path]) -> int:
    """`files_read` when the digests in `stale` are gone (put back afterwards)."""
    kept = {d: d.read_bytes() for d in stale}
    for d in stale:
        d.unlink()
    try:
        return files_read(dirs)
    finally:
        for d, data in kept.items():
            d.write_bytes(data)


def test_a_digest_of_other_code_or_garbage_is_ignored(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 200, events=True, seed=5, gathered=False)
    found = with_dirs(digests(dirs))
    expected = outputs(dirs, tmp_path / "expected")
    before = files_read(dirs)
    other = json.loads(found[0].read_text())
    other["digest"] = "0" * 64  # digested by another version of the harness
    found[0].write_text(json.dumps(other))
    wrong = json.loads(found[1].read_text())
    wrong["events"][1] = ["not", "what", "decode", "takes"]  # stamps right, entries broken
    wrong["cost"][1] = {"total": 1e9}
    wrong["report"][1] = 42
    found[1].write_text(json.dumps(wrong))
    found[2].write_text("{not json")
    found[3].write_bytes(b"\xff\xfe")
    found[4].write_text("[1, 2]")
    found[5].unlink()
    found[5].mkdir()  # not a file
    # Each of the six trials' files is read (what its digest stood for), but the broken one's listing:
    assert files_read(dirs) == before + 4 * 5 + 3
    assert outputs(dirs, tmp_path / "audit") == expected


def test_writing_a_digest_keeps_the_stamps_of_what_it_read_and_removes_an_old_one(tmp_path: Path) -> None:
    trial = tmp_path / "runs" / "wm-point" / "task-00_seed0"
    digest = layout.digest_beside(trial)
    assert write_trial_digest(trial, None) is None and not digest.exists()
    trial.mkdir(parents=True)
    events = trial / layout.EVENTS
    events.write_text('{"type": "prediction"}\nnot json\n')
    status = trial / layout.STATUS
    status.write_text('{"state": "succeeded"}')
    (trial / layout.RESULT).write_bytes(
        b"\xff not UTF-8"
    )  # left to the audit, which says why it cannot read it
    report = layout.report_beside(trial)
    report.write_text('{"score": 1}\r\n')
    assert write_trial_digest(trial, tmp_path / "costs" / "absent.csv") == digest
    data = json.loads(digest.read_text())
    assert data["dir"] == [stamp_of(str(trial)), [layout.EVENTS, layout.RESULT, layout.STATUS]]
    assert data["events"][0] == stamp_of(str(events)) and "cost" not in data and "result" not in data
    assert data["events"][1] == [2, []]  # neither line is a valid event
    assert data["status"] == [stamp_of(str(status)), '{"state": "succeeded"}']
    assert data["report"] == [stamp_of(str(report)), '{"score": 1}\n']  # as the audit reads it
    # Written beside the dir, it leaves the dir's stamp (which it holds) as it was.
    assert stamp_of(str(trial)) == data["dir"][0]
    shutil.rmtree(trial)
    report.unlink()
    assert write_trial_digest(trial, None) is None and not digest.exists()


def test_a_digest_holds_the_predictions_of_hundreds_of_agent_lines(tmp_path: Path) -> None:
    # The benchmarks' agent-like events (synthetic.STEP): valid events all, reduced to the 5 predictions.
    dirs = make_sweep(tmp_path / "sweep", 30, events=True, seed=6, steps=100, gathered=False)
    found = with_dirs(digests(dirs))
    assert found
    for digest in found:
        assert len((trial_of(digest) / layout.EVENTS).read_text().splitlines()) == 305
        bad_lines, predictions = json.loads(digest.read_text())["events"][1]
        assert bad_lines == 0 and len(predictions) == 5
    expected = outputs(dirs, tmp_path / "with")
    for digest in digests(dirs):
        digest.unlink()
    assert outputs(dirs, tmp_path / "without") == expected


def test_the_digests_are_checked_from_dir_fds_that_are_all_closed_or_from_whole_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = make_sweep(tmp_path / "sweep", 300, events=True, seed=2, gathered=True)
    opened: list[str] = []

    open_dir = collect._open_dir

    def opening(path: str) -> int | None:
        opened.append(path)
        return open_dir(path)

    monkeypatch.setattr(collect, "_open_dir", opening)
    before = set(os.listdir("/proc/self/fd"))
    assert files_read(dirs) == 0
    assert set(os.listdir("/proc/self/fd")) == before  # every one closed
    # One a configuration dir whose digests were read, and one each dir's costs/ (its trials' cost CSVs).
    configurations = {str(digest.parent) for digest in digests(dirs)}
    costs = {str(layout.costs_dir(d)) for d in dirs}
    assert sorted(opened) == sorted(configurations | costs) and len(configurations) > 7
    expected = outputs(dirs, tmp_path / "with-fds")
    # A dir that cannot be opened: its files are stat'ed by their whole paths, to the same end.
    monkeypatch.setattr(collect, "_open_dir", lambda path: None)
    assert files_read(dirs) == 0
    assert outputs(dirs, tmp_path / "without-fds") == expected
