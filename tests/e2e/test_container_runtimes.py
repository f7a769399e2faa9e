"""Tiny sweeps through the real container runtimes: `enroot start` on the local backend and pyxis
(`srun --container-image`) on the local Slurm, in the CI image built by the real build script, with
scripted endpoints over loopback; graded and costed. If the rendered enroot or pyxis command stops
running for real, these fail.

Reads the CLI's outputs; writes output dirs and a fake home under pytest's tmp paths.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import scripted
import yaml
from e2ekit import REPO, as_from_a_terminal, cli
from fakeserver import FakeOpenAIServer, Reply
from runtimekit import runtime_options

from mle_world.launch.endpoints import PROBE_TOOL_NAME

pytestmark = [pytest.mark.slow, pytest.mark.shared_setup]

HOME_CANARY = "mlew-home-canary.txt"

# Prepended to every scripted solution: what the generated code sees of the container, written into
# its working dir (which is in the trial dir on the host). A mounted home would appear at /root or at
# the launcher's $HOME (Enroot's 10-home.sh hook, pyxis --container-mount-home).
PROBE = r"""
import json as _json, os as _os, sys as _sys
_probe = {"python": _sys.executable, "image_src": _os.path.exists("/opt/mle-world/src/pyproject.toml")}
try:
    open("/home/data/probe-write", "w").close()
    _probe["data_write"] = "allowed"
except OSError as _exc:
    _probe["data_write"] = _exc.strerror
_probe["home_canary"] = [p for p in HOMES if _os.path.exists(_os.path.join(p, CANARY))]
_args = "/etc/fake-nvidia/configure-args"  # left by the NVIDIA hook's test double, if it ran
_probe["nvidia_configure"] = open(_args).read().split() if _os.path.exists(_args) else None
_json.dump(_probe, open("probe.json", "w"))
"""


def probe_code(home: Path) -> str:
    homes = json.dumps(["/root", str(home)])
    return PROBE.replace("HOMES", homes).replace("CANARY", json.dumps(HOME_CANARY))


def probing_coder(home: Path, sleep_s: float = 0.0):  # type: ignore[no-untyped-def]
    inner = scripted.coder(sleep_s)
    probe = probe_code(home)

    def respond(request: dict[str, Any]) -> Reply:
        reply = inner(request)
        assert reply.content is not None
        return dataclasses.replace(
            reply, content=reply.content.replace("```python\n", "```python\n" + probe, 1)
        )

    return respond


@pytest.fixture
def fake_home(tmp_path: Path) -> Path:
    """HOME of the launcher, with a canary the container must not see (home not mounted)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / HOME_CANARY).write_text("host home\n")
    return home


@pytest.fixture
def servers(fake_home: Path):  # type: ignore[no-untyped-def]
    with (
        FakeOpenAIServer("coder-model", default=probing_coder(fake_home)) as coder,
        FakeOpenAIServer("feedback-model", default=scripted.review) as feedback,
        FakeOpenAIServer("world-model", default=scripted.world()) as world,
    ):
        yield {"coder": coder, "feedback": feedback, "world": world}


def sweep_argv(
    runtime: str,
    image: Path,
    config: Path,
    data_dir: Path,
    out: Path,
    servers: dict[str, Any],
    *,
    gpu: str = "none",
    configs: str = "aide,wm-point",
) -> list[str]:
    return [
        *runtime_options(runtime, image),
        "--config",
        str(config),
        "--regime",
        "gated",
        "--tasks",
        "iris-species",
        "--configs",
        configs,
        "--grade",
        "--data-dir",
        str(data_dir),
        "--output-dir",
        str(out),
        "--n-workers",
        "2",
        "--gpu-device",
        gpu,
        "--no-progress",
        "--coder-url",
        servers["coder"].url,
        "--feedback-url",
        servers["feedback"].url,
        "--world-url",
        servers["world"].url,
    ]


def is_probe(request: dict[str, Any]) -> bool:
    """The launcher's endpoint probes (a 1-token completion, a forced probe tool call)."""
    choice = request.get("tool_choice")
    forced = isinstance(choice, dict) and choice.get("function", {}).get("name") == PROBE_TOOL_NAME
    return request.get("max_tokens") == 1 or forced


def launcher_env(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home)}


