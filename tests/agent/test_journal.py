"""The journal's checkpoint files: appended lines, compaction, and consistency after kills at any point.

Reads nothing; writes journal.json / journal.jsonl under tmp_path, some through a writer process
killed with SIGKILL at random moments.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mle_world.agent import journal as journal_module
from mle_world.agent.journal import (
    Checkpoint,
    JournalWriter,
    Node,
    load_checkpoint,
    load_journal_data,
    log_path,
)


def node(i: int, size: int = 50) -> Node:
    return Node(id=f"n{i}", step=i, stage="draft" if i == 0 else "improve", parent_id=f"n{i - 1}" if i else None,
                code="x" * size, metric=float(i))  # fmt: skip


def checkpoints(path: Path, steps: int, size: int = 50, *, compact_last: bool = False) -> Checkpoint:
    """Checkpoint a journal step by step as the agent does; returns the last state."""
    writer = JournalWriter(path, load_checkpoint(path))
    ckpt = load_checkpoint(path) or Checkpoint(trial_id="t", science_hash="h")
    for _ in range(steps):
        ckpt.nodes = [*ckpt.nodes, node(len(ckpt.nodes), size)]
        ckpt.groups = len(ckpt.nodes)
        ckpt.time_used_s = float(len(ckpt.nodes))
        writer.save(ckpt, compact=compact_last and len(ckpt.nodes) == ckpt.groups and _ == steps - 1)
    return ckpt


def state(ckpt: Checkpoint | None) -> dict[str, object]:
    """A checkpoint's content without the bookkeeping of where it was stored."""
    assert ckpt is not None
    return ckpt.model_dump(exclude={"seq", "first_node", "version"})


def test_each_step_appends_one_line_and_replays_to_the_same_state(tmp_path):
    path = tmp_path / "journal.json"
    ckpt = checkpoints(path, 5)
    assert not path.exists()  # small journal: nothing compacted yet
    lines = log_path(path).read_text().splitlines()
    assert len(lines) == 5
    assert [len(Checkpoint.model_validate_json(line).nodes) for line in lines] == [1, 1, 1, 1, 1]
    loaded = load_checkpoint(path)
    assert loaded is not None
    assert loaded.nodes == ckpt.nodes and loaded.groups == 5 and loaded.time_used_s == 5.0 and loaded.seq == 5
    data = load_journal_data(path)
    assert [n["id"] for n in data["nodes"]] == [n.id for n in ckpt.nodes] and data["groups"] == 5


def test_compaction_when_the_log_outgrows_the_snapshot(tmp_path, monkeypatch):
    monkeypatch.setattr(journal_module, "COMPACT_MIN_BYTES", 2000)
    path = tmp_path / "journal.json"
    ckpt = checkpoints(path, 40, size=400)
    assert path.exists()
    snapshot = Checkpoint.model_validate_json(path.read_text())
    assert 0 < len(snapshot.nodes) < 40
    # the log only holds what came after the snapshot, and is never much larger than it
    log_lines = log_path(path).read_text().splitlines() if log_path(path).exists() else []
    assert len(snapshot.nodes) + len(log_lines) == 40
    assert log_path(path).stat().st_size <= max(2000, path.stat().st_size) + 2000 if log_lines else True
    assert state(load_checkpoint(path)) == state(ckpt)


def test_final_compaction_leaves_one_whole_file(tmp_path):
    path = tmp_path / "journal.json"
    ckpt = checkpoints(path, 6, compact_last=True)
    assert not log_path(path).exists()
    assert Checkpoint.model_validate_json(path.read_text()).nodes == ckpt.nodes


