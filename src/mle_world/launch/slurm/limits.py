"""The accounting limits a sweep's jobs would be submitted under: the QOS's and the association's MaxWall
and submit-count limits (MaxSubmitJobs per user/account/QOS, GrpSubmitJobs), as `sacctmgr` reports them.

Runs sacctmgr, scontrol and squeue (a few calls per launch); writes nothing. Absent or unanswered
(no sacctmgr, no slurmdbd) it reports no limit: the launch goes on exactly as without this module.
"""

from __future__ import annotations

import os
import pwd
import re
from dataclasses import dataclass

from mle_world.errors import UserError
from mle_world.launch.slurm.queries import run_tool, slurm_minutes

QOS_FIELDS = "Name,MaxWall,MaxSubmitPU,MaxSubmitPA,GrpSubmit,Flags"
ASSOC_FIELDS = "Partition,QOS,DefaultQOS,MaxSubmit,GrpSubmit,MaxWall"
"""`sacctmgr -P -n show qos|assoc format=...` columns read here (`-P`: `|`-separated, no padding)."""


@dataclass(frozen=True)
class WallLimit:
    minutes: int
    text: str
    """As sacctmgr prints it (`04:00:00`, `1-00:00:00`)."""
    owner: str
    """Whose limit, as the refusal names it: `QOS normal (slurm.qos)`, `the association of account a`."""
    reason: str
    """The reason squeue would show for the jobs it keeps pending."""


@dataclass(frozen=True)
class SubmitLimit:
    limit: int
    name: str
    """`MaxSubmitJobsPerUser of QOS normal`, `MaxSubmitJobs of the association of account a`, ..."""
    queued: int
    """Jobs (array tasks counted one by one, held or dependent ones too) already counted against it."""

    @property
    def room(self) -> int:
        return max(0, self.limit - self.queued)


@dataclass(frozen=True)
class AccountLimits:
    """What sacctmgr says applies to a submission of this user (under an account, partition, QOS)."""

    wall: WallLimit | None
    submit: tuple[SubmitLimit, ...]

    def room(self) -> SubmitLimit | None:
        """The submit-count limit with the least room left (None: no such limit)."""
        return min(self.submit, key=lambda s: s.room) if self.submit else None


@dataclass(frozen=True)
class _Qos:
    name: str
    max_wall: str
    max_submit_pu: str
    max_submit_pa: str
    grp_submit: str
    flags: str


def _rows(argv: list[str], width: int) -> list[list[str]] | None:
    out = run_tool(argv)
    if out is None:
        return None
    return [(line.split("|") + [""] * width)[:width] for line in out.splitlines() if line.strip()]


def _config(key: str) -> str | None:
    out = run_tool(["scontrol", "show", "config"]) or ""
    match = re.search(rf"^{key}\s*=\s*(\S+)", out, re.M)
    return match[1] if match else None


def _default_partition() -> str | None:
    for line in (run_tool(["sinfo", "-h", "-o", "%P"]) or "").splitlines():
        if line.strip().endswith("*"):
            return line.strip().rstrip("*")
    return None


def _partition_qos(partition: str | None) -> str | None:
    if not partition:
        return None
    out = run_tool(["scontrol", "show", "partition", partition, "-o"]) or ""
    match = re.search(r"\bQoS=(\S+)", out)
    return match[1] if match and match[1] not in ("N/A", "(null)") else None


def _count(argv: list[str]) -> int | None:
    out = run_tool(["squeue", "-h", "-r", "-o", "%i", *argv])
    return None if out is None else sum(1 for line in out.splitlines() if line.strip())


