"""Golden tests of each runtime's rendered command, with shell-hostile paths.

Golden files live in tests/plan/golden/; set UPDATE_GOLDEN=1 to re-record them (a missing one fails).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from mle_world.errors import UserError
from mle_world.plan.config import load_paper_config
from mle_world.plan.render import RuntimeSpec, render_command, view_paths
from mle_world.plan.sweep import Selection, expand
from mle_world.tasks.registry import load_registry

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
HOSTILE_OUT = Path('/scratch/my runs/it\'s "quoted" $HOME;ls')
KEYS = ("CUDA_VISIBLE_DEVICES", "CODER_API_KEY", "WORLD_API_KEY", "FEEDBACK_API_KEY")

RUNTIMES = {
    "enroot": RuntimeSpec("enroot", image="/images/aide x86.sqsh", env_names=KEYS),
    "pyxis": RuntimeSpec("pyxis", image="/images/aide.sqsh", env_names=KEYS),
    "apptainer": RuntimeSpec("apptainer", image="/images/aide x86.sif", env_names=KEYS),
    "process-sandbox": RuntimeSpec(
        "process",
        python="/opt/py/bin/python",
        host_paths=("/opt/py", "/src tree"),
        env_names=KEYS,
        path_env="/opt/py/bin:/usr/bin:/bin",
    ),
    "process": RuntimeSpec("process", sandbox=False, python="/opt/py/bin/python", env_names=KEYS),
}


def _trial(runtime: RuntimeSpec, output_dir: Path = HOSTILE_OUT, data_dir: Path = Path("/data sets/mle")):
    registry = load_registry()
    config = load_paper_config(REPO / "configs" / "paper.yaml", registry.__contains__)
    return expand(
        config,
        "gated",
        Selection(tasks=("spooky-author-identification",), configurations=("wm-rank4",), seeds=(34,)),
        output_dir=output_dir,
        data_dir=data_dir,
        known_task=registry.__contains__,
        view=lambda t, p: view_paths(runtime, t, p),
    )[0]


@pytest.mark.parametrize("name", sorted(RUNTIMES))
def test_rendered_command_matches_golden(name: str) -> None:
    runtime = RUNTIMES[name]
    command = render_command(_trial(runtime), runtime)
    golden = GOLDEN / f"{name}.sh"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(command + "\n")
    assert golden.exists(), f"{golden} is missing: record it with UPDATE_GOLDEN=1 and review the diff"
    assert command + "\n" == golden.read_text()


@pytest.mark.parametrize("name", sorted(RUNTIMES))
def test_rendered_command_is_one_valid_shell_command_with_hostile_paths_intact(name: str) -> None:
    runtime = RUNTIMES[name]
    command = render_command(_trial(runtime), runtime)
    # bash -n parses without running; then the tokens must carry the hostile path unmangled.
    subprocess.run(["bash", "-n", "-c", command], check=True)
    tokens = shlex.split(command.replace("\\\n", " "))
    trial_dir = str(HOSTILE_OUT / "runs/wm-rank4/spooky-author-identification_seed34")
    assert any(trial_dir in token for token in tokens)
    assert "secret" not in command


def test_enroot_passes_every_variable_by_name_and_mounts_data_read_only() -> None:
    runtime = RUNTIMES["enroot"]
    tokens = shlex.split(render_command(_trial(runtime), runtime).replace("\\\n", " "))
    # wrappers leave signals to the agent; never the host home in view
    assert tokens[:7] == ["trap", "", "TERM", "USR2;", "ENROOT_MOUNT_HOME=no", "enroot", "start"]
    env_args = [tokens[i + 1] for i, t in enumerate(tokens) if t == "-e"]
    for key in KEYS[1:]:
        assert key in env_args  # by name: enroot copies the host's value
    # The hook mounts the trial's GPUs (NVIDIA_VISIBLE_DEVICES, set by the launcher) renumbered from
    # 0: the host's CUDA_VISIBLE_DEVICES would hide them, and a literal `all` breaks GPU-less nodes.
    assert "CUDA_VISIBLE_DEVICES" not in env_args
    assert "NVIDIA_VISIBLE_DEVICES" in env_args and "NVIDIA_DRIVER_CAPABILITIES" in env_args
    assert not [arg for arg in env_args if arg.startswith("NVIDIA_VISIBLE_DEVICES=")]
    mounts = [tokens[i + 1] for i, t in enumerate(tokens) if t == "-m"]
    assert any(m.endswith(":/home/data:none:rbind,ro,x-create=dir") for m in mounts)
    assert "--workdir" not in tokens and "-w" not in tokens
    assert tokens[-3:-1] == ["sh", "-c"] and tokens[-1].startswith("cd /home/trial && exec ")


def test_sandboxed_process_command_runs_with_keys_only_by_reference(tmp_path: Path) -> None:
    """Executing the rendered env prefix shows that keys travel by variable, not by value."""
    runtime = RuntimeSpec("process", sandbox=False, python="python3", env_names=("CODER_API_KEY",))
    trial = _trial(runtime, output_dir=tmp_path / "o u t", data_dir=tmp_path / "data")
    command = render_command(trial, runtime)
    assert "sk-live-123" not in command
    trial.trial_dir.mkdir(parents=True)
    probe = (
        command.split(" python3 ")[0] + " python3 -c 'import os; print(os.environ.get(\"CODER_API_KEY\"))'"
    )
    out = subprocess.run(
        ["bash", "-c", probe],
        env={"CODER_API_KEY": "sk-live-123", "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "sk-live-123"


@pytest.mark.parametrize(
    ("runtime", "out", "message"),
    [
        ("enroot", Path("/a:b"), "enroot mounts cannot express ':'"),
        ("pyxis", Path("/a,b"), "pyxis --container-mounts cannot express"),
        ("pyxis", Path("/a:b"), "pyxis --container-mounts cannot express"),
        ("apptainer", Path("/a,b"), "apptainer --bind cannot express ',' or ':'"),
        ("apptainer", Path("/a:b"), "apptainer --bind cannot express ',' or ':'"),
    ],
)
def test_inexpressible_paths_are_refused(runtime: str, out: Path, message: str) -> None:
    spec = RUNTIMES[runtime]
    with pytest.raises(UserError, match=message):
        render_command(_trial(spec, output_dir=out), spec)


def test_sandbox_refuses_data_dir_under_a_bound_path() -> None:
    spec = RUNTIMES["process-sandbox"]
    with pytest.raises(UserError, match="--data-dir"):
        render_command(_trial(spec, data_dir=Path("/opt/py/data")), spec)


@pytest.mark.parametrize("name", sorted(RUNTIMES))
@pytest.mark.parametrize("where", ["the private dir", "inside it", "its parent"])
def test_a_mount_showing_private_answers_is_refused(name: str, where: str) -> None:
    """A cluster mount of the task's private dir itself, of a folder in it, or of one holding it."""
    private = _trial(RUNTIMES[name]).private_dir
    src = {"the private dir": private, "inside it": private / "sub", "its parent": private.parent}[where]
    spec = replace(RUNTIMES[name], mounts=((str(src), "/mnt/extra"),))
    with pytest.raises(UserError, match="private answers"):
        render_command(_trial(spec), spec)


