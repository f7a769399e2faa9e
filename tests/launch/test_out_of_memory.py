"""A trial the kernel's OOM killer ends is reported as out of memory, with the limit, as infra (not as a
bare `killed by SIGKILL`), and the launcher sharing that memory limit survives it.

Creates a real memory cgroup (v1, or v2 where the root delegates memory) with a 300 MiB limit and runs a
local launcher in it whose trial allocates past it (tests/support/fake_agent.py, mode oom); a Slurm
job's OUT_OF_MEMORY through the watchdog (scripted squeue/sacct: the local cluster runs task/none, no
cgroups). Writes under pytest's tmp paths and the cgroup file system (removed after).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from launchkit import make_plan, update_status
from rich.console import Console

from mle_world.cli.status_view import read_sweep_status, status_view
from mle_world.launch.display import SilentDisplay
from mle_world.launch.launcher import SweepLauncher
from mle_world.launch.slurm.queries import SlurmView
from mle_world.launch.state import read_status
from mle_world.plan.sweep_plan import LaunchOptions

LIMIT = 300 * 2**20
SUPPORT = Path(__file__).resolve().parents[1] / "support"


LAUNCH = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from launchkit import make_plan
    from mle_world.launch import run_sweep
    from mle_world.launch.display import SilentDisplay
    from mle_world.plan.sweep_plan import LaunchOptions
    plan = make_plan(Path(sys.argv[1]), Path(sys.argv[2]), 1, mode="oom", seconds=0.1)
    sys.exit(run_sweep(plan, LaunchOptions(n_workers=1, show_progress=False), display=SilentDisplay()))
    """
)


def test_a_trial_killed_by_the_oom_killer_is_out_of_memory(
    memory_limit: Path, dirs: tuple[Path, Path]
) -> None:
    """Reproduced before the fix: the launcher, then the largest process of the cgroup, was the one
    killed (its trial left `running`); with the launcher spared, the trial ended `killed by SIGKILL`."""
    out, data = dirs
    procs = memory_limit / "cgroup.procs"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH, str(out), str(data)],
        preexec_fn=lambda: procs.write_text(str(os.getpid())),  # the launcher in the limit, as in an allocation
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the launcher survived and reports a failed trial
    [status] = read_sweep_status(out).trials
    assert (status.state, status.failure_class) == ("failed", "infra")
    assert status.cause == (
        f"out of memory: the kernel's OOM killer ended 1 process(es) at the memory limit 300 MiB "
        f"(cgroup {memory_limit}) (killed by SIGKILL)"
    )
    console = Console(width=400, record=True)
    for renderable in status_view(out, read_sweep_status(out), status.updated_at).renderables:
        console.print(renderable)
    assert "out of memory: the kernel's OOM killer ended 1 process(es) at the memory limit 300 MiB" in (
        console.export_text()
    )


class OutOfMemorySlurm:
    """squeue/sacct as Slurm answers for a job whose cgroup hit --mem (state OUT_OF_MEMORY)."""

    def states(self, job_ids: object) -> SlurmView:
        return SlurmView({"9_0": "OUT_OF_MEMORY"}, squeue_ok=True, sacct_ok=True)


def test_a_slurm_job_out_of_memory_says_so_with_its_mem(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, seconds=0.1)
    trial = plan.commands[0].trial
    update_status(
        trial.trial_dir,
        trial.trial_id,
        "submitted",
        attempt=1,
        backend="slurm",
        token="s",
        slurm_job_id="9_0",
    )
    opts = LaunchOptions(backend="slurm", show_progress=False)
    runner = SweepLauncher(plan, opts, None, SilentDisplay(), poll_s=0.001)
    runner._watch(OutOfMemorySlurm(), [])  # type: ignore[arg-type]
    status = read_status(trial.trial_dir, trial.trial_id)
    assert (status.state, status.failure_class, status.cause) == (
        "failed",
        "infra",
        "out of memory: slurm job 9_0 OUT_OF_MEMORY without a result (--mem 1GB, slurm.mem_gb)",
    )
