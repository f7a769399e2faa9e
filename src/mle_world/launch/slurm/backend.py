"""Slurm backend: submitit job arrays (split at MaxArraySize), their sbatch parameters from cluster.yaml,
and a checkpointable trial callable that requeues on preemption/timeout.

Writes `<output_dir>/slurm/` (submitit's folder: sbatch scripts, pickles, logs) and, for dry runs,
`<output_dir>/slurm/preview/*.sbatch`; asks Slurm through `launch.slurm.queries`.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, SimpleNamespace
from typing import Any, Protocol

from mle_world import layout
from mle_world.errors import UserError
from mle_world.launch.slurm.limits import AccountLimits, read_limits
from mle_world.launch.slurm.queries import (
    DEFAULT_MAX_ARRAY_SIZE,
    LiveTask,
    SlurmView,
    check_partition_time,
    query_live,
    query_max_array_size,
    query_states,
    run_tool,
)
from mle_world.launch.slurm.throttle import ArrayThrottle
from mle_world.launch.state import Start, mark_checkpointed, mark_failed_infra
from mle_world.launch.trial import Outcome, PostTrial, TrialJob, TrialSupervisor
from mle_world.plan.cluster import USR2_LEAD_S, ClusterConfig, SlurmSettings
from mle_world.plan.sweep_plan import LaunchOptions, SweepPlan
from mle_world.storage import write_text_atomic


def array_chunks(n_trials: int, cluster: ClusterConfig, max_array_size: int) -> list[range]:
    """The arrays a submission of `n_trials` becomes: each at most `slurm.max_array_tasks` and the
    cluster's MaxArraySize (indices run 0..MaxArraySize-1, else sbatch refuses the whole array)."""
    size = min(cluster.slurm.max_array_tasks or max_array_size, max_array_size)
    return [range(i, min(i + size, n_trials)) for i in range(0, n_trials, size)]


def slurm_parameters(cluster: ClusterConfig, budget_s: float, job_name: str, n_trials: int) -> dict[str, Any]:
    """submitit `update_parameters` for one array: resources from cluster.yaml, time = budget + margin."""
    s = cluster.slurm
    params: dict[str, Any] = {
        "job_name": job_name,
        "time": math.ceil(budget_s / 60) + s.grading_margin_min,
        "cpus_per_task": s.cpus_per_trial,
        "mem": f"{s.mem_gb}GB",
        "array_parallelism": max(1, min(s.array_parallelism, n_trials)),
        "stderr_to_stdout": True,
        "signal_delay_s": USR2_LEAD_S,  # the margin's rule (ClusterConfig) counts on it
    }
    gpus = f"{s.gpu_type}:{s.gpus_per_trial}" if s.gpu_type else s.gpus_per_trial
    if s.gpus_per_trial and s.gpu_request == "gres":
        params["gres"] = f"gpu:{gpus}"
    elif s.gpus_per_trial:
        params["gpus_per_node"] = gpus
    for key in ("partition", "account", "qos"):
        value = getattr(s, key)
        if value:
            params[key] = value
    # --requeue: a trial resumes after preemption, node failure or submitit's checkpoint, whatever
    # the cluster's JobRequeue default (with JobRequeue=0, `scontrol requeue` and PreemptMode=REQUEUE
    # would cancel the job instead). Extra options: true/null → a bare flag, false → left out.
    # --hold: no task starts before the launcher has recorded every trial's job id (`release`), so the
    # launcher and a starting job never write one status.json at once, whatever the file system's locks.
    extra: dict[str, Any] = {"requeue": True, "hold": True}
    for key, value in s.extra_sbatch.items():
        if value is not False:
            extra[key.lstrip("-").replace("-", "_")] = True if value is None else value
    params["additional_parameters"] = extra
    if s.setup:
        params["setup"] = list(s.setup)
    return params


