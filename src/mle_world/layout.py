"""Where a sweep's files live: trial ids, trial dirs, grading reports, cost files, and the globs over them.

Path arithmetic over an output dir, written once here; lists directories for the globs, writes nothing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

RUNS = "runs"
COSTS = "costs"
LAUNCH = "launch.json"
LAUNCHER_LOCK = ".launcher.lock"
"""Held by the one launcher of an output dir for its whole run (launch.liveness.launcher_lock)."""
JOURNAL_LOCK = ".journal.lock"
"""flock'ed by a trial's live agent for its whole life (a second agent, or a launcher, sees it alive)."""
SPEC = "spec.json"
STATUS = "status.json"
COST_SUMMARY = "summary.csv"
REPORT_SUFFIX = "_grading_report.json"
SUBMISSION_RELPATH = Path("submission") / "submission.csv"
NODE_LOGS_RELPATH = Path("logs") / "nodes"
KEPT_SUBMISSION_SUFFIX = ".submission.csv"
"""The agent's copy of a promoted node's submission: `<trial>/logs/nodes/<node id>.submission.csv`."""
"""The graded file, under a trial dir (the agent writes it; the grader reads it)."""

_DIGITS = re.compile(r"(\d+)")
_TRIAL_ID = re.compile(
    r"^(?P<regime>gated|ungated)/(?P<configuration>[^/]+)/(?P<task>[^/]+)/seed(?P<seed>-?\d+)$"
)


@dataclass(frozen=True)
class TrialKey:
    """The four parts that name a trial."""

    regime: str
    configuration: str
    task: str
    seed: int

    @property
    def trial_id(self) -> str:
        return trial_id(self.regime, self.configuration, self.task, self.seed)


def trial_id(regime: str, configuration: str, task: str, seed: int) -> str:
    """`<regime>/<configuration>/<task>/seed<seed>`."""
    return f"{regime}/{configuration}/{task}/seed{seed}"


def parse_trial_id(text: str) -> TrialKey | None:
    """The parts of a trial id, or None when `text` is not one."""
    match = _TRIAL_ID.match(text)
    if match is None:
        return None
    return TrialKey(match["regime"], match["configuration"], match["task"], int(match["seed"]))


def trial_dir(output_dir: Path, configuration: str, task: str, seed: int) -> Path:
    """`runs/<configuration>/<task>_seed<seed>/` (DESIGN §3: the run group is the configuration)."""
    return output_dir / RUNS / configuration / f"{task}_seed{seed}"


def report_beside(trial: Path) -> Path:
    """A trial's grading report lives beside its dir: `runs/<configuration>/<task>_seed<seed>_grading_report.json`."""
    return trial.parent / f"{trial.name}{REPORT_SUFFIX}"


def costs_dir(output_dir: Path) -> Path:
    return output_dir / COSTS


def cost_path(output_dir: Path, configuration: str, task: str, seed: int) -> Path:
    """`costs/<configuration>.<task>.seed<seed>.csv` (flat, so costs/*.csv finds every trial)."""
    return costs_dir(output_dir) / f"{configuration}.{task}.seed{seed}.csv"


def cost_summary_path(output_dir: Path) -> Path:
    return costs_dir(output_dir) / COST_SUMMARY


def natural_key(path: Path) -> tuple[str | int, ...]:
    """Sort key reading digit runs as numbers, so `..._seed9` comes before `..._seed10`."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(str(path)))


def spec_paths(output_dir: Path) -> list[Path]:
    """Every trial's spec.json under the output dir, in natural (seed-numeric) order."""
    return sorted((output_dir / RUNS).glob(f"*/*/{SPEC}"), key=natural_key)


def status_paths(output_dir: Path) -> list[Path]:
    """Every trial's status.json under the output dir, sorted."""
    return [Path(p) for p in status_candidates(output_dir) if os.path.isfile(p)]


def status_candidates(output_dir: Path) -> list[str]:
    """`runs/*/*/status.json` as sorted strings, without checking that each exists (a reader opening
    them learns it anyway). Two levels of scandir and no Path per trial: pathlib's glob of the same
    pattern, and a Path to open, took 0.35 s of a 10,000-trial `status`."""
    found: list[str] = []
    try:
        with os.scandir(output_dir / RUNS) as entries:
            groups = [e.path for e in entries if e.is_dir()]
    except OSError:
        return []
    for group in groups:
        try:
            with os.scandir(group) as entries:
                found.extend(os.path.join(e.path, STATUS) for e in entries if e.is_dir())
        except OSError:
            continue
    return sorted(found)


def report_paths(output_dir: Path) -> list[Path]:
    """Every grading report under the output dir, sorted."""
    return sorted((output_dir / RUNS).glob(f"*/*{REPORT_SUFFIX}"))


_NODE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def is_node_id(text: str) -> bool:
    """Whether `text` can be a node's id (the agent's are uuid4 hex): a plain file name part, no path."""
    return _NODE_ID.fullmatch(text) is not None


def kept_submission(trial_dir: Path, node_id: str) -> Path:
    """Where the agent keeps node `node_id`'s submission (out of the generated code's view)."""
    return trial_dir / NODE_LOGS_RELPATH / f"{node_id}{KEPT_SUBMISSION_SUFFIX}"