def probes(out: Path) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in out.glob("runs/*/*/**/probe.json")]
    assert found, "no probe.json: the scripted code did not run"
    return found


def check_graded_costed_in_container(out: Path, trials: int = 2) -> None:
    record = json.loads((out / "launch.json").read_text())
    assert len(record["trials"]) == trials
    states = {json.loads(p.read_text())["state"] for p in out.glob("runs/*/*/status.json")}
    assert states == {"succeeded"}, [p.read_text() for p in out.glob("runs/*/*/status.json")]
    reports = sorted(out.glob("runs/*/*_grading_report.json"))
    assert len(reports) == trials
    assert all(json.loads(p.read_text())["valid_submission"] for p in reports)
    cost_files = sorted((out / "costs").glob("*.csv"))
    assert len([p for p in cost_files if p.name != "summary.csv"]) == trials
    tokens = [
        int(row["prompt_tokens"] or 0)
        for p in cost_files
        if p.name != "summary.csv"
        for row in csv.DictReader(p.open())
        if row["role"] == "coder"
    ]
    assert sum(tokens) > 0

    # The generated code ran inside the image, not on the host: the image's venv and source tree,
    # the data read-only, the launcher's home invisible.
    for probe in probes(out):
        assert probe["python"].startswith("/opt/venv/"), probe
        assert probe["image_src"] is True, probe
        assert probe["data_write"] == "Read-only file system", probe
        assert probe["home_canary"] == [], probe
    assert not list(out.glob("runs/**/probe-write"))


def test_enroot_local_tiny_sweep_runs_in_the_real_container(
    tmp_path: Path,
    ci_image: Path,
    data_dir: Path,
    fast_config: Path,
    servers: dict[str, FakeOpenAIServer],
    fake_home: Path,
) -> None:
    out = tmp_path / "enroot"
    argv = sweep_argv("enroot", ci_image, fast_config, data_dir, out, servers)
    proc = cli(*argv, env=launcher_env(fake_home))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    check_graded_costed_in_container(out)
    logs = "".join(p.read_text() for p in out.glob("runs/*/*/logs/launcher.log"))
    assert "98-nvidia.sh" not in logs  # no GPU: the NVIDIA hook stays out of the way
    results = [json.loads(p.read_text()) for p in out.glob("runs/*/*/result.json")]
    assert [r["gpu"] for r in results] == [None, None]


def test_enroot_trial_gets_its_gpu_through_the_nvidia_hook_and_checks_it(
    tmp_path: Path,
    fake_gpu_image: Path,
    data_dir: Path,
    fast_config: Path,
    servers: dict[str, FakeOpenAIServer],
    fake_home: Path,
) -> None:
    """--gpu-device 1: the hook (a test double of nvidia-container-cli) is asked for GPU 1 with the
    compute capability; the agent's GPU check records the GPU in result.json."""
    out = tmp_path / "gpu"
    argv = sweep_argv("enroot", fake_gpu_image, fast_config, data_dir, out, servers, gpu="1", configs="aide")
    proc = cli(*argv, env=launcher_env(fake_home))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    check_graded_costed_in_container(out, trials=1)
    for probe in probes(out):
        assert "--device=1" in probe["nvidia_configure"] and "--compute" in probe["nvidia_configure"]
    (result,) = [json.loads(p.read_text()) for p in out.glob("runs/*/*/result.json")]
    assert result["gpu"] == {
        "names": ["Fake Test GPU"],
        "driver": "535.54.03",
        "framework": None,
        "framework_devices": None,
    }


def test_unusable_gpu_fails_the_trial_as_infra_at_once(
    tmp_path: Path,
    fake_gpu_image: Path,
    data_dir: Path,
    fast_config: Path,
    servers: dict[str, FakeOpenAIServer],
    fake_home: Path,
) -> None:
    out = tmp_path / "broken"
    argv = sweep_argv("enroot", fake_gpu_image, fast_config, data_dir, out, servers, gpu="0", configs="aide")
    proc = cli(*argv, env={**launcher_env(fake_home), "FAKE_GPU_BROKEN": "1"})
    assert proc.returncode != 0
    (status,) = [json.loads(p.read_text()) for p in out.glob("runs/*/*/status.json")]
    assert status["state"] == "failed" and status["failure_class"] == "infra", status
    assert status["cause"].startswith("agent failed: infra: GPU unusable: nvidia-smi failed (exit 9): "), (
        status
    )
    assert "couldn't communicate with the NVIDIA driver" in status["cause"]
    agent_calls = [r for r in servers["coder"].sent if not is_probe(r.request)]
    assert agent_calls == [], "the agent called the coder before checking its GPU"


