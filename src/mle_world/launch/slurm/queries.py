"""What Slurm's own tools say: job states (squeue/sacct), live tasks by job name, MaxArraySize, partition
time limits, and whether the tools are on PATH.

Runs squeue, sacct, scontrol and sinfo (one call each per question, whatever the sweep's size); writes
nothing. Light on purpose: `status` imports it without the Slurm backend.
"""

from __future__ import annotations

import math
import re
import subprocess
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from mle_world.errors import UserError

ALIVE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "REQUEUED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "CONFIGURING",
        "COMPLETING",
        "SUSPENDED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "RESV_DEL_HOLD",
        "STOPPED",
    }
)
"""Slurm job states in which the job may still run (or run again) and write its own status."""


DEFAULT_MAX_ARRAY_SIZE = 1001
"""Slurm's default MaxArraySize: array indices 0..1000, so at most 1001 tasks per array."""


@dataclass(frozen=True)
class SlurmView:
    """What squeue and sacct said about some jobs; `answered` is False when both failed (then the
    absence of a job is no evidence of anything)."""

    states: dict[str, str]
    squeue_ok: bool
    sacct_ok: bool

    @property
    def answered(self) -> bool:
        return self.squeue_ok or self.sacct_ok

    def known_gone(self, job_id: str) -> bool:
        """Positive evidence that Slurm has no such job: both tools answered and neither lists it."""
        return self.squeue_ok and self.sacct_ok and job_id not in self.states


@dataclass(frozen=True)
class LiveTask:
    """One task of a live (pending/running) job, as squeue lists it with `-r`."""

    job_id: str
    """`123_4` for task 4 of array 123, `123` for a single job."""
    name: str
    state: str

    @property
    def index(self) -> int:
        return int(self.job_id.split("_")[1]) if "_" in self.job_id else 0


TOOL_TIMEOUT_S = 60.0
"""How long a Slurm tool may take before it counts as failed (the launcher's queries)."""

POLL_S = 2.0
"""How often a watching launcher reads its trials' status files; it asks Slurm at the first read at
least `slurm.query_interval_s` after its last question."""


def query_period_s(query_interval_s: float) -> float:
    """How often a watching launcher asks Slurm (and so hands a freed slot on to a later array): at
    its first status read, every `POLL_S`, at least `query_interval_s` after the last question."""
    return max(POLL_S, math.ceil(query_interval_s / POLL_S) * POLL_S)


QUEUE_TIMEOUT_S = 5.0
"""How long `status` waits for its one squeue. A controller that does not answer costs this once a
poll: squeue's own retries (a connect a second for MessageTimeout, 10 s by default) took 18 s a call."""


def run_tool(argv: list[str], timeout_s: float = TOOL_TIMEOUT_S) -> str | None:
    """A Slurm tool's stdout; None when it is missing, hangs past `timeout_s` or fails."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


_BRACKET = re.compile(r"^(\d+)_\[(.+?)(?:%\d+)?\]$")


def _expand(job_id: str) -> list[str]:
    """sacct shows pending array tasks compressed: 12_[3-5,8%2] → 12_3, 12_4, 12_5, 12_8."""
    match = _BRACKET.match(job_id)
    if not match:
        return [job_id]
    out: list[str] = []
    for part in match[2].split(","):
        low, _, high = part.partition("-")
        out.extend(f"{match[1]}_{i}" for i in range(int(low), int(high or low) + 1))
    return out


def query_states(job_ids: Sequence[str]) -> SlurmView:
    """squeue (live jobs, one line per array task) overrides sacct (accounting, finished jobs)."""
    roots = sorted({j.split("_")[0] for j in job_ids})
    if not roots:
        return SlurmView({}, squeue_ok=True, sacct_ok=True)
    sacct = query_accounting(job_ids, TOOL_TIMEOUT_S)
    states = dict(sacct or {})
    squeue = run_tool(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(roots)])
    for line in (squeue or "").splitlines():
        job, _, state = line.partition("|")
        states[job.strip()] = state.strip()
    return SlurmView(states, squeue_ok=squeue is not None, sacct_ok=sacct is not None)


@dataclass(frozen=True)
class QueueView:
    """What one squeue said about some arrays' live tasks; `problem` says why squeue gave no answer
    (then nothing is known of Slurm, and the caller asks nothing more this poll)."""

    tasks: dict[str, tuple[str, str]]
    """`12_3` → (state, reason) for every pending, running, ... task of the arrays asked about."""
    problem: str | None = None

    def pending_reasons(self, roots: Collection[str]) -> Counter[str]:
        """Why the pending tasks of these arrays wait: squeue's reason → tasks."""
        return Counter(
            reason
            for job, (state, reason) in self.tasks.items()
            if state == "PENDING" and job.split("_")[0] in roots
        )


