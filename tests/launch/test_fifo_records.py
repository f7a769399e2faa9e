"""A FIFO where a record belongs is refused at once by every reader of it, never waited on: the trial's
state machine, its verdict, its spec check, and the audit's reads of reports, statuses and results.

Writes trial dirs with FIFOs under tmp_path (mkfifo) and reads them through the harness's own readers.
Each of these opened the FIFO with `open()`, which blocks until a writer comes; the timeout turns a
block into a failure instead of a hung suite.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from auditkit import tid, trial_dir, write_launch, write_report, write_status

from mle_world.audit.collect import load_sweep, trial_events, trial_predictions
from mle_world.errors import UserError
from mle_world.launch.state import read_status
from mle_world.launch.verdict import read_result
from mle_world.trial_events import read_events

pytestmark = pytest.mark.timeout(60)


def test_the_launchers_readers_refuse_a_fifo(tmp_path: Path) -> None:
    trial = tmp_path / "runs" / "aide" / "iris_seed1"
    trial.mkdir(parents=True)
    os.mkfifo(trial / "status.json")
    os.mkfifo(trial / "result.json")
    os.mkfifo(trial / "events.jsonl")
    with pytest.raises(UserError) as raised:
        read_status(trial, "gated/aide/iris/seed1")
    assert str(raised.value) == f"{trial / 'status.json'}: cannot read the trial status (not a regular file)"
    assert read_result(trial) is None
    assert read_events(trial / "events.jsonl").missing


def test_the_audit_reads_around_a_fifo(tmp_path: Path) -> None:
    out = tmp_path / "gated"
    write_launch(out, "gated", [tid("gated", "aide", "A", 1), tid("gated", "aide", "B", 1)])
    report = write_report(out, "gated", "aide", "A", 1, score=0.9)
    report.unlink()
    os.mkfifo(report)
    write_report(out, "gated", "aide", "B", 1, score=0.9)
    write_status(out, "gated", "aide", "B", 1, "succeeded", None)
    b = trial_dir(out, "aide", "B", 1)
    (b / "status.json").unlink()
    os.mkfifo(b / "status.json")
    os.mkfifo(b / "result.json")
    os.mkfifo(b / "events.jsonl")
    first, second = load_sweep([out]).trials
    assert first.report is None and first.problem == "invalid: unreadable (OSError)"
    assert second.report is not None and second.cause == "unreadable status.json" and second.result is None
    assert trial_predictions(second).predictions == [] and trial_events(second).missing
