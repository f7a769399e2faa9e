"""The audit names paired trials that ran other settings than their pair compares: the same
configuration in the gated and the ungated dir, and a configuration beside `aide` in one dir.

Builds trial specs with the real config loader and sweep expansion from the packaged paper.yaml;
writes launch.json, spec.json and grading reports under tmp_path and runs the real audit.
"""

from __future__ import annotations

from pathlib import Path

from auditkit import trial_dir, write_launch, write_report

from mle_world.audit import audit
from mle_world.plan.config import PaperConfig, load_paper_config, packaged_config
from mle_world.plan.sweep import Selection, expand
from mle_world.records import TrialPaths, TrialSpec
from mle_world.storage import read_record, write_model

CONFIGS = ("aide", "wm-point")


def paper() -> PaperConfig:
    return load_paper_config(packaged_config("paper.yaml"), lambda task: True)


def write_sweep(out: Path, regime: str, config: PaperConfig, max_steps: int | None = None) -> None:
    """Two tasks x one seed of `aide` and `wm-point`: launch.json, each trial's spec.json and a report."""
    trials = expand(
        config,
        regime,  # type: ignore[arg-type]
        Selection(tasks=("A", "B"), configurations=CONFIGS, seeds=(34,), max_steps=max_steps),
        output_dir=out,
        data_dir=out / "data",
        known_task=lambda task: True,
        view=lambda trial, public: TrialPaths(trial_dir=str(trial), data_dir=str(public)),
    )
    write_launch(out, regime, [t.trial_id for t in trials])
    for trial in trials:
        spec = trial.spec
        write_model(trial_dir(out, spec.configuration, spec.task, spec.seed) / "spec.json", spec)
        write_report(out, regime, spec.configuration, spec.task, spec.seed, score=0.5)


def science_lines(problems: list[str]) -> list[str]:
    return [p for p in problems if "ran other settings" in p or "more than its world model" in p]


def test_regimes_of_the_same_settings_pair_without_a_note(tmp_path):
    write_sweep(tmp_path / "ungated", "ungated", paper())
    write_sweep(tmp_path / "gated", "gated", paper())
    result = audit([tmp_path / "ungated", tmp_path / "gated"], curves=False)
    assert science_lines(result.sweep.problems) == []
    assert [d.pairs for d in result.deltas] == [2, 2]


def test_a_threshold_changed_between_the_regimes_is_named(tmp_path):
    config = paper()
    changed = dict(config.configurations)
    changed["wm-point"] = changed["wm-point"].model_copy(update={"threshold": 0.6})
    write_sweep(tmp_path / "ungated", "ungated", config)
    write_sweep(tmp_path / "gated", "gated", PaperConfig(**{**vars(config), "configurations": changed}))
    result = audit([tmp_path / "ungated", tmp_path / "gated"], curves=False)
    assert science_lines(result.sweep.problems) == [
        f"{tmp_path / 'gated'}: configuration wm-point ran other settings than in {tmp_path / 'ungated'} "
        "(world_model.threshold): its paired gated − ungated deltas compare different experiments"
    ]


def test_a_step_limit_given_to_one_regime_only_is_named_for_every_configuration(tmp_path):
    write_sweep(tmp_path / "ungated", "ungated", paper())
    write_sweep(tmp_path / "gated", "gated", paper(), max_steps=20)
    lines = science_lines(audit([tmp_path / "ungated", tmp_path / "gated"], curves=False).sweep.problems)
    assert [line.split(": ", 1)[1].split(" ran ")[0] for line in lines] == [
        "configuration aide",
        "configuration wm-point",
    ]
    assert all("(budget.max_steps)" in line for line in lines)


def test_a_configuration_run_with_another_budget_than_aide_is_named(tmp_path):
    out = tmp_path / "ungated"
    write_sweep(out, "ungated", paper())
    for task in ("A", "B"):  # wm-point's trials relaunched with -i 20 beside aide's 500 steps
        path = trial_dir(out, "wm-point", task, 34) / "spec.json"
        spec = read_record(path, TrialSpec, "trial spec")
        budget = spec.agent.budget.model_copy(update={"max_steps": 20})
        write_model(path, spec.model_copy(update={"agent": spec.agent.model_copy(update={"budget": budget})}))
    assert science_lines(audit([out], curves=False).sweep.problems) == [
        f"{out}: configuration wm-point differs from aide in more than its world model (budget.max_steps): "
        "its delta against aide is not the world model's alone"
    ]