_NO_SUCH_JOB = "Invalid job id specified"
"""squeue's complaint (exit 1) when the one job id it was given is gone from the controller."""


def query_queue(job_ids: Sequence[str], timeout_s: float | None = None) -> QueueView:
    """One squeue for every array of `job_ids` (states and pending reasons of their live tasks), killed
    after `timeout_s` (QUEUE_TIMEOUT_S): one question to the controller a poll, whatever the number of
    arrays (squeue filters one listing of the queue by every id given)."""
    roots = sorted({j.split("_")[0] for j in job_ids})
    if not roots:
        return QueueView({})
    timeout_s = QUEUE_TIMEOUT_S if timeout_s is None else timeout_s
    argv = ["squeue", "-h", "-r", "-o", "%i|%T|%r", "-j", ",".join(roots)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return QueueView({}, f"squeue did not answer within {timeout_s:g} s")
    except OSError as exc:
        return QueueView({}, f"squeue: {exc.strerror or exc}")
    if proc.returncode != 0:
        said = " ".join(proc.stderr.split())
        if _NO_SUCH_JOB in said:  # the controller answered: no such job (any longer)
            return QueueView({})
        return QueueView({}, f"squeue: {said[:200] or f'exit {proc.returncode}'}")
    tasks: dict[str, tuple[str, str]] = {}
    for line in proc.stdout.splitlines():
        job, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        if job.strip():
            tasks[job.strip()] = (state.strip(), reason.strip())
    return QueueView(tasks)


def query_accounting(job_ids: Sequence[str], timeout_s: float | None = None) -> dict[str, str] | None:
    """sacct's state of every task of these jobs' arrays (pending tasks expanded); None when sacct
    cannot answer within `timeout_s` (QUEUE_TIMEOUT_S).

    An array cancelled before any task started is one record, listed under the array's own id (`37`,
    not `37_[0-4]`): each asked task of it takes that record's state. Without it `status` said
    'submitted' for ever for the tasks a `cancel` stopped in the queue.
    """
    roots = sorted({j.split("_")[0] for j in job_ids})
    if not roots:
        return {}
    timeout_s = QUEUE_TIMEOUT_S if timeout_s is None else timeout_s
    out = run_tool(["sacct", "-X", "-P", "-n", "-o", "JobID,State", "-j", ",".join(roots)], timeout_s)
    if out is None:
        return None
    states: dict[str, str] = {}
    for line in out.splitlines():
        job, _, state = line.partition("|")
        for one in _expand(job.strip()):
            states[one] = state.split()[0] if state.strip() else "UNKNOWN"
    for job in job_ids:
        root, _, task = job.partition("_")
        if task and job not in states and root in states:
            states[job] = states[root]
    return states


_JOB_TIME = "the budget + slurm.grading_margin_min"
_NEVER = "never start as submitted: run_paper.py cancel, then"
_WAIT = "start as jobs of yours end"
PENDING_HINTS: dict[str, str] = {
    "QOSMaxWallDurationPerJobLimit": f"{_NEVER} choose a QOS (slurm.qos) whose MaxWall fits {_JOB_TIME}",
    "AssocMaxWallDurationPerJobLimit": f"{_NEVER} choose an account (slurm.account) whose MaxWall fits {_JOB_TIME}",
    "PartitionTimeLimit": f"{_NEVER} choose a partition (slurm.partition) whose limit fits {_JOB_TIME}",
    "BadConstraints": f"{_NEVER} fix the resources or constraints (cluster.yaml slurm)",
    "AssocMaxJobsLimit": f"{_WAIT} (the association's MaxJobs)",
    "AssocGrpJobsLimit": f"{_WAIT} or your account's (GrpJobs)",
    "QOSMaxJobsPerUserLimit": f"{_WAIT} (the QOS's MaxJobsPerUser)",
    "QOSGrpJobsLimit": f"{_WAIT} or the QOS's users' (GrpJobs)",
    "AssocMaxSubmitJobLimit": f"{_WAIT} (the association's MaxSubmitJobs)",
    "QOSMaxSubmitJobPerUserLimit": f"{_WAIT} (the QOS's MaxSubmitJobsPerUser)",
}
"""What a pending reason of an accounting or partition limit means for a sweep (squeue's `%r`)."""


def ended_cause(job: str, state: str, mem_gb: int) -> str:
    """The cause a trial gets when Slurm says its job ended without a result; OUT_OF_MEMORY (the job's
    cgroup hit --mem: its OOM killer ended the trial) says so in words."""
    if state == "OUT_OF_MEMORY":
        return (
            f"out of memory: slurm job {job} OUT_OF_MEMORY without a result (--mem {mem_gb}GB, slurm.mem_gb)"
        )
    return f"slurm job {job} {state} without a result"


MAX_ARRAY_SIZE_ATTEMPTS = 3
"""`scontrol show config` tries before MaxArraySize falls back to Slurm's default: a busy controller
fails a call now and then, and a wrong size either makes sbatch refuse every array or splits for nothing."""


def query_max_array_size() -> int:
    """MaxArraySize from `scontrol show config`; Slurm's default when scontrol cannot answer."""
    # Imported here: `status` imports this module and never asks (tenacity costs 20 ms to import).
    from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_exponential

    out = Retrying(
        stop=stop_after_attempt(MAX_ARRAY_SIZE_ATTEMPTS),
        wait=wait_exponential(multiplier=0.5, max=4),
        retry=retry_if_result(lambda answer: answer is None),
        retry_error_callback=lambda _state: None,
    )(run_tool, ["scontrol", "show", "config"])
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", out or "", re.M)
    return int(match[1]) if match and int(match[1]) > 0 else DEFAULT_MAX_ARRAY_SIZE


def query_live(job_names: Sequence[str]) -> list[LiveTask] | None:
    """squeue by job name (a submission's name is unique: it carries the submission id)."""
    if not job_names:
        return []
    out = run_tool(["squeue", "-h", "-r", "-o", "%i|%j|%T", "-n", ",".join(job_names)])
    if out is None:
        return None
    tasks = []
    for line in out.splitlines():
        job, name, state = (line.split("|") + ["", ""])[:3]
        if job.strip():
            tasks.append(LiveTask(job.strip(), name.strip(), state.strip()))
    return tasks


def slurm_minutes(text: str) -> int | None:
    """A Slurm time limit as sinfo prints it (`30:00`, `12:00:00`, `2-00:00:00`, `1-12`) in minutes;
    None for `infinite`/`UNLIMITED` or anything unreadable."""
    days, _, clock = text.strip().rpartition("-")
    parts = clock.split(":")
    if not days.isdigit() and days or not all(p.isdigit() for p in parts) or len(parts) > 3:
        return None
    numbers = [int(p) for p in parts]
    if days:  # D-HH, D-HH:MM, D-HH:MM:SS
        hours, minutes, seconds = (numbers + [0, 0])[:3]
        return int(days) * 1440 + hours * 60 + minutes + math.ceil(seconds / 60)
    if len(numbers) == 3:  # HH:MM:SS
        return numbers[0] * 60 + numbers[1] + math.ceil(numbers[2] / 60)
    if len(numbers) == 2:  # MM:SS
        return numbers[0] + math.ceil(numbers[1] / 60)
    return numbers[0]  # MM


def check_partition_time(partition: str | None, minutes: int) -> None:
    """Refuse a job time above the partition's limit: with Slurm's default EnforcePartLimits=NO sbatch
    accepts it and the array waits for ever (reason PartitionTimeLimit) while the launcher watches.
    Says nothing when sinfo cannot answer or does not know the partition (sbatch then says why)."""
    out = run_tool(["sinfo", "-h", "-o", "%P|%l"])
    for line in (out or "").splitlines():
        name, _, limit = line.partition("|")
        default = name.endswith("*")
        if (partition is None and default) or name.rstrip("*") == partition:
            most = slurm_minutes(limit)
            if most is not None and minutes > most:
                where = (
                    f"slurm.partition {partition}"
                    if partition
                    else f"the default partition {name.rstrip('*')}"
                )
                raise UserError(
                    f"{where}: time limit {limit.strip()} ({most} min), but each trial's job needs {minutes} min "
                    "(the budget + slurm.grading_margin_min): Slurm would keep the array pending for ever "
                    "(PartitionTimeLimit); choose a partition with a longer limit, or a smaller budget or margin"
                )
            return


def check_sbatch_available() -> None:
    for tool in ("sbatch", "squeue", "sacct"):
        if run_tool(["which", tool]) is None:
            raise UserError(f"--backend slurm: '{tool}' not found on PATH (run on a Slurm login node)")
