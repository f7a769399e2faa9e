"""The sweep launcher: resume/retry decisions from status files, and the local/Slurm backends.

Reads the plan and every trial's status.json; writes status.json, spec.json, `<output_dir>/.sweep-identity`
and `<output_dir>/slurm/` (Slurm backend). The CLI calls `run_sweep`, after `preflight.check_prepared`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mle_world import layout
from mle_world.errors import UserError
from mle_world.identity import record_sweep_identity
from mle_world.launch.display import Display, PlainDisplay, progress_bar
from mle_world.launch.liveness import launcher_lock
from mle_world.launch.local.orphans import release_orphans
from mle_world.launch.local.pool import run_pool
from mle_world.launch.signals import sigterm_as_interrupt
from mle_world.launch.slurm.backend import (
    SlurmTrial,
    SubmititSubmitter,
    Submitter,
    check_log_folder,
)
from mle_world.launch.slurm.intents import cancelled_since, reconcile, submit_arrays
from mle_world.launch.slurm.queries import (
    ALIVE_STATES,
    POLL_S,
    SlurmView,
    check_sbatch_available,
    ended_cause,
)
from mle_world.launch.slurm.throttle import ArrayThrottle, ThrottleUpdate
from mle_world.launch.slurm.watchdog import watch
from mle_world.launch.state import (
    FINAL,
    is_retryable,
    mark_failed_infra,
    mark_submitted,
    read_status,
    utcnow,
    withdraw_attempt,
)
from mle_world.launch.trial import PostTrial, RecordingPostTrial, TrialJob, ensure_spec, to_grade
from mle_world.plan.sweep_plan import LaunchOptions, SweepPlan, TrialCommand
from mle_world.records import TrialStatus

Action = Literal["skip", "run", "watch", "stale"]


def make_job(cmd: TrialCommand, plan: SweepPlan, backend: str, token: str | None = None) -> TrialJob:
    return TrialJob(
        trial=cmd.trial,
        command=cmd.command,
        backend=backend,
        budget_s=cmd.trial.spec.agent.budget.time_limit_s,
        grace_s=plan.cluster.launch.wall_grace_s,
        max_attempts=plan.cluster.launch.max_attempts,
        token=token,
    )


def resume_action(
    status: TrialStatus, options: LaunchOptions, max_attempts: int, slurm_state: str | None
) -> Action:
    """Resume rule per trial (documented in docs/launching.md):
    succeeded → skip; failed → run only if --retry-failed allows it (class and max_attempts);
    pending → run; submitted/running under Slurm with a live job → watch, with a dead job → stale
    (failed/infra); submitted/running under the local backend → stale, because the launcher lock
    proves its supervisor is gone (the trial resumes from its journal when rerun); submitted without
    a job id → run (the submission never reached sbatch)."""
    if status.state == "succeeded":
        return "skip"
    if status.state == "failed":
        return "run" if is_retryable(status, options.retry_failed, max_attempts) else "skip"
    if status.state == "pending":
        return "run"
    if status.backend == "slurm" and status.slurm_job_id:
        if slurm_state is None or slurm_state in ALIVE_STATES:
            return "watch"  # unknown to squeue and sacct right after submission: still watch
        return "stale"
    if status.state == "submitted" and not status.slurm_job_id and status.backend == "slurm":
        return "run"
    return "stale"


@dataclass
class SweepLauncher:
    """Launches (or resumes) one plan under the output dir's launcher lock: decides per trial, marks
    and hands the trials to the local pool or to Slurm, then follows them to the end."""

    plan: SweepPlan
    options: LaunchOptions
    post_trial: PostTrial | None
    display: Display
    submitter_factory: Callable[[Path], Submitter] = SubmititSubmitter
    poll_s: float = POLL_S
    lost_after_s: float = 120.0
    """A job that squeue and sacct both answer they do not know, for this long, is declared lost."""
    check_launch: Callable[[], object] | None = None
    """Runs under the launcher lock first, writes nothing; raises to refuse the launch (the CLI compares
    the provenance of launch.json's earlier launch, which a running launcher may be rewriting)."""
    before_launch: Callable[[], object] | None = None
    """Runs under the launcher lock before anything else is written (the CLI writes launch.json)."""

    def run(self) -> int:
        plan, options = self.plan, self.options
        if options.backend not in ("local", "slurm"):
            raise UserError(f"--backend: unknown backend '{options.backend}' (choose local or slurm)")
        # The CLI checked the dir's identity (check_sweep_identity) before planning; the lock comes
        # first here: a launcher refused by it has written nothing (launch.json included).
        with launcher_lock(plan.output_dir), sigterm_as_interrupt():
            if self.check_launch is not None:
                self.check_launch()
            for cmd in plan.commands:
                ensure_spec(cmd.trial)  # refuses a different science hash before anything starts
            if self.before_launch is not None:
                self.before_launch()
            record_sweep_identity(plan.output_dir, plan.config_hash, plan.regime)
            self._grade_unreported()
            if options.backend == "local":
                return self._run_local()
            return self._run_slurm()

    def _grade_unreported(self) -> None:
        """--grade over trials that ended without a grading report (they ran without --grade, or
        the report was removed): run the post-trial step for them here, without rerunning their
        agents. Skipped as done, they stayed ungraded while the launch said nothing."""
        if not self.options.grade or self.post_trial is None:
            return
        todo: list[tuple[TrialCommand, Literal["succeeded", "failed"]]] = []
        max_attempts = self.plan.cluster.launch.max_attempts
        for cmd in self.plan.commands:
            trial = cmd.trial
            if layout.report_beside(trial.trial_dir).exists():
                continue
            status = read_status(trial.trial_dir, trial.trial_id)
            state = status.state
            if state != "succeeded" and state != "failed":
                continue
            retried = state == "failed" and is_retryable(status, self.options.retry_failed, max_attempts)
            if to_grade(state, trial.trial_dir) and not retried:
                todo.append((cmd, state))
        if not todo:
            return
        self._say(f"[launch] grading {len(todo)} finished trial(s) without a grading report")
        for cmd, state in todo:
            try:
                self.post_trial(cmd.trial, state)
                if isinstance(self.post_trial, RecordingPostTrial):
                    self.post_trial.recorded(cmd.trial)  # its digest, now with the report
            except Exception as exc:  # one trial's grading never stops the launch
                self._say(f"[launch] {cmd.trial.trial_id}: grading failed: {type(exc).__name__}: {exc}")

    def _classify_all(
        self, slurm_states: dict[str, str]
    ) -> dict[str, tuple[TrialCommand, TrialStatus, Action]]:
        out = {}
        for cmd in self.plan.commands:
            status = read_status(cmd.trial.trial_dir, cmd.trial.trial_id)
            state = slurm_states.get(status.slurm_job_id or "")
            action = resume_action(status, self.options, self.plan.cluster.launch.max_attempts, state)
            out[cmd.trial.trial_id] = (cmd, status, action)
        return out

    def _submit_marks(self, todo: Sequence[TrialCommand], backend: str, token: str) -> dict[str, int]:
        """Mark trials submitted under a new fencing token (attempt + 1, unless the earlier submission
        never reached Slurm); returns the previous attempt numbers (for Ctrl-C undo)."""
        prior: dict[str, int] = {}
        launch = self.plan.record.launch_id  # the trials record which launch submitted them
        for cmd in todo:
            t = cmd.trial
            marked = mark_submitted(t.trial_dir, t.trial_id, token=token, backend=backend, launch=launch)
            prior[t.trial_id] = marked.attempt - 1
        return prior

    def _summary(self, commands: Sequence[TrialCommand]) -> int:
        counts: dict[str, int] = {}
        for cmd in commands:
            state = read_status(cmd.trial.trial_dir, cmd.trial.trial_id).state
            counts[state] = counts.get(state, 0) + 1
        text = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        self._say(f"[launch] {len(commands)} trials: {text}")
        return 0 if counts.get("succeeded", 0) == len(commands) else 1

    def _say(self, text: str) -> None:
        self.display.say(text)

    # ---------------------------------------------------------------- local
    def _run_local(self) -> int:
        plan = self.plan
        todo: list[TrialCommand] = []
        stale: list[tuple[TrialCommand, TrialStatus]] = []
        for cmd, status, action in self._classify_all({}).values():
            if action == "stale":
                stale.append((cmd, status))
            elif action == "run":
                todo.append(cmd)
        todo += release_orphans(stale, self._say, grace_s=TrialJob.kill_grace_s)
        skipped = len(plan.commands) - len(todo)
        self._say(f"[launch] local: {len(todo)} to run, {skipped} already done or not retried")
        if not todo:
            return self._summary(plan.commands)
        token = f"local-{uuid.uuid4().hex[:10]}"
        prior = self._submit_marks(todo, "local", token)
        jobs = [make_job(cmd, plan, "local", token) for cmd in todo]
        result = run_pool(
            jobs,
            n_workers=self.options.n_workers,
            gpu_devices=self.options.gpu_devices,
            trials_per_gpu=self.options.trials_per_gpu,
            post_trial=self.post_trial,
            display=self.display,
            show_progress=self.options.show_progress,
        )
        for cmd in todo:
            if result.outcomes.get(cmd.trial.trial_id) == "interrupted":
                # Ctrl-C: back to pending and the attempt does not count. On a full disk this write
                # fails too; the trial stays submitted and the next launcher releases it the same way.
                with contextlib.suppress(OSError):
                    withdraw_attempt(
                        cmd.trial.trial_dir,
                        cmd.trial.trial_id,
                        token=token,
                        prior_attempt=prior[cmd.trial.trial_id],
                    )
        if result.error is not None:
            raise UserError(
                f"the sweep stopped: {result.error}; the other running trials were stopped and left "
                "resumable: fix the cause and re-run the same command"
            )
        if result.interrupted:
            self._say("[launch] interrupted: running trials stopped and left resumable")
            return 130
        return self._summary(plan.commands)

    # ---------------------------------------------------------------- slurm
    def _run_slurm(self) -> int:
        plan = self.plan
        check_log_folder(plan.output_dir)
        if self.submitter_factory is SubmititSubmitter:
            check_sbatch_available()
        submitter = self.submitter_factory(layout.OutputFiles(plan.output_dir).slurm)
        self._reconcile(submitter)
        job_ids = [
            s.slurm_job_id
            for cmd in plan.commands
            if (s := read_status(cmd.trial.trial_dir, cmd.trial.trial_id)).slurm_job_id
            and s.state not in FINAL
        ]
        view = submitter.states(job_ids) if job_ids else SlurmView({}, squeue_ok=True, sacct_ok=True)
        todo: list[TrialCommand] = []
        local_stale: list[tuple[TrialCommand, TrialStatus]] = []
        classified = self._classify_all(view.states).values()
        throttle = ArrayThrottle(plan.cluster.slurm.array_parallelism)
        throttle.observe([status for _, status, _ in classified], view)
        for cmd, status, action in classified:
            if action == "stale" and status.backend != "slurm":
                local_stale.append((cmd, status))
            elif action == "stale":
                job = status.slurm_job_id
                failed = mark_failed_infra(
                    cmd.trial.trial_dir,
                    cmd.trial.trial_id,
                    token=status.token,
                    cause=ended_cause(
                        job or "", view.states.get(job or "", "gone"), plan.cluster.slurm.mem_gb
                    ),
                )
                # --retry-failed reruns it now (after `cancel`, one re-run resumes the sweep, not two)
                if (
                    failed
                    and resume_action(failed, self.options, plan.cluster.launch.max_attempts, None) == "run"
                ):
                    todo.append(cmd)
            elif action == "run":
                todo.append(cmd)
        todo += release_orphans(local_stale, self._say, grace_s=TrialJob.kill_grace_s)
        held = self._submit_slurm(submitter, todo, throttle) if todo else []
        if not todo:
            self._say("[launch] slurm: nothing to submit")
        throttle.rebalance(applier(submitter), self._say)  # adopted arrays: the slots free now
        if not self.options.wait:
            rest = f"; {len(held)} trial(s) held back by the limit stay pending: re-run later" if held else ""
            self._say(f"[launch] submitted{rest}; follow with: run_paper.py status {plan.output_dir}")
            return 0
        try:
            self._watch(submitter, held, throttle)
        except KeyboardInterrupt:
            self._say(
                "[launch] stopped watching; the Slurm jobs keep running. "
                f"Re-run the same command or `run_paper.py status {plan.output_dir}` to follow them."
            )
            return 130
        return self._summary(plan.commands)

    def _reconcile(self, submitter: Submitter) -> None:
        line = reconcile(self.plan.output_dir, self.plan.commands, submitter)
        if line:
            self._say(line)

    def _submit_slurm(
        self,
        submitter: Submitter,
        todo: Sequence[TrialCommand],
        throttle: ArrayThrottle,
        *,
        again: bool = False,
    ) -> list[TrialCommand]:
        """Submit what the accounting's submit limits let go now; returns the trials held back."""
        plan = self.plan
        return submit_arrays(
            plan,
            todo,
            submitter,
            mark=lambda part, token: self._submit_marks(part, "slurm", token),
            call=lambda cmd, token: SlurmTrial(make_job(cmd, plan, "slurm", token), self.post_trial),
            say=self._say,
            throttle=throttle,
            say_limit=not again,
        )

    def _watch(
        self, submitter: Submitter, held: list[TrialCommand], throttle: ArrayThrottle | None = None
    ) -> None:
        throttle = throttle or ArrayThrottle(self.plan.cluster.slurm.array_parallelism)  # from the 1st poll
        started = utcnow()

        def refill() -> bool:  # the next wave a submit-count limit held back; True while some wait
            left = [c for c in held if read_status(c.trial.trial_dir, c.trial.trial_id).state == "pending"]
            if left and cancelled_since(self.plan.output_dir, started):
                self._say(
                    f"[launch] slurm: the sweep was cancelled; {len(left)} held-back trial(s) stay pending"
                )
                return False
            held[:] = self._submit_slurm(submitter, left, throttle, again=True) if left else []
            return bool(held)

        def tend(statuses: Sequence[TrialStatus], view: SlurmView) -> None:
            throttle.observe(statuses, view)
            throttle.rebalance(applier(submitter), self._say)

        with progress_bar(self.display, len(self.plan.commands), self.options.show_progress) as progress:
            watch(
                self.plan.commands,
                submitter,
                say=self._say,
                poll_s=self.poll_s,
                lost_after_s=self.lost_after_s,
                query_interval_s=self.plan.cluster.slurm.query_interval_s,
                refill=refill if held else None,
                mem_gb=self.plan.cluster.slurm.mem_gb,
                progress=progress,
                tend=tend,
            )


def applier(submitter: Submitter) -> Callable[[ThrottleUpdate], bool]:
    """`ArrayThrottle.rebalance`'s way to apply an update: the submitter's scontrol."""
    return lambda u: submitter.throttle(u.array_id, u.limit, clear_dependency=u.clear_dependency)


def run_sweep(
    plan: SweepPlan,
    options: LaunchOptions,
    *,
    post_trial: PostTrial | None = None,
    display: Display | None = None,
    before_launch: Callable[[], object] | None = None,
    check_launch: Callable[[], object] | None = None,
) -> int:
    """Launch (or resume) a sweep. Exit code: 0 all selected trials succeeded (now or before),
    1 some failed, 130 on Ctrl-C or SIGTERM. Call `check_prepared` first (the CLI does, before a
    real run); `check_launch` then `before_launch` run under the launcher lock before anything is
    written (`check_launch` may refuse)."""
    launcher = SweepLauncher(plan, options, post_trial, display or PlainDisplay())
    launcher.check_launch = check_launch
    launcher.before_launch = before_launch
    return launcher.run()
