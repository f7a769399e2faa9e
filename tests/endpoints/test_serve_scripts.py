"""scripts/serve/*.sh with a fake `vllm` (tests/shims/vllm) first on PATH.

Reads the scripts' output, the shim's JSON log and the served /v1/models; writes configs and logs
under pytest's tmp_path. Every server started here listens on 127.0.0.1 and is stopped by pid.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from fakeserver import FakeOpenAIServer

from mle_world.launch.display import SilentDisplay
from mle_world.launch.endpoints import check_endpoints
from mle_world.records import EndpointSettings

REPO = Path(__file__).resolve().parents[2]
SHIMS = REPO / "tests" / "shims"
SERVE = REPO / "scripts" / "serve"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PATH=f"{SHIMS}{os.pathsep}{os.environ['PATH']}",
        VLLM_SHIM_LOG=str(tmp_path / "vllm.log"),
        READY_INTERVAL="0.1",
        SERVE_PUBLIC_HOST="127.0.0.1",
        TMPDIR=str(tmp_path),
    )
    for key in (
        "ROLE",
        "MODEL",
        "PORT",
        "GPUS",
        "TENSOR_PARALLEL",
        "MAX_MODEL_LEN",
        "DEVICES",
        "SERVE_CONFIG",
        "CUDA_VISIBLE_DEVICES",
    ):
        env.pop(key, None)
    return env


def shim_log(env: dict[str, str]) -> list[dict[str, object]]:
    path = Path(env["VLLM_SHIM_LOG"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class Running:
    """A serve script started in the background; `ready()` waits for its URL line."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            ["bash", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def ready(self, timeout: float = 20.0) -> str:
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert readable, f"no URL line within {timeout}s"
        return self.proc.stdout.readline().strip()

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


@pytest.fixture
def running():
    started: list[Running] = []

    def start(args: list[str], env: dict[str, str]) -> Running:
        run = Running(args, env)
        started.append(run)
        return run

    yield start
    for run in started:
        run.stop()


def test_role_script_reads_model_from_config_and_waits_until_ready(serve_env, running, tmp_path) -> None:
    port = free_port()
    config = tmp_path / "paper.yaml"
    config.write_text(
        "serve:\n"
        "  world:\n"
        "    model: org/world-model\n"
        f"    port: {port}\n"
        "    gpus: 2\n"
        "    max_model_len: 16384\n"
        "    extra_args: [--enforce-eager, --gpu-memory-utilization, '0.9']\n"
    )
    serve_env["VLLM_SHIM_DELAY"] = "1.0"  # the script must wait, not race
    run = running([str(SERVE / "serve_world.sh"), "--config", str(config), "--timeout", "30"], serve_env)

    line = run.ready()

    assert line == f"WORLD_URL=http://127.0.0.1:{port}/v1"
    (start,) = shim_log(serve_env)
    assert start["argv"] == [
        "serve", "org/world-model", "--host", "0.0.0.0", "--port", str(port),
        "--tensor-parallel-size", "2", "--max-model-len", "16384", "--generation-config", "vllm",
        "--enforce-eager", "--gpu-memory-utilization", "0.9",
    ]  # fmt: skip
    # the URL it printed works with the probe (real HTTP through the openai client)
    probes = check_endpoints({"world": EndpointSettings(url=line.split("=", 1)[1])}, SilentDisplay())
    assert probes[0].served_models == ("org/world-model",) and probes[0].max_model_len == 16384

    code, err = run.stop()
    assert code == 143
    assert "world server ready: serves org/world-model" in err
    assert shim_log(serve_env)[-1] == {"event": "stop", "signal": 15}  # vLLM was stopped with it


def test_command_line_overrides_config(serve_env, running) -> None:
    port = free_port()
    args = [
        str(SERVE / "serve_coder.sh"),
        "--model", "local/coder", "--port", str(port), "--gpus", "2", "--max-model-len", "8192",
        "--devices", "2,3", "--served-model-name", "coder", "--tool-call-parser", "hermes",
        "--", "--seed", "1",
    ]  # fmt: skip
    run = running(args, serve_env)
    assert run.ready() == f"CODER_URL=http://127.0.0.1:{port}/v1"
    (start,) = shim_log(serve_env)
    argv = start["argv"]
    assert isinstance(argv, list)
    assert argv[:2] == ["serve", "local/coder"]
    assert " ".join(argv[2:]) == (
        f"--host 0.0.0.0 --port {port} --tensor-parallel-size 2 --max-model-len 8192 "
        "--served-model-name coder --enable-auto-tool-choice --tool-call-parser hermes "
        "--generation-config vllm --seed 1"
    )
    assert start["cuda_visible_devices"] == "2,3"