def test_stale_and_torn_lines_are_ignored_and_resume_compacts_first(tmp_path):
    path = tmp_path / "journal.json"
    checkpoints(path, 3)
    stale = log_path(path).read_bytes()
    writer = JournalWriter(path, load_checkpoint(path))
    ckpt = load_checkpoint(path)
    assert ckpt is not None
    writer.save(ckpt, compact=True)
    # A crash between writing the snapshot and removing the log: the old lines are all stale.
    log_path(path).write_bytes(stale)
    assert state(load_checkpoint(path)) == state(ckpt)
    # Kill mid-append: a torn last line is dropped, the state is the last whole checkpoint.
    checkpoints(path, 1)
    with open(log_path(path), "ab") as handle:
        handle.write(b'{"version":2,"seq":99,"first_node":4,"trial_id":"t","science_hash":"h","nod')
    loaded = load_checkpoint(path)
    assert loaded is not None and len(loaded.nodes) == 4
    assert load_journal_data(path)["nodes"][-1]["id"] == "n3"
    # The next session folds log and torn tail into a fresh snapshot before appending again.
    final = checkpoints(path, 2)
    assert state(load_checkpoint(path)) == state(final)
    assert not log_path(path).exists() or len(log_path(path).read_text().splitlines()) == 1
    assert [n.id for n in final.nodes] == [f"n{i}" for i in range(6)]


def test_a_line_that_does_not_continue_the_journal_ends_the_replay(tmp_path):
    path = tmp_path / "journal.json"
    checkpoints(path, 2)
    gap = Checkpoint(trial_id="t", science_hash="h", seq=9, first_node=5, nodes=[node(5)])
    with open(log_path(path), "a") as handle:
        handle.write(gap.model_dump_json() + "\n")
    loaded = load_checkpoint(path)
    assert loaded is not None and [n.id for n in loaded.nodes] == ["n0", "n1"]


def test_interrupted_append_is_cut_back(tmp_path, monkeypatch):
    path = tmp_path / "journal.json"
    ckpt = checkpoints(path, 2)
    writer = JournalWriter(path, load_checkpoint(path))
    writer._compact_next = False
    size = log_path(path).stat().st_size
    real_write = os.write

    def half_then_interrupt(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])
        raise KeyboardInterrupt  # what a signal handler raising Preempted looks like to the writer

    monkeypatch.setattr(journal_module.os, "write", half_then_interrupt)
    ckpt.nodes = [*ckpt.nodes, node(2)]
    with pytest.raises(KeyboardInterrupt):
        writer.save(ckpt)
    monkeypatch.undo()
    assert log_path(path).stat().st_size == size
    loaded = load_checkpoint(path)
    assert loaded is not None and len(loaded.nodes) == 2


WRITER = """
import sys
from pathlib import Path
from mle_world.agent import journal as j
j.COMPACT_MIN_BYTES = 3000  # compact often, so kills also land inside compactions
path = Path(sys.argv[1])
loaded = j.load_checkpoint(path)
ckpt = loaded or j.Checkpoint(trial_id="t", science_hash="h")
writer = j.JournalWriter(path, loaded)
ckpt.sessions += 1
while True:
    i = len(ckpt.nodes)
    parent = f"n{i - 1}" if i else None
    ckpt.nodes = [*ckpt.nodes, j.Node(id=f"n{i}", step=i, stage="improve", parent_id=parent, code="y" * (i % 7 * 100))]
    ckpt.groups = len(ckpt.nodes)
    ckpt.time_used_s = float(len(ckpt.nodes))
    writer.save(ckpt)
    print(len(ckpt.nodes), flush=True)
"""


def assert_consistent(ckpt: Checkpoint) -> None:
    assert [n.id for n in ckpt.nodes] == [f"n{i}" for i in range(len(ckpt.nodes))]
    assert all(n.parent_id == (f"n{i - 1}" if i else None) for i, n in enumerate(ckpt.nodes))
    # the state on disk belongs to the same checkpoint as the nodes
    assert ckpt.groups == len(ckpt.nodes) and ckpt.time_used_s == float(len(ckpt.nodes))