def _number(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def read_limits(*, account: str | None, qos: str | None, partition: str | None) -> AccountLimits | None:
    """The limits of the association (user, account — slurm.account or the user's default — and
    partition) and of the QOS (slurm.qos or the association's default) and partition QOS the jobs
    would run under, with what already counts against them (one squeue per limit's scope). None when
    sacctmgr cannot answer (no accounting): nothing is known, nothing is refused."""
    user = pwd.getpwuid(os.getuid()).pw_name
    users = _rows(["sacctmgr", "-P", "-n", "show", "user", user, "format=DefaultAccount"], 1)
    if not users:
        return None
    account = account or users[0][0] or None
    cluster = _config("ClusterName")
    where = (
        [f"user={user}"]
        + ([f"account={account}"] if account else [])
        + ([f"cluster={cluster}"] if cluster else [])
    )
    assocs = _rows(["sacctmgr", "-P", "-n", "show", "assoc", "where", *where, f"format={ASSOC_FIELDS}"], 6)
    if assocs is None:
        return None
    partition = partition or _default_partition()
    # A partition's own association wins over the account's general one (Partition empty).
    assoc = next((r for r in assocs if r[0] == partition), None) or next(
        (r for r in assocs if not r[0]), None
    )
    allowed = [q for q in (assoc[1].split(",") if assoc else []) if q]
    job_qos = (
        qos or (assoc[2] if assoc and assoc[2] else None) or (allowed[0] if len(allowed) == 1 else "normal")
    )
    part_qos = _partition_qos(partition)
    names = [q for q in (part_qos, job_qos) if q]
    rows = _rows(
        ["sacctmgr", "-P", "-n", "show", "qos", "where", f"name={','.join(names)}", f"format={QOS_FIELDS}"], 6
    )
    by_name = {r[0]: _Qos(*r) for r in rows or []}
    job = by_name.get(job_qos)
    part = by_name.get(part_qos or "")
    # Slurm's order: the partition's QOS before the job's, unless the job's has OverPartQOS; then the
    # association (whose limits sacctmgr shows already inherited from the parent accounts).
    over = job is not None and "OverPartQOS" in job.flags.split(",")
    qos_order = [q for q in ((job, part) if over else (part, job)) if q is not None]
    job_label = f"QOS {job_qos} (slurm.qos)" if qos else f"QOS {job_qos} (the default QOS; slurm.qos)"

    def label(q: _Qos) -> str:
        return job_label if q is job else f"QOS {q.name} (of partition {partition})"

    acct = f"the association of user {user}, account {account or '(default)'} (slurm.account)"
    wall: WallLimit | None = None
    for q in qos_order:
        if q.max_wall and slurm_minutes(q.max_wall) is not None:
            wall = WallLimit(
                slurm_minutes(q.max_wall) or 0, q.max_wall, label(q), "QOSMaxWallDurationPerJobLimit"
            )
            break
    if wall is None and assoc and slurm_minutes(assoc[5]) is not None:
        wall = WallLimit(slurm_minutes(assoc[5]) or 0, assoc[5], acct, "AssocMaxWallDurationPerJobLimit")

    found: list[SubmitLimit] = []
    for kind, pick, scope in (
        ("MaxSubmitJobsPerUser", lambda q: q.max_submit_pu, ["-u", user]),
        ("MaxSubmitJobsPerAccount", lambda q: q.max_submit_pa, ["-A", account or ""]),
        ("GrpSubmitJobs", lambda q: q.grp_submit, []),
    ):
        for q in qos_order:
            limit = _number(pick(q))
            if limit is None:
                continue
            if kind == "MaxSubmitJobsPerAccount" and not account:
                break
            queued = _count([*scope, "-q", q.name])
            if queued is not None:
                found.append(SubmitLimit(limit, f"{kind} {limit} of {label(q)}", queued))
            break
    if assoc:
        for kind, text in (("MaxSubmitJobs", assoc[3]), ("GrpSubmitJobs", assoc[4])):
            limit = _number(text)
            queued = (
                _count(["-u", user] + (["-A", account] if account else [])) if limit is not None else None
            )
            if limit is not None and queued is not None:
                found.append(SubmitLimit(limit, f"{kind} {limit} of {acct}", queued))
    return AccountLimits(wall, tuple(found))


def check_wall(limits: AccountLimits | None, minutes: int) -> None:
    """Refuse a job time above the MaxWall that applies: the array would pend for ever (reason
    QOSMaxWallDurationPerJobLimit / AssocMaxWallDurationPerJobLimit) or sbatch refuse it."""
    wall = limits.wall if limits else None
    if wall is not None and minutes > wall.minutes:
        raise UserError(
            f"{wall.owner}: MaxWall {wall.text} ({wall.minutes} min), but each trial's job needs {minutes} min "
            f"(the budget + slurm.grading_margin_min): Slurm would keep the array pending for ever "
            f"({wall.reason}); choose another QOS or account, or a smaller budget or margin"
        )


def first_wave(n_trials: int, limits: AccountLimits | None) -> tuple[int, SubmitLimit | None]:
    """How many of `n_trials` may be submitted now, and the limit that holds the rest back (None: all)."""
    tightest = limits.room() if limits else None
    if tightest is None or tightest.room >= n_trials:
        return n_trials, None
    return tightest.room, tightest