class SlurmTrial:
    """The callable submitit runs on the node; checkpointable so a preempted/timed-out trial requeues.

    State lives in status.json, not in the pickle, so a requeued job (or one Slurm restarted itself)
    resumes from the same trial directory with the wall time already used carried over.
    """

    def __init__(self, job: TrialJob, post_trial: PostTrial | None, requeue_wait_s: float = 150.0) -> None:
        self.job = job
        self.post_trial = post_trial
        self.requeue_wait_s = requeue_wait_s
        self._supervisor: TrialSupervisor | None = None
        self._thread: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_supervisor"] = None  # runtime handles never travel with the checkpoint
        state["_thread"] = None
        return state

    def __call__(self) -> str:
        job_id, array_id = _slurm_ids(os.environ)
        restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        start = Start(job_id=job_id, array_id=array_id, restarts=restarts)
        gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
        supervisor = TrialSupervisor(self.job, gpu=gpu, post_trial=self.post_trial, resume_state="submitted")
        self._supervisor = supervisor
        box: list[Outcome | BaseException] = []

        def target() -> None:
            try:
                box.append(supervisor.run(start))
            except BaseException as exc:  # surfaced in the main thread below
                box.append(exc)

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            supervisor.request_stop("SIGTERM", preempted=True)

        # submitit ignores SIGTERM; we forward it so the agent checkpoints before Slurm's SIGKILL.
        signal.signal(signal.SIGTERM, on_sigterm)
        # The trial runs in a thread so that submitit's USR2 handler (main thread) can stop it.
        self._thread = threading.Thread(target=target, name="trial", daemon=True)
        self._thread.start()
        while self._thread.is_alive():
            self._thread.join(0.2)
        result = box[0]
        if isinstance(result, BaseException):
            raise result
        if result == "interrupted":
            # Preemption: SIGTERM first, USR2 (→ checkpoint → requeue) or SIGKILL follows.
            deadline = time.monotonic() + self.requeue_wait_s
            while time.monotonic() < deadline:
                time.sleep(0.5)
            mark_failed_infra(
                self.job.trial_dir,
                self.job.trial_id,
                token=self.job.token,
                cause="terminated by SIGTERM and not requeued",
            )
            return "failed"
        return result

    def checkpoint(self) -> Any:
        """Called by submitit on USR2: stop the agent (it checkpoints) and ask for a requeue, unless
        one more run would exceed max_attempts. The requeue itself is counted when the requeued job
        starts (from SLURM_RESTART_COUNT), so requeues Slurm does on its own count the same way."""
        from submitit.helpers import DelayedSubmission

        if self._supervisor is not None and self._thread is not None and self._thread.is_alive():
            self._supervisor.request_stop("USR2", preempted=True)
            self._thread.join(self.job.kill_grace_s + 30)
        job = self.job
        status = mark_checkpointed(
            job.trial_dir, job.trial_id, token=job.token, max_attempts=job.max_attempts
        )
        if status is None or status.state != "submitted":
            return None  # final, superseded, or no run left within max_attempts (then failed/infra)
        return DelayedSubmission(SlurmTrial(job, self.post_trial, self.requeue_wait_s))


def _slurm_ids(env: Any) -> tuple[str | None, str | None]:
    array = env.get("SLURM_ARRAY_JOB_ID")
    task = env.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}", array
    return env.get("SLURM_JOB_ID"), None


class Submitter(Protocol):
    """The side-effect seam of the Slurm backend (a fake in unit tests, submitit in production)."""

    def submit(self, calls: Sequence[SlurmTrial], params: dict[str, Any]) -> list[str]:
        """Submit all calls as one array; returns one job id per call ("123_4", or "123" alone)."""
        ...

    def states(self, job_ids: Sequence[str]) -> SlurmView:
        """Current Slurm state of each known job id (missing = unknown to Slurm)."""
        ...

    def live(self, job_names: Sequence[str]) -> list[LiveTask] | None:
        """Pending/running tasks of jobs with these names; None when squeue failed."""
        ...

    def cancel(self, job_ids: Sequence[str]) -> None:
        """scancel these jobs/tasks."""
        ...

    def max_array_size(self) -> int:
        """The cluster's MaxArraySize (tasks per array at most)."""
        ...

    def check_time_limit(self, partition: str | None, minutes: int) -> None:
        """Refuse (UserError) a job time the partition would never run."""
        ...

    def release(self, array_ids: Sequence[str]) -> bool:
        """scontrol release these held arrays; False when scontrol failed."""
        ...

    def limits(self, slurm: SlurmSettings) -> AccountLimits | None:
        """The accounting's MaxWall and submit-count limits for these settings (None: no accounting)."""
        ...

    def throttle(self, array_id: str, limit: int, *, clear_dependency: bool) -> bool:
        """Let this array run `limit` tasks at once from now on (and, with `clear_dependency`,
        whatever it depended on); False when scontrol failed."""
        ...


