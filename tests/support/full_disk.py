"""Runs a 3-trial local sweep whose output dir is a 2 MiB tmpfs that a post-trial hook fills up while
the second trial is graded, then frees the space and re-runs the same sweep; prints what it saw as JSON.

Usage (in a private mount namespace, which the caller sets up with a tmpfs at OUT):
    python full_disk.py OUT DATA
Writes under OUT and DATA only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from launchkit import make_plan

from mle_world.errors import UserError
from mle_world.launch import run_sweep
from mle_world.launch.display import SilentDisplay
from mle_world.launch.state import read_status
from mle_world.plan.sweep import PlannedTrial
from mle_world.plan.sweep_plan import LaunchOptions
from mle_world.storage import write_json_atomic


def main() -> int:
    out, data = Path(sys.argv[1]), Path(sys.argv[2])
    filler = out / "filler"
    plan = make_plan(out / "sweep", data, 3, seconds=0.1)
    fill = {"task01"}

    def hook(trial: PlannedTrial, state: str) -> None:
        if trial.spec.task in fill:
            fill.clear()
            with open(filler, "ab") as handle:
                try:
                    while True:
                        handle.write(b"x" * 65536)
                        handle.flush()
                except OSError:
                    pass
        write_json_atomic(trial.trial_dir.parent / f"{trial.spec.task}_report.json", {"state": state})

    options = LaunchOptions(backend="local", n_workers=1, gpu_devices=("0",), show_progress=False)

    def states() -> list[str]:
        return [read_status(c.trial.trial_dir, c.trial.trial_id).state for c in plan.commands]

    seen: dict[str, object] = {}
    try:
        seen["first_exit"] = run_sweep(plan, options, post_trial=hook, display=SilentDisplay())
    except UserError as exc:
        seen["first_error"] = str(exc)
    seen["first_states"] = states()
    filler.unlink()
    seen["second_exit"] = run_sweep(plan, options, post_trial=hook, display=SilentDisplay())
    seen["second_states"] = states()
    seen["reports"] = sorted(p.name for p in (out / "sweep" / "runs" / "aide").glob("*_report.json"))
    seen["attempts"] = [read_status(c.trial.trial_dir, c.trial.trial_id).attempt for c in plan.commands]
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
