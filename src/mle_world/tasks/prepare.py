"""Prepare task data: Kaggle credential checks, `mlebench prepare` as a subprocess, local folders.

Reads `~/.kaggle/kaggle.json` (or KAGGLE_* env vars) and the task list; writes
`<data_dir>/<id>/prepared/` (through mlebench for Kaggle tasks, `prepare_local` for local ones).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mle_world.errors import UserError
from mle_world.tasks.local import is_prepared, prepare_local

INSTALL_HINT = "mlebench is not installed; run scripts/install_mlebench.sh"
NETWORK_MARKERS = (
    "connectionerror",
    "nameresolutionerror",
    "failed to establish a new connection",
    "temporary failure in name resolution",
    "max retries exceeded",
    "network is unreachable",
    "name or service not known",
    "timed out",
)


def kaggle_json_candidates(env: Mapping[str, str], home: Path) -> list[Path]:
    """Where the Kaggle client looks for kaggle.json, in its order."""
    if env.get("KAGGLE_CONFIG_DIR"):
        return [Path(env["KAGGLE_CONFIG_DIR"]) / "kaggle.json"]
    xdg = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return [home / ".kaggle" / "kaggle.json", xdg / "kaggle" / "kaggle.json"]


def check_kaggle_credentials(env: Mapping[str, str], home: Path) -> None:
    """Pass when KAGGLE_USERNAME+KAGGLE_KEY are set or a readable, mode-600 kaggle.json exists.

    Raises UserError with one line saying what to do. Never imports kaggle (it authenticates,
    prints and may exit at import).
    """
    if env.get("KAGGLE_USERNAME") and env.get("KAGGLE_KEY"):
        return
    candidates = kaggle_json_candidates(env, home)
    path = next((p for p in candidates if p.exists()), None)
    if path is None:
        raise UserError(
            f"no Kaggle credentials: put your API token in {candidates[0]} (chmod 600) "
            "or set KAGGLE_USERNAME and KAGGLE_KEY (https://www.kaggle.com/settings → Create New Token)"
        )
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable Kaggle credentials ({type(exc).__name__}: {exc})") from exc
    if mode & 0o077:
        raise UserError(f"{path}: mode {mode:03o} is readable by others; run `chmod 600 {path}`")
    if not isinstance(data, dict) or not data.get("username") or not data.get("key"):
        raise UserError(f"{path}: must be JSON with non-empty 'username' and 'key'")


def find_mlebench(env: Mapping[str, str]) -> str:
    """The `mlebench` executable: `$MLEBENCH_VENV/bin/mlebench` if set, else on PATH."""
    venv = env.get("MLEBENCH_VENV")
    if venv:
        exe = Path(venv) / "bin" / "mlebench"
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
        raise UserError(f"MLEBENCH_VENV={venv}: no bin/mlebench; run scripts/install_mlebench.sh")
    found = shutil.which("mlebench", path=env.get("PATH", os.defpath))
    if found is None:
        raise UserError(INSTALL_HINT)
    return found


def explain_prepare_failure(task: str, output: str) -> str:
    """Map `mlebench prepare` output to one line saying what to do."""
    low = output.lower()
    if "you must accept this competition" in low or ("eoferror" in low and "rules" in low):
        return f"{task}: accept the rules at https://www.kaggle.com/c/{task}/rules, then rerun prepare"
    if "no module named 'kaggle.rest'" in low:
        return f"{task}: kaggle is too new for mlebench (needs kaggle>=1.6,<1.7); rerun scripts/install_mlebench.sh"
    if "no module named 'mlebench'" in low or "no module named mlebench" in low:
        return INSTALL_HINT
    if any(marker in low for marker in NETWORK_MARKERS):
        return f"{task}: no network to Kaggle (prepare needs api.kaggle.com even when the zip is cached)"
    if "401" in low or "unauthorized" in low or "permissionerror" in low or "403" in low:
        return f"{task}: Kaggle rejected the credentials (or the rules are not accepted: https://www.kaggle.com/c/{task}/rules)"
    if "checksum" in low or "mismatch" in low:
        return f"{task}: checksum mismatch in mlebench prepare; delete {task}/ in the data dir and retry"
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    last = lines[-1] if lines else "no output"
    return f"{task}: mlebench prepare failed: {last[:300]}"


Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def _run(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        stdin=subprocess.DEVNULL,  # the rules prompt calls input(): fail instead of hanging
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(env),
        check=False,
    )


@dataclass(frozen=True)
class PrepareOutcome:
    """One prepared task."""

    task: str
    kind: str
    """'local' or 'mlebench'."""
    prepared_dir: Path


def prepare_tasks(
    tasks: Iterable[str],
    data_dir: Path,
    local_competitions: Mapping[str, Path],
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    seed: int = 0,
    on_progress: Callable[[str], None] | None = None,
) -> list[PrepareOutcome]:
    """Prepare every task: local ones offline, the rest via `mlebench prepare -c ID --data-dir DIR`.

    Credentials and the mlebench executable are checked once, before anything runs, and only when
    a Kaggle task is in the list. The first failure raises UserError with one clear line.
    """
    environ = dict(os.environ if env is None else env)
    home_dir = home if home is not None else Path.home()
    task_list = list(dict.fromkeys(t.strip() for t in tasks if t.strip()))
    kaggle_tasks = [t for t in task_list if t not in local_competitions]
    exe = ""
    if kaggle_tasks:
        check_kaggle_credentials(environ, home_dir)
        exe = find_mlebench(environ)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"--data-dir {data_dir}: cannot create the directory ({exc.strerror or exc})"
        ) from None
    outcomes: list[PrepareOutcome] = []
    for task in task_list:
        if on_progress is not None:
            on_progress(task)
        if task in local_competitions:
            prepared = prepare_local(task, local_competitions[task], data_dir, seed=seed)
            outcomes.append(PrepareOutcome(task, "local", prepared))
            continue
        try:
            done = _run([exe, "prepare", "-c", task, "--data-dir", str(data_dir)], environ)
        except OSError as exc:
            raise UserError(f"{exe}: cannot run ({exc}); {INSTALL_HINT}") from exc
        if done.returncode != 0:
            raise UserError(explain_prepare_failure(task, done.stdout or ""))
        if not is_prepared(data_dir, task):
            raise UserError(
                f"{task}: mlebench prepare exited 0 but {data_dir / task / 'prepared'} has no public/private data"
            )
        outcomes.append(PrepareOutcome(task, "mlebench", data_dir / task / "prepared"))
    return outcomes
