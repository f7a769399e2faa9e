"""Grading in a child process: a huge or pathological submission cannot take the launcher down or hang it.

Reads nothing itself (the child reads the submission, the answers and the leaderboard); writes nothing.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mle_world import layout
from mle_world.errors import GraderUnavailableError, NotPreparedError, UserError
from mle_world.escapes import printable
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
    """The built-in/MLE-bench graders (`MultiGrader`) run in a grading process of their own.

    The launcher graded in-process, from its pool threads: a submission of tens of GB (the workspace
    allows 100 GB) read by pandas had the OOM killer take the launcher, and a grader stuck on a
    pathological file hung it. The grading process volunteers as the OOM killer's first victim; one
    killed, crashed or past `timeout_s` on a submission makes that submission invalid (as MLE-bench,
    which would crash or hang on it, gives no score), with the thresholds from a fresh process that
    grades no file (so it reads nothing the submission could make slow: it always gets the full
    `GRADING_TIMEOUT_S`). The process serves one request after another (a regrade of a whole sweep
    imports pandas and mlebench once); `close()` (or `with`) stops it."""

    def __init__(
        self, data_dir: Path, local_competitions: Mapping[str, Path], timeout_s: float = GRADING_TIMEOUT_S
    ) -> None:
        self.data_dir = data_dir
        self.local_competitions = {k: str(v) for k, v in local_competitions.items()}
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._worker: subprocess.Popen[bytes] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=3)
        self._reader: threading.Thread | None = None
        self._buffer = b""

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
                blank = self._run(task, Path(empty) / layout.SUBMISSION_CSV, GRADING_TIMEOUT_S)
            except _ChildFailed as failure:
                raise UserError(f"{task}: grading without a submission failed too ({failure})") from failure
        return blank.model_copy(
            update={
                "submission_exists": submission_exists(submission_path),
                "submission_path": str(submission_path),
                "invalid_reason": str(reason),
            }
        )

    def check(self, tasks: list[str]) -> str | None:
        """Grade no file for each task, in one child: raises what grading them would raise (mlebench
        missing, data not prepared, a leaderboard that is a git-lfs pointer), before a sweep spends
        its GPU-hours on trials that could not be graded. Returns the MLE-bench that graded
        (`GraderReport.mlebench_version`), None when every task is a local competition."""
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
        versions: list[str] = result.get("mlebench_versions") or []
        return "; ".join(versions) or None

    def _run(self, task: str, submission_path: Path, timeout_s: float | None = None) -> GraderReport:
        result = self._child({"task": task, "submission": str(submission_path)}, timeout_s)
        if "user_error" in result:
            raise _error(result)
        return GraderReport.model_validate(result["report"])

    def close(self) -> None:
        """Stop the grading process (it also ends by itself when this process goes)."""
        with self._lock:
            self._stop()

    def __enter__(self) -> IsolatedGrader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _child(self, what: dict[str, object], timeout_s: float | None) -> dict[str, Any]:
        """One request to the grading process (started when there is none), one answer line back."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        request = {"data_dir": str(self.data_dir), "local_competitions": self.local_competitions, **what}
        with self._lock:
            worker = self._worker or self._start()
            try:
                assert worker.stdin is not None
                worker.stdin.write(json.dumps(request).encode() + b"\n")
                worker.stdin.flush()
                line = self._answer(worker, timeout_s)
            except (_ChildFailed, OSError) as exc:
                self._stop()
                if isinstance(exc, _ChildFailed):
                    raise
                raise _ChildFailed(self._death(worker)) from None
        result: dict[str, Any] = json.loads(line[len(_MARK) :])
        return result

    def _start(self) -> subprocess.Popen[bytes]:
        # This very mle_world, whatever put it on the launcher's path; -P: not the cwd's folders first.
        root = str(Path(__file__).resolve().parents[2])
        pythonpath = os.pathsep.join(x for x in (root, os.environ.get("PYTHONPATH")) if x)
        worker = subprocess.Popen(
            [sys.executable, "-P", "-m", "mle_world.grading.isolation"],
            env={**os.environ, "PYTHONPATH": pythonpath},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own group: MLE-bench's venv python goes with it when stopped
        )
        tail: collections.deque[str] = collections.deque(maxlen=3)
        reader = threading.Thread(target=_pass_on, args=(worker, tail), daemon=True)
        reader.start()
        self._worker, self._tail, self._reader, self._buffer = worker, tail, reader, b""
        return worker

    def _answer(self, worker: subprocess.Popen[bytes], timeout_s: float) -> str:
        """The next marked line of the worker's answers, within `timeout_s`."""
        assert worker.stdout is not None
        fd = worker.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise _ChildFailed(f"no result after {timeout_s:.0f} s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise _ChildFailed(self._death(worker))
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def _death(self, worker: subprocess.Popen[bytes]) -> str:
        code = worker.wait()
        if self._reader is not None:
            self._reader.join(5)  # its last words, unless something it started still holds stderr
        if code < 0:
            name = signal.Signals(-code).name
            return f"grading process killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
        return f"grading process exit {code}: {(list(self._tail) or ['no output'])[-1][:300]}"

    def _stop(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)  # the grader and anything it left running
        worker.wait()
        for pipe in (worker.stdin, worker.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _pass_on(worker: subprocess.Popen[bytes], tail: collections.deque[str]) -> None:
    """The worker's stderr (its warnings: they name the task) to this process's log, the last lines kept."""
    assert worker.stderr is not None
    for raw in worker.stderr:
        line = raw.decode(errors="replace").rstrip()
        tail.append(line)
        # Its lines can quote the submission (a hostile CSV): shown inert on the launcher's terminal.
        log.warning("%s", printable(line))


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
    """The grading process: one request per stdin line, one marked answer line each, until stdin ends."""
    with contextlib.suppress(OSError):  # the OOM killer's first choice, before the launcher or a trial
        Path("/proc/self/oom_score_adj").write_text("1000")
    # Answers go to the original stdout only; whatever a grade.py prints goes to stderr instead.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    graders: dict[str, MultiGrader] = {}
    for line in sys.stdin:
        request = json.loads(line)
        key = json.dumps([request["data_dir"], request["local_competitions"]], sort_keys=True)
        grader = graders.get(key)
        if grader is None:
            comps = {k: Path(v) for k, v in request["local_competitions"].items()}
            grader = graders[key] = MultiGrader(Path(request["data_dir"]), comps)
        answers.write(_MARK + json.dumps(_handle(grader, request)) + "\n")
        answers.flush()
    return 0


def _handle(grader: MultiGrader, request: dict[str, Any]) -> dict[str, object]:
    if "check" in request:
        errors: list[dict[str, object]] = []
        versions: set[str] = set()
        with tempfile.TemporaryDirectory(prefix="mle-world-nothing-") as empty:
            for task in request["check"]:
                try:
                    version = grader.grade(task, Path(empty) / layout.SUBMISSION_CSV).mlebench_version
                except UserError as exc:
                    errors.append(_as_result(exc))
                    if isinstance(exc, GraderUnavailableError):
                        break
                else:
                    versions.update([version] if version else [])
        return {"errors": errors, "mlebench_versions": sorted(versions)}
    try:
        report = grader.grade(request["task"], Path(request["submission"]))
    except UserError as exc:
        return _as_result(exc)
    return {"report": report.model_dump(mode="json")}


if __name__ == "__main__":
    sys.exit(main())
