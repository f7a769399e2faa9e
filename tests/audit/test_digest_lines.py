"""What the memo checks again of the trials' digests (`audit/digest_lines.py`): the file each kind of entry
stands for is the one the digest's writer stamped, for a configuration's gathered file and a trial's own
digest alike; an entry whose file changed, or a memo's list that names what no digest holds, does not stand.

Reads nothing; writes small synthetic sweeps (tests/support/synthetic.py) under tmp_path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from synthetic import make_sweep

from mle_world import layout
from mle_world.audit import digest
from mle_world.audit.cache import stamp_of
from mle_world.audit.digest_lines import COST, DIR, FILES, REPORT, used_entries_stand, used_entry_files


def test_the_kinds_of_entry_are_the_digests_own() -> None:
    kinds = (
        digest.DIR,
        digest.REPORT,
        digest.STATUS,
        digest.RESULT,
        digest.EVENTS,
        digest.COST,
        digest.JOURNAL,
    )
    assert {DIR, REPORT, COST, *FILES} == set(kinds)
    assert {FILES[kind]: kind for kind, _ in digest.RECORDS} == {name: kind for kind, name in digest.RECORDS}
    assert FILES[digest.EVENTS] == layout.EVENTS and FILES[digest.JOURNAL] == layout.JOURNAL


def _sources(root: Path, gathered: bool) -> dict[str, list[list[Any]]]:
    """Each digest's trials with every kind of entry their digest holds."""
    dirs = make_sweep(root, 60, events=True, seed=3, gathered=gathered, journal_nodes=2)
    sources: dict[str, list[list[Any]]] = {}
    for path in sorted(p for d in dirs for p in d.glob(f"runs/*/*{layout.AUDIT_DIGEST_SUFFIX}")):
        data = orjson.loads(path.read_bytes())
        kinds = [k for k in data if k not in ("digest", "cost_csv")]
        name = path.name.removesuffix(layout.AUDIT_DIGEST_SUFFIX)
        source = path.parent / layout.GATHERED_DIGESTS if gathered else path
        sources.setdefault(str(source), []).append([name, kinds])
    return sources


@pytest.mark.parametrize("gathered", [True, False], ids=["gathered", "own digest"])
def test_each_entry_stands_for_the_file_its_writer_stamped(tmp_path: Path, gathered: bool) -> None:
    sources = _sources(tmp_path, gathered)
    assert sources
    seen = set()
    for source, trials in sources.items():
        files = list(used_entry_files(source, trials))
        assert None not in files and len(files) == sum(len(kinds) for _, kinds in trials)
        configuration = Path(source).parent
        for directory, name, stamp in files:  # type: ignore[misc]
            path = Path(directory, name)
            assert stamp == stamp_of(str(path))
            seen.add(path.relative_to(configuration.parent.parent).as_posix().split("/", 2)[-1])
        assert used_entries_stand(source, trials)
    trial = "task-00_seed0"
    for relative in (trial, f"{trial}_grading_report.json", f"{trial}/status.json", f"{trial}/events.jsonl"):
        assert relative in seen
    assert "aide.task-00.seed0.csv" in seen  # costs/aide.task-00.seed0.csv


def test_an_entry_whose_file_changed_does_not_stand(tmp_path: Path) -> None:
    sources = _sources(tmp_path, gathered=True)
    source, trials = next(iter(sources.items()))
    name = trials[0][0]
    status = Path(source).parent / name / layout.STATUS
    assert used_entries_stand(source, trials)
    os.utime(status, ns=(1, 1))
    assert not used_entries_stand(source, trials)
    assert used_entries_stand(source, trials[1:])  # the other trials' entries still stand
    assert used_entries_stand(source, [[name, [k for k in trials[0][1] if k != "status"]]])


@pytest.mark.parametrize(
    "used",
    [
        "not a list",
        [["absent_seed1", ["report"]]],
        [["task-00_seed0", ["a kind no digest has"]]],
        [["task-00_seed0", "report"]],
        [["task-00_seed0"]],
        [["../task-00_seed0", ["report"]]],
        [[1, ["report"]]],
    ],
)
def test_a_list_that_names_what_no_digest_holds_does_not_stand(tmp_path: Path, used: Any) -> None:
    sources = _sources(tmp_path, gathered=True)
    source = next(s for s in sources if "/aide/" in s)
    assert used_entries_stand(source, [["task-00_seed0", ["report"]]])
    assert not used_entries_stand(source, used)
    assert not used_entries_stand(str(tmp_path / "absent" / layout.GATHERED_DIGESTS), sources[source])
