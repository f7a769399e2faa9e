"""The audit's memory does not grow with the size of the trials' journals and events: each is read for its
trial's page and freed before the next, and the tables keep a summary of it."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from synthetic import make_sweep

from mle_world import layout
from mle_world.audit import run_audit
from mle_world.audit.journals import JournalSummary

TRIALS = 40
CODE = "".join(
    f"feature_{k} = frame['col_{k}'].fillna({k % 7}) * {k}  # a step of the pipeline\n" for k in range(400)
)


def big_journals(dirs: list[Path]) -> int:
    """A journal of 40 nodes of real-sized code, plan and output in each trial dir; their total bytes."""
    total = 0
    for out in dirs:
        for trial in json.loads((out / "launch.json").read_text())["trials"]:
            directory = out / trial["trial_dir"]
            directory.mkdir(parents=True, exist_ok=True)
            nodes = [
                {"id": f"n{i}", "step": i, "stage": "draft" if i == 0 else "improve",
                 "parent_id": None if i == 0 else f"n{i - 1}", "ctime": 1.7e9 + 600 * i, "executed": True,
                 "is_buggy": False, "metric": i / 40, "code": CODE + f"step = {i}\n", "plan": "a plan " * 300,
                 "term_out": "epoch loss 0.5\n" * 300}
                for i in range(40)
            ]  # fmt: skip
            path = directory / layout.JOURNAL
            path.write_text(json.dumps({"trial_id": trial["trial_id"], "science_hash": "h", "nodes": nodes}))
            total += path.stat().st_size
    return total


def test_a_first_audit_holds_one_trials_journal_at_a_time(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", TRIALS, events=True, seed=3, steps=200)
    journals = big_journals(dirs)
    kept: list[object] = []
    tracemalloc.start()
    try:
        assert run_audit(dirs, out_dir=tmp_path / "audit", draw_plots=False, keep=kept) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    pages = sorted((tmp_path / "audit" / "trials").iterdir())
    assert len(pages) == TRIALS  # every trial's page was written, each from its whole journal
    assert all(f"step = {39}" in page.read_text() for page in pages)
    # Held for the sweep, the parsed journals and events were 1.7 times the journals' bytes (58 MB on disk); one
    # at a time, the audit's own memory is most of what is left (0.35 times).
    assert journals > 50_000_000
    assert peak < journals * 0.75
    (result, _, _) = kept[0]  # type: ignore[misc]
    for trial in result.sweep.trials:
        summary = trial.journal_cache
        assert isinstance(summary, JournalSummary) and summary.cells[0] == "40" and len(summary.curve) == 40


def test_the_benchmarks_agent_like_trials_have_a_page_status_and_result_each(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 30, events=True, seed=5, steps=3, journal_nodes=6)
    kept: list[object] = []
    assert run_audit(dirs, out_dir=tmp_path / "audit", draw_plots=False, keep=kept) == 0
    (result, parsed, _) = kept[0]  # type: ignore[misc]
    assert len(list((tmp_path / "audit" / "trials").iterdir())) == 30
    assert parsed.read == 0  # status.json and result.json too came from the trials' digests
    assert [t.state for t in result.sweep.trials] == ["succeeded"] * 30
    assert all(t.result is not None and t.result.nodes == 6 for t in result.sweep.trials)
    assert all(t.journal_cache is not None and t.journal_cache.cells[0] == "6" for t in result.sweep.trials)
