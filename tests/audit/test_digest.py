"""A first audit takes what each trial's audit digest holds only while the digested files are the ones it
parsed, and gives exactly what an audit of the same sweep without digests gives: after events.jsonl is
appended to, the cost CSV rewritten, a digest copied to another trial, written by other code, or garbage.

Reads nothing; writes small synthetic sweeps (tests/support/synthetic.py, whose trial dirs get digests as
the harness writes them) and their audit dirs under tmp_path.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from synthetic import make_sweep

from mle_world import layout
from mle_world.audit import run_audit
from mle_world.audit.cache import NAME, open_parsed_inputs, stamp_of
from mle_world.audit.collect import load_sweep
from mle_world.audit.digest import write_trial_digest

OUTPUTS = ("summary.csv", "report.md")


def outputs(dirs: list[Path], out: Path) -> dict[str, str]:
    assert run_audit(dirs, out_dir=out, plots=False, trial_pages=False) == 0
    return {name: (out / name).read_text() for name in OUTPUTS}


def digests(dirs: list[Path]) -> list[Path]:
    return sorted(p for d in dirs for p in d.glob(f"runs/*/*/{layout.AUDIT_DIGEST}"))


def files_read(dirs: list[Path]) -> int:
    """How many input files a first audit's collection reads (not taken from a digest)."""
    parsed = open_parsed_inputs(None)
    load_sweep(dirs, parsed)
    return parsed.read


def cost_csv(trial_dir: Path) -> Path:
    cfg, (task, _, seed) = trial_dir.parent.name, trial_dir.name.rpartition("_seed")
    return layout.cost_path(trial_dir.parents[2], cfg, task, int(seed))


def test_a_first_audit_with_digests_reads_two_files_a_trial_less_and_says_the_same(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 400, events=True, seed=3)
    found = digests(dirs)
    assert len(found) > 100
    with_digests = files_read(dirs), outputs(dirs, tmp_path / "audit-with")
    for digest in found:
        digest.unlink()
    # Each digest stands for its trial's events.jsonl and cost CSV: neither was read.
    assert with_digests == (files_read(dirs) - 2 * len(found), outputs(dirs, tmp_path / "audit-without"))
    assert "wm-point" in with_digests[1]["report.md"]


def test_what_a_digest_stands_for_is_not_kept_again_and_a_re_audit_without_it_says_the_same(
    tmp_path: Path,
) -> None:
    dirs = make_sweep(tmp_path / "sweep", 300, events=True, seed=6)
    found = digests(dirs)
    out = tmp_path / "audit"
    first = outputs(dirs, out)
    kept = json.loads((out / NAME).read_text())["entries"]
    taken = {str(d.parent / layout.EVENTS) for d in found}
    # Every trial with an events.jsonl has a digest here: none is kept, each is left to its digest.
    assert taken == {str(p) for d in dirs for p in d.glob(f"runs/*/*/{layout.EVENTS}")}
    assert not kept.get("events") and kept["report"]
    assert not set(kept.get("cost", {})) & {str(cost_csv(d.parent)) for d in found}
    for digest in found[::2]:
        digest.unlink()  # half of them gone: those trials' files are parsed again, and kept
    assert outputs(dirs, out) == first
    again = json.loads((out / NAME).read_text())["entries"]
    assert {str(d.parent / layout.EVENTS) for d in found[::2]} <= set(again["events"])
    assert not set(again["events"]) & {str(d.parent / layout.EVENTS) for d in found[1::2]}


def test_a_digest_of_files_that_changed_since_is_not_used(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path / "sweep", 300, events=True, seed=4)
    found = digests(dirs)
    original = outputs(dirs, tmp_path / "original")
    appended, rewritten, same_bytes = found[0].parent, found[1].parent, found[2].parent
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
    events.write_bytes(kept)  # the same bytes in a new file: another inode, the digest cannot tell
    shutil.copyfile(found[3], found[4])  # another trial's digest: neither file's stamp matches its own
    stale = found[:3] + found[4:5]
    # The changed files are parsed; each entry stands alone: the appended trial's and the re-created
    # events' trial's cost CSVs, and the rewritten cost CSV's trial's events, are still taken from digests.
    assert files_read(dirs) == files_read_without(dirs, stale) - 3

    changed = outputs(dirs, tmp_path / "audit")
    for digest in found:
        digest.unlink()
    assert changed == outputs(dirs, tmp_path / "no-digests") != original


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
    dirs = make_sweep(tmp_path / "sweep", 200, events=True, seed=5)
    found = digests(dirs)
    expected = outputs(dirs, tmp_path / "expected")
    before = files_read(dirs)
    other = json.loads(found[0].read_text())
    other["digest"] = "0" * 64  # digested by another version of the harness
    found[0].write_text(json.dumps(other))
    wrong = json.loads(found[1].read_text())
    wrong["events"][1] = ["not", "what", "decode", "takes"]  # stamps right, entries broken
    wrong["cost"][1] = {"total": 1e9}
    found[1].write_text(json.dumps(wrong))
    found[2].write_text("{not json")
    found[3].write_bytes(b"\xff\xfe")
    found[4].write_text("[1, 2]")
    found[5].unlink()
    found[5].mkdir()  # not a file
    # Each of the six trials' events.jsonl and cost CSV is parsed (what its digest stood for):
    assert files_read(dirs) == before + 2 * 6
    assert outputs(dirs, tmp_path / "audit") == expected


def test_writing_a_digest_keeps_the_stamps_of_what_it_parsed_and_removes_an_old_one(tmp_path: Path) -> None:
    trial = tmp_path / "runs" / "wm-point" / "task-00_seed0"
    trial.mkdir(parents=True)
    assert write_trial_digest(trial, None) is None and not (trial / layout.AUDIT_DIGEST).exists()
    events = trial / layout.EVENTS
    events.write_text('{"type": "prediction"}\nnot json\n')
    path = write_trial_digest(trial, tmp_path / "costs" / "absent.csv")
    assert path == trial / layout.AUDIT_DIGEST
    data = json.loads(path.read_text())
    assert data["events"][0] == stamp_of(str(events)) and "cost" not in data
    assert data["events"][1] == [2, []]  # neither line is a valid event
    events.unlink()
    assert write_trial_digest(trial, None) is None and not path.exists()


def test_a_digest_holds_the_predictions_of_hundreds_of_agent_lines(tmp_path: Path) -> None:
    # The benchmarks' agent-like events (synthetic.STEP): valid events all, reduced to the 5 predictions.
    dirs = make_sweep(tmp_path / "sweep", 30, events=True, seed=6, steps=100)
    found = digests(dirs)
    assert found
    for digest in found:
        assert len((digest.parent / layout.EVENTS).read_text().splitlines()) == 305
        bad_lines, predictions = json.loads(digest.read_text())["events"][1]
        assert bad_lines == 0 and len(predictions) == 5
    expected = outputs(dirs, tmp_path / "with")
    for digest in found:
        digest.unlink()
    assert outputs(dirs, tmp_path / "without") == expected