@pytest.mark.timeout(120)
def test_kill_9_at_random_points_always_leaves_a_consistent_journal(tmp_path):
    path = tmp_path / "journal.json"
    rng = random.Random(16)
    seen = 0
    for session in range(1, 11):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        proc.stdout.readline()  # at least one checkpoint of this session is on disk
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
        ckpt = load_checkpoint(path)
        assert ckpt is not None, f"session {session}"
        assert_consistent(ckpt)
        assert ckpt.sessions == session
        assert len(ckpt.nodes) > seen, "every session's acknowledged checkpoints survive the kill"
        seen = len(ckpt.nodes)
    assert path.exists(), "the writer compacted at least once over the sessions"


def test_compaction_rewrites_a_bounded_multiple_of_what_was_appended(tmp_path, monkeypatch):
    """The snapshot is rewritten only when the log outgrows it, so the bytes all compactions write
    stay within a small multiple of the journal (it doubles between compactions); compacting whenever
    the log passes COMPACT_MIN_BYTES would rewrite the whole journal every few steps (quadratic)."""
    monkeypatch.setattr(journal_module, "COMPACT_MIN_BYTES", 2000)
    path = tmp_path / "journal.json"
    writer = JournalWriter(path, None)
    ckpt = Checkpoint(trial_id="t", science_hash="h")
    rewritten, compactions, seq = 0, 0, None
    for i in range(60):
        ckpt.nodes = [*ckpt.nodes, node(i, 400)]
        writer.save(ckpt)
        snapshot_seq = Checkpoint.model_validate_json(path.read_bytes()).seq if path.exists() else None
        if snapshot_seq != seq:
            compactions, rewritten, seq = compactions + 1, rewritten + path.stat().st_size, snapshot_seq
    journal_bytes = path.stat().st_size + (log_path(path).stat().st_size if log_path(path).exists() else 0)
    # measured: 4 compactions writing 1.8x the journal; compacting past 2000 bytes: 20, 10.6x
    assert compactions >= 2 and rewritten <= 3 * journal_bytes, (compactions, rewritten, journal_bytes)
    assert state(load_checkpoint(path)) == state(ckpt)


def test_each_appended_line_is_fsynced_unless_asked_not_to(tmp_path, monkeypatch):
    """An acknowledged checkpoint survives a machine crash: its line is fsynced before save returns."""
    path = tmp_path / "journal.json"
    ckpt = checkpoints(path, 1)
    writer = JournalWriter(path, load_checkpoint(path))
    writer._compact_next = False
    synced: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(journal_module.os, "fsync", recording_fsync)
    ckpt.nodes = [*ckpt.nodes, node(1)]
    writer.save(ckpt)
    assert synced == [log_path(path).stat().st_ino]
    ckpt.nodes = [*ckpt.nodes, node(2)]
    writer.save(ckpt, sync=False)
    assert len(synced) == 1 and len(log_path(path).read_text().splitlines()) == 3


def test_a_log_line_of_another_trial_ends_the_replay(tmp_path):
    path = tmp_path / "journal.json"
    checkpoints(path, 2)
    other = Checkpoint(trial_id="other", science_hash="h", seq=3, first_node=2, nodes=[node(2)])
    with open(log_path(path), "a") as handle:
        handle.write(other.model_dump_json() + "\n")
    loaded = load_checkpoint(path)
    assert loaded is not None and loaded.trial_id == "t" and [n.id for n in loaded.nodes] == ["n0", "n1"]


@pytest.mark.parametrize("where", ["snapshot", "log line"])
def test_a_journal_one_version_newer_is_refused(tmp_path, where):
    """Its unknown fields would be dropped on resume: refused from the very next version on."""
    path = tmp_path / "journal.json"
    newer = Checkpoint(trial_id="t", science_hash="h", version=journal_module.JOURNAL_VERSION + 1, seq=1)
    if where == "snapshot":
        path.write_text(newer.model_dump_json())
    else:
        checkpoints(path, 1)
        with open(log_path(path), "a") as handle:
            handle.write(newer.model_copy(update={"seq": 2, "first_node": 1}).model_dump_json() + "\n")
    with pytest.raises(journal_module.CorruptJournal, match=f"journal version {newer.version} is newer"):
        load_checkpoint(path)