def test_image_changed_after_its_build_is_refused_before_launch(
    tmp_path: Path, ci_image: Path, data_dir: Path, fast_config: Path, servers: dict[str, FakeOpenAIServer]
) -> None:
    """The manifest written by the build names the image's sha256: a changed image never launches."""
    image = tmp_path / "aide.sqsh"
    shutil.copyfile(ci_image, image)
    manifest = json.loads(Path(f"{ci_image}.manifest.json").read_text())
    assert manifest["sha256"] and manifest["torch"]["variant"] == "pypi"
    Path(f"{image}.manifest.json").write_text(json.dumps({**manifest, "sha256": "f" * 64}))
    out = tmp_path / "refused"
    proc = cli(*sweep_argv("enroot", image, fast_config, data_dir, out, servers))
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "the image changed after it was built" in lines[0], proc.stderr
    assert not (out / "runs").exists()


def _running_nodes(out: Path) -> list[Path]:
    return [
        node
        for status in out.glob("runs/*/*/status.json")
        if json.loads(status.read_text())["state"] == "running"
        for node in (status.parent / "logs" / "nodes").glob("*.py")
    ]


def _states(out: Path) -> dict[str, str]:
    return {
        json.loads(p.read_text())["trial_id"]: json.loads(p.read_text())["state"]
        for p in out.glob("runs/*/*/status.json")
    }


def test_enroot_sweep_killed_inside_the_container_resumes(
    tmp_path: Path, ci_image: Path, data_dir: Path, fast_config: Path, fake_home: Path
) -> None:
    """Ctrl-C while a trial's agent runs inside `enroot start`: it stops resumably, the rerun
    finishes it and leaves the finished trial alone."""
    out = tmp_path / "resume"
    with (
        FakeOpenAIServer("coder-model", default=probing_coder(fake_home, sleep_s=2.0)) as coder,
        FakeOpenAIServer("feedback-model", default=scripted.review) as feedback,
        FakeOpenAIServer("world-model", default=scripted.world()) as world,
    ):
        servers = {"coder": coder, "feedback": feedback, "world": world}
        argv = [
            sys.executable,
            str(REPO / "run_paper.py"),
            *sweep_argv("enroot", ci_image, fast_config, data_dir, out, servers),
            "--n-workers",
            "1",
        ]
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env=launcher_env(fake_home),
            preexec_fn=as_from_a_terminal,
        )
        deadline = time.monotonic() + 300
        # one trial done, the other one's agent inside its container with a node executed
        while time.monotonic() < deadline and not (
            sorted(_states(out).values()) == ["running", "succeeded"] and _running_nodes(out)
        ):
            time.sleep(0.3)
        assert sorted(_states(out).values()) == ["running", "succeeded"], _states(out)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err[-2000:]
        first = _states(out)
        assert sorted(first.values()) == ["pending", "succeeded"], first
        finished = [
            p.parent
            for p in out.glob("runs/*/*/status.json")
            if json.loads(p.read_text())["state"] == "succeeded"
        ]
        stamp = (finished[0] / "result.json").stat().st_mtime_ns

        rerun = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=launcher_env(fake_home))
        assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert set(_states(out).values()) == {"succeeded"}
    assert (finished[0] / "result.json").stat().st_mtime_ns == stamp  # the finished one untouched
    resumed = next(p.parent for p in out.glob("runs/*/*/status.json") if p.parent != finished[0])
    log = (resumed / "logs" / "launcher.log").read_text()
    # SIGTERM reached the agent through enroot: it checkpointed (exit 143), then the rerun resumed it
    assert " exit 143 after " in log and log.count(" start attempt ") == 2, log
    assert json.loads((resumed / "journal.json").read_text())["sessions"] == 2
    # nothing of the killed container is left running
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(out) not in ps


