"""Where a sweep's files live: every file of an output dir and of a trial dir by name, trial ids, and the globs.

Path arithmetic over an output dir, written once here (`OutputFiles`, `TrialFiles`); lists directories
for the globs, writes nothing. No other module names one of these files (tests/test_layout_names.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

# An output dir's files.
RUNS = "runs"
COSTS = "costs"
AUDIT = "audit"
SLURM = "slurm"
"""submitit's folder (pickled jobs, its logs) and the Slurm intents under it."""
INTENTS = "intents"
CANCELLED = "cancelled.json"
"""When `run_paper.py cancel` last cancelled the sweep: a watching launcher then submits no more."""
SBATCH_PREVIEW = "preview"
LAUNCH = "launch.json"
DRY_RUN_LAUNCH = "launch.dry-run.json"
AGENT_CONFIG = "agent-config.yaml"
DRY_RUN_AGENT_CONFIG = "agent-config.dry-run.yaml"
SWEEP_IDENTITY = ".sweep-identity"
LAUNCHER_LOCK = ".launcher.lock"
"""Held by the one launcher of an output dir for its whole run (launch.liveness.launcher_lock)."""
COST_SUMMARY = "summary.csv"
REPLAY = "replay"
"""`replay`'s default --out: `replay/<world model>/` (ReplayFiles), beside the trials it never touches."""
REPLIES = "replies.jsonl"
REPLAY_REPORT = "replay-report.md"
REPORT_SUFFIX = "_grading_report.json"

# A trial dir's files.
SPEC = "spec.json"
STATUS = "status.json"
STATUS_LOCK = ".status.lock"
JOURNAL = "journal.json"
JOURNAL_LOG = "journal.jsonl"
"""The journal's append-only log beside its snapshot (agent.journal.log_path)."""
JOURNAL_LOCK = ".journal.lock"
"""flock'ed by a trial's live agent for its whole life (a second agent, or a launcher, sees it alive)."""
EVENTS = "events.jsonl"
RESULT = "result.json"
AUDIT_DIGEST_SUFFIX = "_audit-digest.json"
"""A trial's audit digest beside its dir (`digest_beside`): what the audit reads of the trial's files, read
when the trial ended (audit/digest.py). Outside the trial dir, so writing it leaves that dir's stamp as it was."""
GATHERED_DIGESTS = "audit-digests.tsv"
"""`runs/<configuration>/audit-digests.tsv`: that configuration's trials' audit digests gathered in one
file when a launch ends (audit/digest_files.py), so that a first audit reads one file, not one per trial: a
line of the code's digest, then a line per trial, its dir name, a tab and its digest's JSON as written."""
PREVIOUS_RESULT = "result.previous.json"
"""An earlier run's result.json, moved into logs/ when the trial runs again."""
BEST_SOLUTION = "best_solution.py"
SUBMISSION_DIR = "submission"
SUBMISSION_CSV = "submission.csv"
"""The graded file's name, under `submission/` (of the trial dir, and of a run's workspace)."""
LOGS = "logs"
AGENT_LOG = "agent.log"
LAUNCHER_LOG = "launcher.log"
STAGED_SUBMISSION = "staged-submission.csv"
WORKSPACE = "workspace"
SUBMISSION_RELPATH = Path(SUBMISSION_DIR) / SUBMISSION_CSV
"""The graded file, under a trial dir (the agent writes it; the grader reads it)."""
NODE_LOGS_RELPATH = Path(LOGS) / "nodes"
KEPT_SUBMISSION_SUFFIX = ".submission.csv"
"""The agent's copy of a promoted node's submission: `<trial>/logs/nodes/<node id>.submission.csv`."""

