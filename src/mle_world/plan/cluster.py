"""The cluster config (cluster.yaml): Slurm resources and placement, container mounts, launch limits and
the generated code's sandbox. Never part of a trial's identity.

Pure pydantic models; `config.load_cluster_config` reads the file. Writes nothing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from mle_world.plan.runtimes.registry import RUNTIMES
from mle_world.records import Record, SandboxSettings


class _File(Record):
    """cluster.yaml's sections: immutable, unknown keys rejected (a typo is an error)."""


HARNESS_SBATCH: dict[str, str] = {
    "array": "arrays of at most slurm.max_array_tasks, throttled by slurm.array_parallelism",
    "job-name": "the name finds a submission's array again on a re-run",
    "output": "the logs go to <output-dir>/slurm/",
    "error": "the logs go to <output-dir>/slurm/",
    "open-mode": "a requeued trial appends to its log",
    "signal": "USR2 90 s before the limit checkpoints and requeues the trial",
    "dependency": "a sweep's arrays share one array_parallelism: a new array may wait for the live ones",
    "time": "the budget + slurm.grading_margin_min",
    "no-requeue": "preempted and checkpointed trials are requeued and resume",
    "hold": "each array is held until the launcher has recorded its job ids, then released",
    "partition": "use slurm.partition",
    "account": "use slurm.account",
    "qos": "use slurm.qos",
    "mem": "use slurm.mem_gb",
    "cpus-per-task": "use slurm.cpus_per_trial",
    "gpus-per-node": "use slurm.gpus_per_trial and gpu_type",
    "gres": "use slurm.gpus_per_trial, gpu_type and gpu_request: gres",
    "wrap": "the job runs the trial",
}
"""sbatch options the launcher sets itself (name → why): in `extra_sbatch` they would silently replace
the harness's (a job name breaks the reconciliation of submissions, `time` the wall limit's margin)."""


class SlurmSettings(_File):
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gpus_per_trial: int = Field(1, ge=0)
    gpu_request: Literal["gpus-per-node", "gres"] = "gpus-per-node"
    """How sbatch is asked for them: `--gpus-per-node=N` (select/cons_tres), or `--gres=gpu:N`, which
    clusters on select/cons_res (or Slurm before 19.05) need: they refuse --gpus-per-node."""
    gpu_type: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$")
    """A GPU type the cluster's gres.conf names (`a100`): `--gpus-per-node=a100:1`, `--gres=gpu:a100:1`."""
    cpus_per_trial: int = Field(8, ge=1)
    mem_gb: int = Field(64, ge=1)
    array_parallelism: int = Field(32, ge=1)
    max_array_tasks: int | None = Field(None, ge=1)
    """Trials per job array at most (None: the cluster's MaxArraySize); a larger submission becomes
    several arrays that share one array_parallelism."""
    grading_margin_min: int = Field(30, ge=0)
    query_interval_s: float = Field(30.0, ge=0)
    """How often a watching launcher asks squeue and sacct about the sweep's jobs (one call each):
    asked every 2 s, a 12-hour sweep made ~43,000 calls of each to slurmctld and slurmdbd."""
    extra_sbatch: dict[str, bool | int | str | None] = Field(default_factory=dict)
    """More sbatch options, `{constraint: a100}` → `--constraint=a100`; `true` or null → a bare flag
    (`--exclusive`), `false` → left out."""
    setup: tuple[str, ...] = ()

    @field_validator("extra_sbatch")
    @classmethod
    def _free_options(cls, value: dict[str, bool | int | str | None]) -> dict[str, bool | int | str | None]:
        for key in value:
            name = key.lstrip("-").replace("_", "-")
            owner = HARNESS_SBATCH.get(name)
            if owner is not None:
                raise ValueError(f"{key}: set by the harness ({owner}); not an extra option")
        return value


class ContainerSettings(_File):
    mounts: tuple[str, ...] = ()
    """Extra read-only mounts "SRC:DST" (absolute paths) in every runtime, e.g. a shared pip cache."""
    env: tuple[str, ...] = ()

    @field_validator("mounts")
    @classmethod
    def _mount_pairs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            src, sep, dst = entry.partition(":")
            if not sep or not src.startswith("/") or not dst.startswith("/") or ":" in dst:
                raise ValueError(f"{entry!r}: expected SRC:DST with two absolute paths")
            for runtime in RUNTIMES.values():  # a mount reaches every runtime: each must carry it
                bad = [char for char in runtime.inexpressible if char in src + dst]
                if bad:
                    chars = " or ".join(map(repr, bad))
                    raise ValueError(f"{entry!r}: {runtime.mount_syntax} cannot express {chars}")
        return value

    def mount_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((m.partition(":")[0], m.partition(":")[2]) for m in self.mounts)


KILL_GRACE_S = 30
"""After the wall limit's SIGTERM, the launcher SIGKILLs the trial's command this much later."""
USR2_LEAD_S = 90
"""submitit's --signal=USR2@90: this long before a job's time limit the trial is stopped, checkpointed
and requeued (counted against max_attempts)."""


class LaunchSettings(_File):
    max_attempts: int = Field(3, ge=1)
    wall_grace_s: float = Field(900.0, ge=0)


class ClusterConfig(_File):
    """cluster.yaml: resources and placement; never part of a trial's identity."""

    slurm: SlurmSettings = SlurmSettings()
    container: ContainerSettings = ContainerSettings()
    launch: LaunchSettings = LaunchSettings()
    sandbox: SandboxSettings = SandboxSettings()
    """Limits and network of the generated code (docs/threat-model.md); `enabled` is --no-sandbox's."""

    @model_validator(mode="after")
    def _grading_fits_the_job(self) -> ClusterConfig:
        """A Slurm job's time is the budget + grading_margin_min, and a trial may run to the budget +
        wall_grace_s, then take KILL_GRACE_S to die; USR2 comes USR2_LEAD_S before the job's end. With a
        margin not above those, a trial at its wall limit is stopped and requeued before its grading
        (or its own cleanup) runs, every attempt the same way."""
        margin_s = self.slurm.grading_margin_min * 60
        grace_s = self.launch.wall_grace_s
        needed_s = grace_s + KILL_GRACE_S + USR2_LEAD_S
        room_s = margin_s - KILL_GRACE_S - USR2_LEAD_S
        if margin_s <= needed_s:
            raise ValueError(
                f"slurm.grading_margin_min {self.slurm.grading_margin_min} ({margin_s} s) must exceed "
                f"launch.wall_grace_s ({grace_s:g} s) + {KILL_GRACE_S + USR2_LEAD_S} s: a trial that runs to "
                f"its wall limit (budget + wall_grace_s) takes up to {KILL_GRACE_S} s to stop, and Slurm's "
                f"job ends {USR2_LEAD_S} s early for it (USR2, requeue), so its grading would never run; "
                f"raise slurm.grading_margin_min to {int(needed_s // 60) + 1}"
                + (f" or lower launch.wall_grace_s below {room_s} s" if room_s > 0 else "")
            )
        return self