def test_default_model_comes_from_the_paper_config(serve_env, running) -> None:
    serve = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())["serve"]["feedback"]
    port = free_port()
    run = running([str(SERVE / "serve_feedback.sh"), "--port", str(port)], serve_env)
    assert run.ready() == f"FEEDBACK_URL=http://127.0.0.1:{port}/v1"
    argv = shim_log(serve_env)[0]["argv"]
    assert isinstance(argv, list)
    assert argv[1] == serve["model"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == str(serve["gpus"])


def test_env_variables_work_like_options(serve_env, running) -> None:
    port = free_port()
    serve_env.update(ROLE="coder", MODEL="env/model", PORT=str(port), GPUS="1")
    run = running([str(SERVE / "serve_vllm.sh")], serve_env)
    assert run.ready() == f"CODER_URL=http://127.0.0.1:{port}/v1"
    assert shim_log(serve_env)[0]["argv"][1] == "env/model"  # type: ignore[index]


def test_generation_config_given_by_the_user_is_not_doubled(serve_env, running) -> None:
    port = free_port()
    args = [
        str(SERVE / "serve_coder.sh"),
        "--model",
        "m",
        "--port",
        str(port),
        "--",
        "--generation-config",
        "auto",
    ]
    assert running(args, serve_env).ready() == f"CODER_URL=http://127.0.0.1:{port}/v1"
    argv = shim_log(serve_env)[0]["argv"]
    assert isinstance(argv, list) and argv.count("--generation-config") == 1
    assert argv[argv.index("--generation-config") + 1] == "auto"


def test_a_busy_port_is_refused_before_vllm_starts(serve_env) -> None:
    """vLLM binds with SO_REUSEPORT: started on a port another server listens on, it would share it (the
    kernel splitting requests between two models), and the readiness check saw the other server's answer
    and printed its URL as this role's. The script refuses the port before starting vLLM."""
    with FakeOpenAIServer(model="another-roles-model") as other:
        result = subprocess.run(
            ["bash", str(SERVE / "serve_coder.sh"), "--model", "m", "--port", str(other.port)],
            env=serve_env, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"port {other.port} on " in result.stderr and "is already in use" in result.stderr
    assert result.stdout == "" and shim_log(serve_env) == []  # no URL, and vLLM never started


def test_ready_only_when_the_port_serves_the_expected_model(serve_env) -> None:
    """A server that answers on the port for another model is not this role's server (exit 4)."""
    helper = [sys.executable, str(SERVE / "serve_config.py"), "wait"]
    with FakeOpenAIServer(model="another-roles-model") as other:
        url = f"http://127.0.0.1:{other.port}/v1/models"
        wrong = subprocess.run(
            [*helper, url, "--expect", "m", "--timeout", "5"], capture_output=True, text=True
        )
        right = subprocess.run(
            [*helper, url, "--expect", "another-roles-model"], capture_output=True, text=True
        )
    assert (wrong.returncode, wrong.stdout.strip()) == (4, "another-roles-model")
    assert (right.returncode, right.stdout.strip()) == (0, "another-roles-model")


def test_tensor_parallel_needs_that_many_visible_gpus(serve_env, running) -> None:
    """sbatch --gres=gpu:1 with --gpus 2: refused at once (vLLM would fail only after its start-up)."""
    serve_env["CUDA_VISIBLE_DEVICES"] = "3"
    result = subprocess.run(
        ["bash", str(SERVE / "serve_world.sh"), "--model", "m", "--gpus", "2", "--port", str(free_port())],
        env=serve_env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2 and shim_log(serve_env) == []
    assert result.stderr.strip() == (
        "serve_vllm.sh: --gpus 2 (tensor parallel) but 1 GPU(s) visible (CUDA_VISIBLE_DEVICES=3): "
        "ask for 2 (sbatch --gres=gpu:2, --devices) or pass --gpus 1"
    )
    # More GPUs than the tensor parallelism: served, with a warning that some idle.
    port = free_port()
    run = running([str(SERVE / "serve_world.sh"), "--model", "m", "--gpus", "2", "--devices", "0,1,2",
                   "--port", str(port)], serve_env)  # fmt: skip
    assert run.ready() == f"WORLD_URL=http://127.0.0.1:{port}/v1"
    _, err = run.stop()
    assert "3 GPUs visible (CUDA_VISIBLE_DEVICES=0,1,2) and tensor parallel 2: 1 will idle" in err


def test_vllm_dying_before_ready_fails(serve_env) -> None:
    serve_env["VLLM_SHIM_EXIT"] = "7"
    result = subprocess.run(
        ["bash", str(SERVE / "serve_coder.sh"), "--model", "m", "--port", str(free_port())],
        env=serve_env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 1
    assert "vLLM exited (status 7) before coder was ready" in result.stderr
    assert result.stdout == ""


def test_not_ready_in_time_stops_vllm(serve_env) -> None:
    serve_env["VLLM_SHIM_NEVER_READY"] = "1"
    result = subprocess.run(
        ["bash", str(SERVE / "serve_world.sh"), "--model", "m", "--port", str(free_port()), "--timeout", "1"],
        env=serve_env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 1
    assert "world server not ready on port" in result.stderr and "after 1s; stopping it" in result.stderr
    assert shim_log(serve_env)[-1] == {"event": "stop", "signal": 15}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no role: pass --role coder|world|feedback (or set ROLE)"),
        (["--role", "judge"], "unknown role judge (coder, world or feedback)"),
        (["--role", "coder", "--bogus"], "unknown argument --bogus (vLLM arguments go after --)"),
        (["--role", "coder", "--model", "m", "--port", "x"], "port must be a number from 1 to 65535, got x"),
        # Was accepted: vLLM was started and died, exit 1 "before coder was ready".
        (
            ["--role", "coder", "--model", "m", "--port", "99999"],
            "port must be a number from 1 to 65535, got 99999",
        ),
        (["--role", "coder", "--config", "/nonexistent.yaml"], "config /nonexistent.yaml does not exist"),
    ],
)
def test_argument_errors(serve_env, args, message) -> None:
    result = subprocess.run(
        ["bash", str(SERVE / "serve_vllm.sh"), *args],
        env=serve_env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == f"serve_vllm.sh: {message}"


def test_missing_model_names_the_config_key(serve_env, tmp_path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("serve: {}\n")
    result = subprocess.run(
        ["bash", str(SERVE / "serve_vllm.sh"), "--role", "world", "--config", str(config)],
        env=serve_env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert f"no model for world: pass --model or set serve.world.model in {config}" in result.stderr


def test_vllm_missing(serve_env) -> None:
    serve_env["VLLM"] = "/nonexistent/vllm"
    result = subprocess.run(
        ["bash", str(SERVE / "serve_vllm.sh"), "--role", "coder", "--model", "m"],
        env=serve_env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert "vllm not found" in result.stderr


def _slurm_or_fail() -> None:
    import shutil

    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        reason = (
            "sbatch/sinfo not found: start the local cluster with `bash scripts/slurm/local_cluster.sh up`"
        )
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.mark.slurm
def test_role_script_through_sbatch(serve_env, tmp_path) -> None:
    """sbatch runs a spool copy of serve_feedback.sh; it finds serve_vllm.sh via SLURM_SUBMIT_DIR."""
    _slurm_or_fail()
    port = free_port()
    log = tmp_path / "serve-feedback.log"
    submit = subprocess.run(
        ["sbatch", "--parsable", "--partition", "gpu", "--mem", "1G", "--cpus-per-task", "1",
         "--time", "5", f"--output={log}", str(SERVE / "serve_feedback.sh"), "--model", "m", "--port", str(port)],
        env=serve_env, cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if log.exists() and f"FEEDBACK_URL=http://127.0.0.1:{port}/v1" in log.read_text():
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"no URL line from job {job}: {log.read_text() if log.exists() else 'no log'}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as response:
            assert json.loads(response.read())["data"][0]["id"] == "m"
        assert shim_log(serve_env)[0]["argv"][:2] == ["serve", "m"]  # type: ignore[index]
    finally:
        subprocess.run(["scancel", job], capture_output=True, timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and shim_log(serve_env)[-1].get("event") != "stop":
        time.sleep(0.5)
    assert shim_log(serve_env)[-1].get("event") == "stop"  # scancel stopped vLLM as well


def _free_port_run(count: int) -> int:
    """A port P with P+1 … P+count-1 also free (the roles' bases and their replicas' ports)."""
    for _ in range(50):
        base = free_port()
        socks = []
        try:
            for offset in range(1, count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", base + offset))
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
        return base
    raise RuntimeError(f"no {count} adjacent free ports")


def test_serve_config_endpoints_file_register_unregister_wait(tmp_path) -> None:
    helper = ["python3", str(SERVE / "serve_config.py")]
    path = tmp_path / "endpoints.yaml"
    for url in ("http://a:8000/v1", "http://b:8001/v1", "http://a:8000/v1"):
        subprocess.run([*helper, "register", str(path), "coder", url], check=True, timeout=30)
    subprocess.run([*helper, "register", str(path), "world", "http://w:8001/v1"], check=True, timeout=30)
    assert yaml.safe_load(path.read_text()) == {
        "coder": ["http://b:8001/v1", "http://a:8000/v1"],
        "world": ["http://w:8001/v1"],
    }
    waited = subprocess.run(
        [*helper, "wait-endpoints", str(path), "coder=2", "world=1", "--timeout", "5"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert waited.returncode == 0 and "coder: http://b:8001/v1, http://a:8000/v1" in waited.stdout
    subprocess.run([*helper, "unregister", str(path), "coder", "http://b:8001/v1"], check=True, timeout=30)
    late = subprocess.run(
        [*helper, "wait-endpoints", str(path), "coder=2", "--timeout", "0", "--interval", "0.1"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert late.returncode == 1 and "not all replicas ready after 0s (coder 1/2)" in late.stderr


def _submit_replicas(
    role: str, n: int, endpoints: Path, config: Path, env: dict[str, str], jobs: list[str]
) -> None:
    """serve_replicas.sh --wait; the submitted job ids go to `jobs` (for scancel) before any assert."""
    submit = subprocess.run(
        ["bash", str(SERVE / "serve_replicas.sh"), "--role", role, "--replicas", str(n),
         "--endpoints-file", str(endpoints), "--config", str(config), "--wait", "120",
         "--sbatch-arg=--partition=gpu", "--sbatch-arg=--mem=1G", "--sbatch-arg=--cpus-per-task=1",
         "--sbatch-arg=--time=5"],
        env={**env, "READY_INTERVAL": "0.5"}, cwd=config.parent, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    submitted = submit.stdout.split()
    jobs.extend(submitted)
    assert submit.returncode == 0, submit.stderr
    assert len(submitted) == n


@pytest.mark.slurm
def test_replicas_as_slurm_jobs_fill_the_endpoints_file(serve_env, tmp_path) -> None:
    """Two coder replicas and a world replica as sbatch jobs on one node register their URLs; the CLI
    reads the file; scancel empties it. With the roles' ports P and P+1 (as 8000 and 8001), coder replica
    1 was put on P+1 too: on one node it collided with the world server. Each job asks for the GPUs of its
    tensor parallelism (1 here; serve_<role>.sh's #SBATCH line asks for 2: three jobs would not fit the
    node's 4)."""
    _slurm_or_fail()
    base = _free_port_run(5)
    config = tmp_path / "paper.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "serve": {
                    "coder": {"model": "m-coder", "port": base},
                    "world": {"model": "m-world", "port": base + 1},
                }
            }
        )
    )
    endpoints = tmp_path / "endpoints.yaml"
    jobs: list[str] = []
    try:
        _submit_replicas("world", 1, endpoints, config, serve_env, jobs)
        _submit_replicas("coder", 2, endpoints, config, serve_env, jobs)
        urls = {"coder": {base, base + 3}, "world": {base + 1}}
        listed = yaml.safe_load(endpoints.read_text())
        assert {role: set(listed[role]) for role in urls} == {
            role: {f"http://127.0.0.1:{port}/v1" for port in ports} for role, ports in urls.items()
        }
        for role, ports in urls.items():  # each URL serves its own role's model
            for port in ports:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as response:
                    assert json.loads(response.read())["data"][0]["id"] == f"m-{role}"
        # The sweep's side: check-endpoints reads the file and probes every replica.
        check = subprocess.run(
            [sys.executable, str(REPO / "run_paper.py"), "check-endpoints", "--config", str(REPO / "configs/demo.yaml"),
             "--endpoints-file", str(endpoints)],
            capture_output=True, text=True, timeout=120, env=serve_env,
        )  # fmt: skip
        assert all(url in check.stdout for url in listed["coder"]), check.stdout + check.stderr
    finally:
        subprocess.run(["scancel", *jobs], capture_output=True, timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and yaml.safe_load(endpoints.read_text()):
        time.sleep(0.5)
    assert not yaml.safe_load(endpoints.read_text())  # stopped replicas took their URLs out


@pytest.mark.parametrize("script", ["serve_vllm.sh", "serve_replicas.sh", "serve_coder.sh"])
def test_help_is_the_usage_header_and_nothing_else(script: str) -> None:
    proc = subprocess.run(
        ["bash", str(SERVE / script), "--help"], capture_output=True, text=True, timeout=30, check=True
    )
    lines = proc.stdout.splitlines()
    # Was: a fixed line range that had drifted, printing `set -Eeuo pipefail` and the comment marks.
    assert lines[-1].startswith("Exit codes:"), lines[-3:]
    assert not any(line.startswith(("#", "set ")) for line in lines), lines
