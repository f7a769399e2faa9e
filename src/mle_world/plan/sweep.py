"""Expansion of a paper config into trials: regime × configuration × task × seed → `PlannedTrial`s.

Pure: reads the validated `PaperConfig`; writes nothing (launch writes spec.json from the result).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mle_world import layout
from mle_world.errors import UserError
from mle_world.identity import TrialHasher
from mle_world.plan.config import PaperConfig
from mle_world.records import BudgetSettings, Regime, SandboxSettings, TrialPaths, TrialSpec

"""Bump when the science-hash recipe changes (a golden test pins the hashes)."""


@dataclass(frozen=True)
class Selection:
    """User filters; None means everything the config lists."""

    tasks: tuple[str, ...] | None = None
    configurations: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    max_steps: int | None = None
    """One-trial mode's `-i ITERATIONS`: overrides the budget's max_steps (part of the science)."""


@dataclass(frozen=True)
class PlannedTrial:
    """A trial with its host-side locations; `spec.paths` is the agent's view of them."""

    spec: TrialSpec
    trial_dir: Path
    public_dir: Path
    private_dir: Path

    @property
    def trial_id(self) -> str:
        return self.spec.trial_id


def task_data_dirs(data_dir: Path, task: str) -> tuple[Path, Path]:
    """MLE-bench's prepared layout: (<data>/<id>/prepared/public, <data>/<id>/prepared/private)."""
    base = data_dir / task / "prepared"
    return base / "public", base / "private"


def resolve_selection(
    config: PaperConfig, selection: Selection, known_task: Callable[[str], bool]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]:
    """Apply the filters; every unknown name is a one-line UserError naming the flag."""
    configs = selection.configurations or tuple(config.configurations)
    for name in configs:
        if name not in config.configurations:
            choices = ", ".join(config.configurations)
            raise UserError(f"--configs: unknown configuration '{name}' (choose from: {choices})")
    tasks = selection.tasks or config.tasks
    for task in tasks:
        if not known_task(task):
            raise UserError(f"--tasks: unknown task id '{task}' (see `run_paper.py --list`)")
    seeds = selection.seeds or config.seeds
    for label, values in (("--tasks", tasks), ("--configs", configs), ("--seeds", seeds)):
        if len(set(values)) != len(values):
            raise UserError(f"{label}: duplicate entries")
    return tuple(configs), tuple(tasks), tuple(seeds)


def expand(
    config: PaperConfig,
    regime: Regime,
    selection: Selection,
    *,
    output_dir: Path,
    data_dir: Path,
    known_task: Callable[[str], bool],
    view: Callable[[Path, Path], TrialPaths],
    direction: Callable[[str], bool | None] = lambda task: None,
    sandbox: SandboxSettings | None = None,
) -> list[PlannedTrial]:
    """All trials of one regime in a stable order (configuration, task, seed)."""
    if regime not in config.regimes:
        raise UserError(
            f"--regime: '{regime}' is not in {config.path}'s regimes ({', '.join(config.regimes)})"
        )
    configs, tasks, seeds = resolve_selection(config, selection, known_task)
    trials: list[PlannedTrial] = []
    directions = {task: direction(task) for task in tasks}  # a file read per task, not per trial
    for configuration in configs:
        settings = config.agent_settings(configuration)
        if selection.max_steps is not None:
            budget = BudgetSettings.model_validate(
                {**settings.budget.model_dump(), "max_steps": selection.max_steps}
            )
            settings = settings.model_copy(update={"budget": budget})
        science_hash = TrialHasher.of(settings)
        for task in tasks:
            public, private = task_data_dirs(data_dir, task)
            lower_is_better = directions[task]
            for seed in seeds:
                if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", task):
                    raise UserError(f"task id '{task}' contains characters unsafe for a path")
                trial_dir = layout.trial_dir(output_dir, configuration, task, seed)
                spec = TrialSpec(
                    trial_id=layout.trial_id(regime, configuration, task, seed),
                    science_hash=science_hash(regime, configuration, task, seed, lower_is_better),
                    regime=regime,
                    configuration=configuration,
                    task=task,
                    seed=seed,
                    agent=settings,
                    paths=view(trial_dir, public),
                    lower_is_better=lower_is_better,
                    sandbox=sandbox or SandboxSettings(),
                )
                trials.append(
                    PlannedTrial(spec=spec, trial_dir=trial_dir, public_dir=public, private_dir=private)
                )
    return trials
