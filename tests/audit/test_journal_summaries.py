"""A journal's summary (the trial table's cells and the best-metric curve) comes from the trial's digest or an
earlier audit while journal.json is unchanged, so an audit without trial pages reads no journal; one edited
since, or one with a log beside it, is read, and the summary is what reading it gives."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from synthetic import make_sweep

from mle_world import layout
from mle_world.audit import cache, collect, journals, memo, run_audit
from mle_world.audit.collect import load_sweep
from mle_world.audit.digest import JOURNAL, write_trial_digest
from mle_world.audit.journals import decode, encode, read_summary, summary_of
from mle_world.audit.trial_records import ABSENT


def reads_of_journals(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The journal.json files the audit reads (whole, or for a summary), as they are read."""
    seen: list[str] = []
    for module, name in (
        (journals, "_read_journal"), (collect, "read_summary"), (collect, "summary_of_bytes")
    ):  # fmt: skip
        real = getattr(module, name)

        def spy(arg: object, real: object = real) -> object:
            seen.append(str(getattr(arg, "dir_text", arg))[:80])
            return real(arg)  # type: ignore[operator]

        monkeypatch.setattr(module, name, spy)
    return seen


def summaries(dirs: list[Path], out: Path) -> dict[str, object]:
    kept: list[object] = []
    assert run_audit(dirs, out_dir=out, plots=False, trial_pages=False, keep=kept) == 0
    (result, _, _) = kept[0]  # type: ignore[misc]
    return {t.trial_id: t.journal_cache for t in result.sweep.trials}


def test_the_digests_summaries_are_what_reading_the_journals_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = make_sweep(tmp_path / "sweep", 40, events=True, seed=7, journal_nodes=5)
    for digest in (tmp_path / "sweep").glob(f"*/runs/*/*{layout.AUDIT_DIGEST_SUFFIX}"):
        assert json.loads(digest.read_text())[JOURNAL][1][0][0] == "5"  # five nodes
    read = reads_of_journals(monkeypatch)
    from_digests = summaries(dirs, tmp_path / "a")
    assert read == []  # no journal opened: every summary came from a digest
    for digest in (tmp_path / "sweep").glob("*/runs/*/*digest*"):
        digest.unlink()
    from_files = summaries(dirs, tmp_path / "b")
    assert len(read) == 40 and from_files == from_digests
    assert all(s is not None and s.present and len(s.curve) == 5 for s in from_files.values())  # type: ignore[attr-defined]
    read.clear()
    # Kept by that audit: the next one into its dir, its memo dropped (so it computes), reads none either.
    (tmp_path / "b" / memo.NAME).unlink(missing_ok=True)
    assert (tmp_path / "b" / cache.NAME).is_file()
    assert summaries(dirs, tmp_path / "b") == from_files and read == []


def test_a_journal_edited_or_logged_since_its_digest_is_read_again(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 8, events=False, seed=8, journal_nodes=3)
    trials = sorted(p for p in (dirs[0] / "runs").glob("*/*") if p.is_dir())
    edited, logged = trials[0], trials[1]
    data = json.loads((edited / layout.JOURNAL).read_text())
    data["nodes"] = data["nodes"][:2]
    (edited / layout.JOURNAL).write_text(json.dumps(data))  # in place, after its digest
    # A log beside: the nodes it adds count, and a digest written now holds no summary for it.
    extra = {"first_node": 3, "seq": 9, "nodes": [{"id": "x", "step": 3, "stage": "improve", "executed": True,
                                                    "is_buggy": False, "metric": 2.0}]}  # fmt: skip
    (logged / layout.JOURNAL_LOG).write_text(json.dumps(extra) + "\n")
    write_trial_digest(logged, None)
    assert JOURNAL not in json.loads(layout.digest_beside(logged).read_text())
    sweep = load_sweep(dirs, cache.open_parsed_inputs(None))
    by_dir = {t.dir_text: t for t in sweep.trials}
    assert by_dir[str(edited)].journal_cache.cells[0] == "2"  # type: ignore[union-attr]
    got = summaries(dirs, tmp_path / "a")
    logged_id = next(t.trial_id for t in sweep.trials if t.dir_text == str(logged))
    assert got[logged_id].cells[0] == "4" and got[logged_id].cells[4] == "2"  # type: ignore[attr-defined]


def test_a_summary_survives_json_or_is_not_kept(tmp_path: Path) -> None:
    journal = tmp_path / layout.JOURNAL
    nodes = [{"id": f"n{i}", "step": i, "stage": "draft", "executed": True, "metric": m, "ctime": 10.0 * (i + 1)}
             for i, m in enumerate([0.5, 0.25, 1e308 * 10])]  # fmt: skip
    journal.write_text(json.dumps({"lower_is_better": True, "nodes": nodes}))
    summary = read_summary(str(journal))
    assert summary == summary_of(json.loads(journal.read_text()))
    assert summary.cells == ("3", "3", "0", "0", "0.25") and encode(summary) is None  # an infinite metric
    journal.write_text(json.dumps({"lower_is_better": True, "nodes": nodes[:2]}))
    summary = read_summary(str(journal))
    assert decode(json.loads(json.dumps(encode(summary)))) == summary
    for spoiled in (b"\xff not UTF-8", b"{not json", b""):
        journal.write_bytes(spoiled)
        assert read_summary(str(journal)) == ABSENT
    os.unlink(journal)
    assert read_summary(str(journal)) == ABSENT
    for bad in ([["1", "1", "1", "1"], [], None, True, True], [["1"] * 5, [], "lower", True, True], None):
        with pytest.raises((TypeError, ValueError)):
            decode(bad)
