"""Grading in a child process: a huge or pathological submission cannot take the launcher down or hang it.

Reads nothing itself (the child reads the submission, the answers and the leaderboard); writes nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mle_world.errors import GraderUnavailableError, NotPreparedError, UserError
from mle_world.grading.multi import MultiGrader
from mle_world.grading.report import GraderReport
from mle_world.grading.submission import submission_exists

log = logging.getLogger(__name__)

GRADING_TIMEOUT_S = 3600.0
"""One submission's grading, far above MLE-bench's slowest graders (minutes); past it, invalid."""

_MARK = "MLE_WORLD_GRADED "


class _ChildFailed(Exception):
    """The grading process died, timed out or said nothing: the submission could not be graded."""


class IsolatedGrader:
    """The built-in/MLE-bench graders (`MultiGrader`) run in a child process per submission.

    The launcher grades in-process otherwise, from its pool threads: a submission of tens of GB (the
    workspace allows 100 GB) read by pandas had the OOM killer take the launcher, and a grader stuck on
    a pathological file hung it. The child volunteers as the OOM killer's first victim; a child killed,
    crashed or past `timeout_s` makes the submission invalid (as MLE-bench, which would crash or hang on
    it, gives no score), with the thresholds from a second child that grades no file (and so reads
    nothing the submission could make slow: it always gets the full `GRADING_TIMEOUT_S`)."""

    def __init__(
        self, data_dir: Path, local_competitions: Mapping[str, Path], timeout_s: float = GRADING_TIMEOUT_S
    ) -> None:
        self.data_dir = data_dir
        self.local_competitions = {k: str(v) for k, v in local_competitions.items()}
        self.timeout_s = timeout_s

    def grade(self, task: str, submission_path: Path) -> GraderReport:
        """MLE-bench's report for `submission_path`; invalid when its grading process fails."""
        try:
            return self._run(task, submission_path)
        except _ChildFailed as failure:
            reason = failure
            log.warning(
                "%s: grading %s failed (%s); the submission counts as invalid", task, submission_path, failure
            )
        with tempfile.TemporaryDirectory(prefix="mle-world-nothing-") as empty:
            try:
                blank = self._run(task, Path(empty) / "submission.csv", GRADING_TIMEOUT_S)
            except _ChildFailed as failure:
                raise UserError(f"{task}: grading without a submission failed too ({failure})") from failure
        return blank.model_copy(
            update={
                "submission_exists": submission_exists(submission_path),
                "submission_path": str(submission_path),
                "invalid_reason": str(reason),
            }
        )

    def check(self, tasks: list[str]) -> None:
        """Grade no file for each task, in one child: raises what grading them would raise (mlebench
        missing, data not prepared, a leaderboard that is a git-lfs pointer), before a sweep spends
        its GPU-hours on trials that could not be graded."""
        try:
            result = self._child({"check": tasks}, GRADING_TIMEOUT_S)
        except _ChildFailed as failure:
            raise UserError(f"checking the graders of {', '.join(tasks)} failed ({failure})") from failure
        errors = [_error(e) for e in result["errors"]]
        for error in errors:
            if isinstance(error, GraderUnavailableError):
                raise error
        if errors:
            kind = NotPreparedError if all(isinstance(e, NotPreparedError) for e in errors) else UserError
            raise kind("; ".join(str(e) for e in errors))

    def _run(self, task: str, submission_path: Path, timeout_s: float | None = None) -> GraderReport:
        result = self._child({"task": task, "submission": str(submission_path)}, timeout_s)
        if "user_error" in result:
            raise _error(result)
        return GraderReport.model_validate(result["report"])

    def _child(self, what: dict[str, object], timeout_s: float | None) -> dict[str, Any]:
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        request = {"data_dir": str(self.data_dir), "local_competitions": self.local_competitions, **what}
        # This very mle_world, whatever put it on the launcher's path; -P: not the cwd's folders first.
        root = str(Path(__file__).resolve().parents[2])
        pythonpath = os.pathsep.join(x for x in (root, os.environ.get("PYTHONPATH")) if x)
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "mle_world.grading.isolation"],
            env={**os.environ, "PYTHONPATH": pythonpath},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group: MLE-bench's venv python goes with it on a timeout
        )
        try:
            out, err = proc.communicate(json.dumps(request), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise _ChildFailed(f"no result after {timeout_s:.0f} s") from None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # anything the grader left running
        for line in err.splitlines():
            log.warning("%s", line)  # the child names the task itself
        marked = next((x for x in out.splitlines() if x.startswith(_MARK)), None)
        if marked is None:
            if proc.returncode < 0:
                name = signal.Signals(-proc.returncode).name
                why = f"killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
            else:
                tail = (err.strip().splitlines() or ["no output"])[-1]
                why = f"exit {proc.returncode}: {tail[:300]}"
            raise _ChildFailed(f"grading process {why}")
        result: dict[str, Any] = json.loads(marked[len(_MARK) :])
        return result


_KINDS: dict[str, type[UserError]] = {
    "NotPreparedError": NotPreparedError,
    "GraderUnavailableError": GraderUnavailableError,
}


def _error(result: Mapping[str, Any]) -> UserError:
    """The child's UserError, of the same kind."""
    return _KINDS.get(str(result.get("kind", "")), UserError)(str(result["user_error"]))


def _as_result(exc: UserError) -> dict[str, object]:
    return {"user_error": str(exc), "kind": type(exc).__name__}


def main() -> int:
    """The child: one request on stdin, one marked result line on stdout."""
    with contextlib.suppress(OSError):  # the OOM killer's first choice, before the launcher or a trial
        Path("/proc/self/oom_score_adj").write_text("1000")
    request = json.loads(sys.stdin.read())
    grader = MultiGrader(
        Path(request["data_dir"]), {k: Path(v) for k, v in request["local_competitions"].items()}
    )
    result: dict[str, object]
    if "check" in request:
        errors: list[dict[str, object]] = []
        with tempfile.TemporaryDirectory(prefix="mle-world-nothing-") as empty:
            for task in request["check"]:
                try:
                    grader.grade(task, Path(empty) / "submission.csv")
                except UserError as exc:
                    errors.append(_as_result(exc))
                    if isinstance(exc, GraderUnavailableError):
                        break
        result = {"errors": errors}
    else:
        try:
            report = grader.grade(request["task"], Path(request["submission"]))
            result = {"report": report.model_dump(mode="json")}
        except UserError as exc:
            result = _as_result(exc)
    sys.stdout.write(_MARK + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
