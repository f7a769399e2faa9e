"""The sweep's SweepRequest: every rule about which flags go together, checked when it is built.

Builds requests in process (from parsed flags and from values); reads and writes no file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mle_world.cli.commands import COMMANDS
from mle_world.cli.request import SweepRequest
from mle_world.cli.sweep import build_run_parser
from mle_world.errors import UserError

SWEEP = {"regime": "gated", "output_dir": Path("/o")}
ONE_TRIAL = {"competition": "iris-species"}


def request(argv: list[str], environ: dict[str, str] | None = None) -> SweepRequest:
    args = build_run_parser(tuple(COMMANDS)).parse_args(argv)
    return SweepRequest.from_args(args, tuple(argv), environ or {})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({**SWEEP, "configuration": "MINIMAL", "config": Path("p.yaml")}, "-m MINIMAL: Kapso's mode picks"),
        ({**ONE_TRIAL, "tasks": ("x",)}, "--tasks does not combine with -c COMPETITION"),
        ({**ONE_TRIAL, "seeds": ()}, "--seeds does not combine with -c COMPETITION"),
        ({**ONE_TRIAL, "mle_seed": "one"}, "MLE_SEED='one' is not an integer"),
        ({**SWEEP, "tasks": ()}, "--tasks: nothing given"),
        ({**SWEEP, "configs": ()}, "--configs: nothing given"),
        ({**SWEEP, "seeds": ()}, "--seeds: no seed given"),
        ({**SWEEP, "configuration": "aide"}, "-m/--configuration and --seed need -c COMPETITION"),
        ({**SWEEP, "seed": 3}, "-m/--configuration and --seed need -c COMPETITION"),
        ({"output_dir": Path("/o")}, "--regime is required"),
        ({"regime": "gated"}, "--output-dir is required"),
        ({**SWEEP, "no_sandbox": True}, "--no-sandbox applies to --runtime process only"),
        ({**SWEEP, "summary": True}, "--summary needs --dry-run"),
        ({**SWEEP, "no_wait": True}, "--no-wait: only with --backend slurm"),
    ],
)
def test_each_flag_rule_is_refused_when_the_request_is_built(fields: dict[str, object], message: str) -> None:
    with pytest.raises(UserError) as caught:
        SweepRequest(**fields)  # type: ignore[arg-type]
    assert str(caught.value).startswith(message), caught.value


def test_a_request_is_frozen_and_rebuilding_it_checks_again() -> None:
    built = SweepRequest(**SWEEP)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.dry_run = True  # type: ignore[misc]
    with pytest.raises(UserError, match="--summary needs --dry-run"):
        dataclasses.replace(built, summary=True)
    assert dataclasses.replace(built, summary=True, dry_run=True).summary


def test_what_follows_from_the_flags() -> None:
    one = request(["-c", "iris-species", "-m", "MINIMAL"], {"MLE_SEED": "7", "CUDA_DEVICE": "2,3"})
    assert (one.kapso_mode, one.configuration_name, one.config_path().name) == ("MINIMAL", None, "demo.yaml")
    assert (one.sweep_regime, one.one_trial_seed, one.gpus_from_env, one.gpu_text) == (
        "gated",
        7,
        True,
        "2,3",
    )
    flagged = request(
        ["-c", "iris-species", "-m", "aide", "--seed", "5", "--gpu-device", "1"], {"MLE_SEED": "x"}
    )
    assert (flagged.configuration_name, flagged.one_trial_seed, flagged.gpus_from_env) == ("aide", 5, False)
    assert flagged.gpu_text == "1"
    sweep = request(["--regime", "ungated", "--output-dir", "o"], {"CUDA_DEVICE": "2"})
    assert (sweep.sweep_regime, sweep.gpu_text, sweep.config_path().name) == ("ungated", "0", "paper.yaml")


def test_endpoint_flags_keep_only_what_was_given() -> None:
    built = request(
        [*("--regime", "gated", "--output-dir", "o"), "--coder-url", "http://c/v1", "--world-model", "m"]
    )
    assert dict(built.endpoints.urls) == {"coder": "http://c/v1"}
    assert dict(built.endpoints.models) == {"world": "m"}
    assert built.endpoints.given("coder", "url") == "http://c/v1"
    assert built.endpoints.given("coder", "key_env") is None
    with pytest.raises(TypeError):
        built.endpoints.urls["world"] = "http://w/v1"  # type: ignore[index]
