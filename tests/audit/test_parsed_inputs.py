"""A re-audit reuses what the last audit parsed from unchanged cost CSVs and events.jsonl files, and gives
exactly what a fresh audit gives: after files change, are added or removed, and when the kept file is
garbage.

Reads nothing; writes a small synthetic sweep and its audit dirs under tmp_path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from synthetic import make_sweep

from mle_world.audit import run_audit
from mle_world.audit.cache import NAME
from mle_world.audit.memo import NAME as MEMO

OUTPUTS = ("summary.csv", "report.md")


def outputs(dirs: list[Path], out: Path) -> dict[str, str]:
    # Each audit reads the inputs through the parsed-inputs cache: the memo of the audit before would
    # serve it instead once the inputs are settled (2 s after their last change, so on a slow machine).
    (out / MEMO).unlink(missing_ok=True)
    assert run_audit(dirs, out_dir=out, plots=False, trial_pages=False) == 0
    return {name: (out / name).read_text() for name in OUTPUTS}


def fresh(dirs: list[Path], tmp_path: Path, name: str) -> dict[str, str]:
    """What an audit into a new dir (nothing kept) writes."""
    return outputs(dirs, tmp_path / name)


def replace(path: Path, text: str) -> None:
    """Rewrite a file the way the harness does (a new file renamed over it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_a_re_audit_equals_a_fresh_audit_whatever_changed(tmp_path: Path) -> None:
    # Without digests: what they stand for is not kept (tests/audit/test_digest.py).
    dirs = make_sweep(tmp_path / "sweep", 476, events=True, seed=5, digests=False)
    out = tmp_path / "audit"
    first = outputs(dirs, out)
    kept = json.loads((out / NAME).read_text())["entries"]
    costs = sorted(str(p) for d in dirs for p in (d / "costs").glob("*.csv"))
    events = sorted(str(p) for d in dirs for p in d.glob("runs/*/*/events.jsonl"))
    assert sorted(kept["cost"]) == costs and sorted(kept["events"]) == events
    # A report's text is not kept (reading the file again costs less than loading it), nor its stamp
    # alone, which only served the memo of the audit that read it.
    assert "report" not in kept and set(kept) == {"cost", "events", "dir"}

    assert outputs(dirs, out) == first  # nothing changed

    cost = Path(costs[0])
    lines = cost.read_text().splitlines()
    replace(cost, "\n".join([lines[0], lines[1].replace(",0.25,", ",9.75,"), *lines[2:]]) + "\n")
    event_file = Path(events[-1])
    line = event_file.read_text().splitlines()[0]
    with event_file.open("a") as handle:  # the agent appends
        handle.write(line.replace('"p_improves": ', '"p_improves": 0.0001 + 0 * ') + "\n")  # a bad line
        handle.write(line + "\n")
    Path(costs[1]).unlink()
    changed = outputs(dirs, out)
    assert changed != first and changed == fresh(dirs, tmp_path, "fresh-1")
    assert str(costs[1]) not in json.loads((out / NAME).read_text())["entries"]["cost"]

    (out / NAME).write_text('{"digest": "not this code", "entries": {"cost": {"x": 1}}}')
    assert outputs(dirs, out) == changed
    (out / NAME).write_text("garbage")
    assert outputs(dirs, out) == changed
    entries = json.loads((out / NAME).read_text())
    entries["entries"]["cost"][costs[0]][1] = "not a parsed file"  # stamp still right, value broken
    (out / NAME).write_text(json.dumps(entries))
    assert outputs(dirs, out) == changed


def test_a_count_past_64_bits_is_summed_and_not_kept(tmp_path: Path) -> None:
    # A token count of 1e30 sums as costs.summary sums it (int(float)), which JSON's 64-bit integers
    # cannot carry: the audit must not fail writing what it keeps, and a re-audit reads the file again.
    dirs = make_sweep(tmp_path / "sweep", 20, events=True, seed=1, digests=False)
    cost = sorted((dirs[0] / "costs").glob("*.csv"))[0]
    lines = cost.read_text().splitlines()
    header = lines[0].split(",")
    row = lines[1].split(",")
    row[header.index("prompt_tokens")] = "1e30"
    replace(cost, "\n".join([lines[0], ",".join(row), *lines[2:]]) + "\n")
    out = tmp_path / "audit"
    first = outputs(dirs, out)
    kept = json.loads((out / NAME).read_text())["entries"]["cost"]
    assert str(cost) not in kept and len(kept) > 10  # not kept, the others are: read again next time
    assert outputs(dirs, out) == first