@dataclass(frozen=True)
class SubmititSubmitter:
    folder: Path
    max_num_timeout: int = 3

    def submit(self, calls: Sequence[SlurmTrial], params: dict[str, Any]) -> list[str]:
        import submitit

        executor = submitit.SlurmExecutor(folder=self.folder, max_num_timeout=self.max_num_timeout)
        executor.update_parameters(**params)
        before = set(os.listdir(self.folder)) if self.folder.is_dir() else set()
        try:
            # submitit prints a refusing sbatch's stderr, which its exception carries too: the
            # launcher says it once, in one line
            with contextlib.redirect_stderr(io.StringIO()), executor.batch():
                jobs = [executor.submit(call) for call in calls]
        except Exception:
            # sbatch refused: submitit's script and pickles of this submission are garbage
            for name in set(os.listdir(self.folder)) - before:
                if name.endswith(".pkl") or name.startswith(".submission_file_"):
                    (self.folder / name).unlink(missing_ok=True)
            raise
        return [str(job.job_id) for job in jobs]

    def states(self, job_ids: Sequence[str]) -> SlurmView:
        return query_states(job_ids)

    def live(self, job_names: Sequence[str]) -> list[LiveTask] | None:
        return query_live(job_names)

    def cancel(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            run_tool(["scancel", *job_ids])

    def max_array_size(self) -> int:
        return query_max_array_size()

    def check_time_limit(self, partition: str | None, minutes: int) -> None:
        check_partition_time(partition, minutes)

    def release(self, array_ids: Sequence[str]) -> bool:
        return not array_ids or run_tool(["scontrol", "release", ",".join(array_ids)]) is not None

    def limits(self, slurm: SlurmSettings) -> AccountLimits | None:
        return read_limits(account=slurm.account, qos=slurm.qos, partition=slurm.partition)

    def throttle(self, array_id: str, limit: int, *, clear_dependency: bool) -> bool:
        argv = ["scontrol", "update", f"JobId={array_id}", f"ArrayTaskThrottle={limit}"]
        # One update: cleared first, the dependency would let the array run at its old `%`.
        return run_tool(argv + ["Dependency="] if clear_dependency else argv) is not None


def submitit_sbatch_text(folder: Path, params: dict[str, Any], n_trials: int) -> str:
    """The sbatch script submitit would write for this array (its own renderer, same parameters).

    submitit's private API, pinned with submitit in pyproject.toml: not a speed trick but the only
    renderer there is (the public executor renders only while submitting, and refuses to exist
    without srun on PATH), so a dry run shows exactly the script a real launch submits.
    """
    from submitit.slurm.slurm import SlurmExecutor, _make_sbatch_string

    # submitit's own command line (its executor cannot be built without srun on PATH, as in a dry run
    # on a laptop): python and the folder shell-quoted. Joined by hand, a folder with a space or a
    # `;` showed a command that differs from the submitted one.
    executor = SimpleNamespace(python=shlex.quote(sys.executable), folder=folder)
    command = SlurmExecutor._submitit_command_str.fget(executor)  # type: ignore[attr-defined]
    extra: dict[str, Any] = {"map_count": n_trials} if n_trials > 1 else {}
    return str(_make_sbatch_string(command=command, folder=folder, **params, **extra))


def check_log_folder(output_dir: Path) -> None:
    """Slurm expands `%` sequences anywhere in --output (`%u` the user, `%x` the job name, …), and a
    backslash would turn off the `%j` submitit's log names need: under an output dir with either,
    every job's log path would point elsewhere, and a job whose log cannot be opened does not run."""
    text = str(output_dir)
    for char in ("%", "\\"):
        if char in text:
            raise UserError(
                f"--output-dir {text}: sbatch --output reads {char!r} in the jobs' log paths as a pattern; "
                "choose a path without '%' or '\\' for --backend slurm"
            )


def write_sbatch_preview(plan: SweepPlan, options: LaunchOptions) -> list[Path]:
    """--dry-run --backend slurm: write the sbatch script submitit would submit for this plan's
    array under `<output_dir>/slurm/preview/` (nothing is submitted, no status is touched)."""
    if not plan.commands:
        return []
    files = layout.OutputFiles(plan.output_dir)
    folder = files.slurm
    budget = max(cmd.trial.spec.agent.budget.time_limit_s for cmd in plan.commands)
    max_size = query_max_array_size() if shutil.which("scontrol") else DEFAULT_MAX_ARRAY_SIZE
    chunks = array_chunks(len(plan.commands), plan.cluster, max_size)
    throttle = ArrayThrottle(plan.cluster.slurm.array_parallelism)  # as a launch of an idle sweep
    paths = []
    for n, chunk in enumerate(chunks):
        params = slurm_parameters(plan.cluster, budget, f"mlew-{plan.regime}", len(chunk))
        limit, dependency = throttle.next_array(len(chunk))
        throttle.submitted(f"<array {n + 1}>", len(chunk), limit, dependency)
        params["array_parallelism"] = limit
        if dependency is not None:
            params["dependency"] = dependency
        text = submitit_sbatch_text(folder.absolute(), params, len(chunk))
        name = f"mlew-{plan.regime}" + (f"-{n + 1}of{len(chunks)}" if len(chunks) > 1 else "")
        path = files.sbatch_preview / f"{name}.sbatch"
        path.parent.mkdir(parents=True, exist_ok=True)
        listing = "\n".join(f"# task {i}: {plan.commands[j].trial.trial_id}" for i, j in enumerate(chunk))
        head = "\n\n# array tasks (each runs one trial's command):\n"
        write_text_atomic(path, text + head + listing + "\n")
        paths.append(path)
    return paths