def test_enroot_sweep_whose_launcher_was_sigkilled_resumes_without_a_second_agent(
    tmp_path: Path, ci_image: Path, data_dir: Path, fast_config: Path, fake_home: Path
) -> None:
    """`kill -9` of the launcher (the OOM killer, a lost terminal) while an agent runs inside `enroot
    start`: the container outlives it (the command has a session of its own). The rerun stops it (SIGTERM: the agent
    checkpoints) before it resumes the trial; it started a second agent beside the first, which
    found the journal held and exited 75, failing the trial as infra."""
    out = tmp_path / "sigkill"
    with (
        FakeOpenAIServer("coder-model", default=probing_coder(fake_home, sleep_s=2.0)) as coder,
        FakeOpenAIServer("feedback-model", default=scripted.review) as feedback,
        FakeOpenAIServer("world-model", default=scripted.world()) as world,
    ):
        servers = {"coder": coder, "feedback": feedback, "world": world}
        argv = [
            sys.executable,
            str(REPO / "run_paper.py"),
            *sweep_argv("enroot", ci_image, fast_config, data_dir, out, servers, configs="aide"),
        ]
        env = launcher_env(fake_home)
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not _running_nodes(out):
            time.sleep(0.3)
        assert _running_nodes(out), _states(out)
        proc.kill()
        proc.wait(timeout=60)
        [(trial, orphan)] = [(p.parent, json.loads(p.read_text())) for p in out.glob("runs/*/*/status.json")]
        assert orphan["state"] == "running"
        try:
            os.kill(orphan["pid"], 0)  # the command (exec'd into the container's agent) outlived its launcher
            rerun = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
            assert rerun.returncode == 0, rerun.stderr[-3000:]
            assert "[launch] stopping 1 trial(s) still running from a launcher that is gone" in rerun.stderr
            status = json.loads((trial / "status.json").read_text())
            assert (status["state"], status["attempt"]) == ("succeeded", 1)
            assert json.loads((trial / "journal.json").read_text())["sessions"] == 2
            assert not _alive(orphan["pid"])
        finally:
            if _alive(orphan["pid"]):  # a failed test leaves no container behind
                os.killpg(orphan["pid"], signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Running (not gone, nor a zombie init has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slurm
def test_pyxis_slurm_tiny_sweep_one_gpu_per_trial(
    tmp_path: Path,
    pyxis_ready: None,
    fake_gpu_image: Path,
    data_dir: Path,
    fast_config: Path,
    servers: dict[str, FakeOpenAIServer],
    fake_home: Path,
) -> None:
    """submitit job array → `srun --overlap --container-image=...` through the real pyxis plugin,
    one (fake) GPU per trial: the hook is asked for the node's id of the task's own GPU with compute
    (`all` mounted every GPU of a local pool's job in every trial)."""
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        yaml.safe_dump(
            {
                "slurm": {
                    "partition": "gpu",
                    "gpus_per_trial": 1,
                    "cpus_per_trial": 1,
                    "mem_gb": 1,
                    "array_parallelism": 2,
                    "grading_margin_min": 4,
                },
                "launch": {"wall_grace_s": 60},
            }
        )
    )
    out = tmp_path / "pyxis"
    argv = sweep_argv("pyxis", fake_gpu_image, fast_config, data_dir, out, servers)
    proc = cli(*argv, "--cluster-config", str(cluster), env=launcher_env(fake_home), timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    check_graded_costed_in_container(out)
    statuses = [json.loads(p.read_text()) for p in out.glob("runs/*/*/status.json")]
    assert all(s["slurm_job_id"] for s in statuses), statuses
    # The local cluster does not renumber (no ConstrainDevices): the task's CUDA_VISIBLE_DEVICES, which
    # status.json records, is the node's id.
    gpus = sorted(s["gpu"] for s in statuses)
    devices = sorted(
        arg.removeprefix("--device=")
        for probe in probes(out)
        for arg in probe["nvidia_configure"]
        if arg.startswith("--device=")
    )
    assert devices == gpus and all(d in {"0", "1", "2", "3"} for d in devices), (devices, gpus)
    assert all("--compute" in probe["nvidia_configure"] for probe in probes(out))
    results = [json.loads(p.read_text()) for p in out.glob("runs/*/*/result.json")]
    assert [r["gpu"]["names"] for r in results] == [["Fake Test GPU"]] * 2