TRIAL_RECORDS = (JOURNAL, JOURNAL_LOG, EVENTS, STATUS, RESULT, SPEC)
"""A trial's records, the ones the trial page (`show`) digests."""
FILE_NAMES = frozenset(
    {
        *(RUNS, COSTS, AUDIT, SLURM, LAUNCH, DRY_RUN_LAUNCH, AGENT_CONFIG, DRY_RUN_AGENT_CONFIG),
        *(SWEEP_IDENTITY, LAUNCHER_LOCK, SPEC, STATUS, STATUS_LOCK, JOURNAL, JOURNAL_LOG, JOURNAL_LOCK),
        *(EVENTS, RESULT, PREVIOUS_RESULT, BEST_SOLUTION, SUBMISSION_DIR, SUBMISSION_CSV, LOGS),
        *(AGENT_LOG, LAUNCHER_LOG, STAGED_SUBMISSION, WORKSPACE, INTENTS, CANCELLED, SBATCH_PREVIEW),
        *(REPLAY, REPLIES, REPLAY_REPORT, AUDIT_DIGEST_SUFFIX, GATHERED_DIGESTS),
    }
)
"""Every name above: no other module of the package spells one (tests/test_layout_names.py)."""


@dataclass(frozen=True)
class TrialFiles:
    """Every file of one trial dir, by name (`runs/<configuration>/<task>_seed<seed>/`)."""

    dir: Path

    @property
    def spec(self) -> Path:
        return self.dir / SPEC

    @property
    def status(self) -> Path:
        return self.dir / STATUS

    @property
    def status_lock(self) -> Path:
        """flock'ed by each writer of status.json (launch.state)."""
        return self.dir / STATUS_LOCK

    @property
    def journal(self) -> Path:
        return self.dir / JOURNAL

    @property
    def journal_log(self) -> Path:
        return self.dir / JOURNAL_LOG

    @property
    def journal_lock(self) -> Path:
        return self.dir / JOURNAL_LOCK

    @property
    def events(self) -> Path:
        return self.dir / EVENTS

    @property
    def result(self) -> Path:
        return self.dir / RESULT

    @property
    def best_solution(self) -> Path:
        return self.dir / BEST_SOLUTION

    @property
    def submission_dir(self) -> Path:
        return self.dir / SUBMISSION_DIR

    @property
    def submission(self) -> Path:
        """The graded file."""
        return self.dir / SUBMISSION_RELPATH

    @property
    def logs(self) -> Path:
        return self.dir / LOGS

    @property
    def agent_log(self) -> Path:
        return self.logs / AGENT_LOG

    @property
    def launcher_log(self) -> Path:
        return self.logs / LAUNCHER_LOG

    @property
    def previous_result(self) -> Path:
        return self.logs / PREVIOUS_RESULT

    @property
    def staged_submission(self) -> Path:
        """The last run's submission as the agent copied it out of the workspace."""
        return self.logs / STAGED_SUBMISSION

    @property
    def node_logs(self) -> Path:
        return self.dir / NODE_LOGS_RELPATH

    @property
    def workspace(self) -> Path:
        return self.dir / WORKSPACE

    @property
    def report(self) -> Path:
        """The grading report, beside the dir (`report_beside`)."""
        return report_beside(self.dir)