def test_sandbox_refuses_a_bound_host_path_inside_the_private_dir() -> None:
    """The sandbox binds its host paths read-only: one of them under the private dir shows part of it."""
    private = _trial(RUNTIMES["process-sandbox"]).private_dir
    spec = replace(RUNTIMES["process-sandbox"], host_paths=("/opt/py", str(private / "venv")))
    with pytest.raises(UserError, match="--data-dir: .* overlaps"):
        render_command(_trial(spec), spec)


def test_pyxis_leaves_the_trials_gpus_to_the_launchers_nvidia_visible_devices() -> None:
    """`NVIDIA_VISIBLE_DEVICES=all srun …` gave each trial of a local pool every GPU of the job (Slurm sets
    each step's CUDA_VISIBLE_DEVICES to all of them), so all trials ran on the first. With GPUs the
    command sets nothing: the launcher's per-trial value (launch/gpus.py) reaches the hook through
    srun's --export=ALL. Without GPUs the hook is kept out."""
    with_gpus = replace(RUNTIMES["pyxis"], gpus=True)
    command = render_command(_trial(with_gpus), with_gpus)
    assert "NVIDIA_VISIBLE_DEVICES" not in command and command.startswith("srun ")
    assert "--export=ALL," in command
    without = render_command(_trial(RUNTIMES["pyxis"]), RUNTIMES["pyxis"])
    assert without.startswith("NVIDIA_VISIBLE_DEVICES=void srun ")


