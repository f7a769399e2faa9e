"""Sweep expansion of the shipped paper config: counts, ids and science hashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mle_world.errors import UserError
from mle_world.plan.config import load_cluster_config, load_paper_config
from mle_world.plan.render import RuntimeSpec, view_paths
from mle_world.plan.sweep import Selection, expand
from mle_world.tasks.registry import load_registry

REPO = Path(__file__).resolve().parents[2]


def _expand(regime: str = "gated", selection: Selection | None = None, **endpoint_urls: str):
    selection = selection or Selection()
    registry = load_registry()
    config = load_paper_config(REPO / "configs" / "paper.yaml", registry.__contains__)
    if endpoint_urls:
        from dataclasses import replace

        endpoints = {
            r: e.model_copy(update={"url": endpoint_urls.get(r, e.url)}) for r, e in config.endpoints.items()
        }
        config = replace(config, endpoints=endpoints)
    runtime = RuntimeSpec("enroot", image="/img.sqsh")
    return expand(
        config,
        regime,  # type: ignore[arg-type]
        selection,
        output_dir=Path("/out"),
        data_dir=Path("/data"),
        known_task=registry.__contains__,
        view=lambda t, p: view_paths(runtime, t, p),
    )


@pytest.mark.parametrize("regime", ["gated", "ungated"])
def test_paper_config_gives_357_distinct_trials_per_regime(regime: str) -> None:
    trials = _expand(regime)
    assert len(trials) == 357 == 7 * 17 * 3
    assert len({t.trial_id for t in trials}) == 357
    assert len({t.trial_dir for t in trials}) == 357
    assert {t.spec.seed for t in trials} == {34, 35, 36}
    assert len({t.spec.configuration for t in trials}) == 7
    assert all(t.trial_id.startswith(f"{regime}/") for t in trials)


def test_trial_ids_and_layout_are_readable() -> None:
    trial = next(
        t
        for t in _expand()
        if t.spec.configuration == "wm-rank4"
        and t.spec.seed == 34
        and t.spec.task == "spooky-author-identification"
    )
    assert trial.trial_id == "gated/wm-rank4/spooky-author-identification/seed34"
    assert trial.trial_dir == Path("/out/runs/wm-rank4/spooky-author-identification_seed34")
    assert trial.public_dir == Path("/data/spooky-author-identification/prepared/public")
    assert trial.spec.agent.world_model.candidates == 4


def test_science_hash_ignores_transport_but_not_science() -> None:
    base = {t.trial_id: t.spec.science_hash for t in _expand()}
    moved = {t.trial_id: t.spec.science_hash for t in _expand(coder="http://elsewhere:9000/v1")}
    assert base == moved
    fewer_steps = {t.trial_id: t.spec.science_hash for t in _expand(selection=Selection(max_steps=7))}
    assert all(base[k] != v for k, v in fewer_steps.items())
    ungated = {t.trial_id.replace("ungated/", "gated/"): t.spec.science_hash for t in _expand("ungated")}
    assert all(base[k] != v for k, v in ungated.items())


def test_science_hash_is_pinned() -> None:
    """Changing the recipe changes every trial's identity: bump identity.HASH_SCHEME and update this."""
    trial = next(t for t in _expand() if t.trial_id == "gated/aide/leaf-classification/seed35")
    assert trial.spec.science_hash == PINNED_HASH


PINNED_HASH = "a407562f20047999"


def test_filters_select_a_subset() -> None:
    trials = _expand(
        selection=Selection(tasks=("leaf-classification",), configurations=("aide", "wm-blind"), seeds=(35,))
    )
    assert [t.trial_id for t in trials] == [
        "gated/aide/leaf-classification/seed35",
        "gated/wm-blind/leaf-classification/seed35",
    ]


@pytest.mark.parametrize(
    ("selection", "flag"),
    [
        (Selection(configurations=("nope",)), "--configs: unknown configuration 'nope'"),
        (Selection(tasks=("not-a-competition",)), "--tasks: unknown task id 'not-a-competition'"),
        (Selection(seeds=(1, 1)), "--seeds: duplicate entries"),
    ],
)
def test_bad_filters_name_the_flag(selection: Selection, flag: str) -> None:
    with pytest.raises(UserError, match=flag):
        _expand(selection=selection)


def test_cluster_settings_have_defaults() -> None:
    cluster = load_cluster_config(REPO / "configs" / "cluster.yaml")
    assert cluster.slurm.gpus_per_trial == 1
    assert load_cluster_config(None).launch.max_attempts >= 1