@dataclass(frozen=True)
class OutputFiles:
    """Every file of an output dir (a sweep's), by name; its trials' through `trial`."""

    dir: Path

    @property
    def runs(self) -> Path:
        return self.dir / RUNS

    @property
    def launch(self) -> Path:
        return self.dir / LAUNCH

    @property
    def dry_run_launch(self) -> Path:
        """A dry run's launch.json beside a real run's (which it never overwrites)."""
        return self.dir / DRY_RUN_LAUNCH

    @property
    def agent_config(self) -> Path:
        return self.dir / AGENT_CONFIG

    @property
    def dry_run_agent_config(self) -> Path:
        return self.dir / DRY_RUN_AGENT_CONFIG

    @property
    def sweep_identity(self) -> Path:
        return self.dir / SWEEP_IDENTITY

    @property
    def launcher_lock(self) -> Path:
        return self.dir / LAUNCHER_LOCK

    @property
    def costs(self) -> Path:
        return self.dir / COSTS

    @property
    def cost_summary(self) -> Path:
        return self.costs / COST_SUMMARY

    @property
    def audit(self) -> Path:
        """The audit's default --out."""
        return self.dir / AUDIT

    @property
    def slurm(self) -> Path:
        return self.dir / SLURM

    @property
    def intents(self) -> Path:
        """Slurm submissions recorded before sbatch (launch.intents): `slurm/intents/<submission>.json`."""
        return self.slurm / INTENTS

    @property
    def cancelled(self) -> Path:
        """`run_paper.py cancel`'s record (launch.slurm.intents): `slurm/cancelled.json`."""
        return self.slurm / CANCELLED

    @property
    def sbatch_preview(self) -> Path:
        """A Slurm dry run's sbatch scripts."""
        return self.slurm / SBATCH_PREVIEW

    def trial(self, configuration: str, task: str, seed: int) -> TrialFiles:
        return TrialFiles(trial_dir(self.dir, configuration, task, seed))

    def replay(self, model: str) -> ReplayFiles:
        """`replay`'s default --out for one world model (its id made a safe folder name)."""
        return ReplayFiles(
            self.dir / REPLAY / (re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip(".-") or "model")
        )


@dataclass(frozen=True)
class ReplayFiles:
    """The files of one replay's --out dir: the replies (append-only) and the report."""

    dir: Path

    @property
    def replies(self) -> Path:
        """One line per answered world-model request, keyed by its request id (replay/replies.py)."""
        return self.dir / REPLIES

    @property
    def report(self) -> Path:
        return self.dir / REPLAY_REPORT


_DIGITS = re.compile(r"(\d+)")
_TRIAL_ID = re.compile(
    r"^(?P<regime>gated|ungated)/(?P<configuration>[^/]+)/(?P<task>[^/]+)/seed(?P<seed>-?\d+)$"
)


class TrialKey(NamedTuple):
    """The four parts that name a trial (a named tuple: the audit parses 100,000 ids, and a frozen
    dataclass's four `object.__setattr__` calls were most of that)."""

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
    regime, configuration, task, seed = match.groups()
    return TrialKey(regime, configuration, task, int(seed))


def trial_dir(output_dir: Path, configuration: str, task: str, seed: int) -> Path:
    """`runs/<configuration>/<task>_seed<seed>/` (DESIGN §3: the run group is the configuration)."""
    return output_dir / RUNS / configuration / f"{task}_seed{seed}"


def report_beside(trial: Path) -> Path:
    """A trial's grading report lives beside its dir: `runs/<configuration>/<task>_seed<seed>_grading_report.json`."""
    return trial.parent / f"{trial.name}{REPORT_SUFFIX}"


def parse_trial_dir(trial: Path) -> tuple[str, str, int] | None:
    """(configuration, task, seed) of the dir `trial_dir` puts at `trial`, or None when it is not one."""
    task, sep, seed = trial.name.rpartition("_seed")
    if not sep or not task or _SEED.fullmatch(seed) is None:
        return None
    return trial.parent.name, task, int(seed)


_SEED = re.compile(r"-?\d+")


def digest_beside(trial: Path) -> Path:
    """A trial's audit digest lives beside its dir: `runs/<configuration>/<task>_seed<seed>_audit-digest.json`."""
    return trial.parent / f"{trial.name}{AUDIT_DIGEST_SUFFIX}"


def costs_dir(output_dir: Path) -> Path:
    return OutputFiles(output_dir).costs


def cost_path(output_dir: Path, configuration: str, task: str, seed: int) -> Path:
    """`costs/<configuration>.<task>.seed<seed>.csv` (flat, so costs/*.csv finds every trial)."""
    return costs_dir(output_dir) / cost_name(configuration, task, seed)


def cost_name(configuration: str, task: str, seed: int) -> str:
    """A trial's cost CSV's name in `costs/`."""
    return f"{configuration}.{task}.seed{seed}.csv"


def cost_summary_path(output_dir: Path) -> Path:
    return OutputFiles(output_dir).cost_summary


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