@pytest.mark.parametrize(
    "root", ["/", "/data", "/data/", "/data/x", "/dat", "data", "data/x", ".", "/data//x"]
)
def test_inside_is_the_lexical_parents_rule(root: str) -> None:
    """The private-dir overlap checks compare strings; they must say what `root in path.parents` says
    (a prefix without the separator, '/dat' for '/data', is no parent; a trailing or doubled '/' is)."""
    from mle_world.plan.render import _inside

    paths = ["/", "/data", "/data/x", "/data/x/y", "/database", "/dat", "data", "data/x", "datax", "x"]
    for text in paths:
        path = Path(text)
        assert _inside(path, root) == (path == Path(root) or Path(root) in path.parents), (text, root)


STAND_IN = """#!/bin/sh
# a stand-in container runtime: what it was started with, one item a line
echo "program $(basename "$0")"
for arg in "$@"; do echo "arg $arg"; done
env | sed 's/^/env /'
"""


def _run_apptainer(tmp_path: Path, program: str, **env: str) -> list[str]:
    """The rendered apptainer command executed with a stand-in `program` first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / program
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    runtime = RUNTIMES["apptainer"]
    command = render_command(_trial(runtime), runtime)
    assert "sk-live-123" not in command
    out = subprocess.run(
        ["bash", "-c", command],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_apptainer_passes_keys_by_name_and_gpus_only_when_the_launcher_gave_some(tmp_path: Path) -> None:
    """--cleanenv passes nothing of the host: keys cross as APPTAINERENV_/SINGULARITYENV_ variables set
    from the environment at start (never in the command), a user's APPTAINER_BIND is dropped, and
    --nv is asked for only when NVIDIA_VISIBLE_DEVICES (launch/gpus.py) names GPUs."""
    env = {"CODER_API_KEY": "sk-live-123", "APPTAINER_BIND": "/data", "NVIDIA_VISIBLE_DEVICES": "void"}
    lines = _run_apptainer(tmp_path, "apptainer", **env)
    assert lines[0] == "program apptainer"
    assert "env APPTAINERENV_CODER_API_KEY=sk-live-123" in lines
    assert "env SINGULARITYENV_CODER_API_KEY=sk-live-123" in lines
    assert "env APPTAINERENV_NVIDIA_VISIBLE_DEVICES=void" in lines
    assert not [line for line in lines if line.startswith("env APPTAINER_BIND")]
    assert not [line for line in lines if "WORLD_API_KEY" in line]  # unset: not passed at all
    args = [line.removeprefix("arg ") for line in lines if line.startswith("arg ")]
    assert args[:5] == ["exec", "--containall", "--cleanenv", "--no-mount", "bind-paths"]
    assert "--nv" not in args
    trial_dir = str(HOSTILE_OUT / "runs/wm-rank4/spooky-author-identification_seed34")
    assert args[args.index(f"{trial_dir}:/home/trial") - 1] == "--bind"
    tail = ["--pwd", "/home/trial", "/images/aide x86.sif", "python3", "-m", "mle_world.agent", "--spec"]
    assert args[-8:] == [*tail, "/home/trial/spec.json"]
    given = [
        line.removeprefix("arg ")
        for line in _run_apptainer(tmp_path, "apptainer", NVIDIA_VISIBLE_DEVICES="2,3")
        if line.startswith("arg ")
    ]
    assert "--nv" in given


def test_apptainer_falls_back_to_singularity(tmp_path: Path) -> None:
    lines = _run_apptainer(tmp_path, "singularity", NVIDIA_VISIBLE_DEVICES="void")
    assert lines[0] == "program singularity"
