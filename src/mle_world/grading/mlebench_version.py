"""Which MLE-bench graded: its package version, the git commit of its checkout and any local changes.

Reads the installed distribution's metadata (in the process that imports mlebench), runs `git` in the
checkout the package was imported from, or reads the `.git_archival.txt` of an unpacked archive; writes nothing.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

from mle_world.storage import read_regular

SOURCE_CODE = """
import importlib.metadata, mlebench
try:
    _dist = importlib.metadata.distribution("mlebench")
    source = {"version": _dist.version, "direct_url": _dist.read_text("direct_url.json")}
except importlib.metadata.PackageNotFoundError:
    source = {"version": None, "direct_url": None}
source["file"] = mlebench.__file__
"""
"""`installed_source` for a script run by another environment's python (MLEBENCH_VENV): sets `source`."""


def installed_source(module_file: str | None) -> dict[str, str | None]:
    """What the environment importing mlebench says of it: the module's file, the installed distribution's
    version and its direct_url.json (pip's record of an editable or VCS install). Same as `SOURCE_CODE`."""
    try:
        dist = importlib.metadata.distribution("mlebench")
        source = {"version": dist.version, "direct_url": dist.read_text("direct_url.json")}
    except importlib.metadata.PackageNotFoundError:
        source = {"version": None, "direct_url": None}
    return {**source, "file": module_file}


def describe(source: Mapping[str, str | None]) -> str:
    """`<version> (git <commit>)`, `… with local changes sha256 <12 hex>` when the checkout differs from its
    commit (`git diff HEAD`: an edited grade.py or leaderboard changes medals); the commit of a VCS install
    from pip's direct_url.json when the package is no checkout; `unknown version` when metadata is absent.
    An unpacked `git archive` (scripts/install_mlebench.sh's MLEBENCH_ARCHIVE) gives `… from a git archive`:
    its commit, with no way to see local changes."""
    version = source.get("version") or "unknown version"
    commit = _checkout_commit(source.get("file"))
    if commit is None:
        commit = _archive_commit(source.get("file"))
    if commit is None:
        commit = _vcs_commit(source.get("direct_url"))
    return f"{version} (git {commit})" if commit else version


def _git(top: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(top), *args],
            capture_output=True,
            check=False,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _checkout_commit(module_file: str | None) -> str | None:
    """The commit of the git checkout whose root holds the `mlebench/` package (as openai/mle-bench's
    does); None when the package sits anywhere else (site-packages, maybe inside another repository)."""
    if not module_file:
        return None
    root = Path(module_file).resolve().parent.parent
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top.decode().strip()).resolve() != root:
        return None
    head = _git(root, "rev-parse", "HEAD")
    if head is None:
        return None
    commit = head.decode().strip()
    if _git(root, "status", "--porcelain", "--untracked-files=no"):
        diff = _git(root, "diff", "HEAD") or b""
        commit += f" with local changes sha256 {hashlib.sha256(diff).hexdigest()[:12]}"
    return commit


_ARCHIVAL_NODE = re.compile(r"^node: ([0-9a-f]{40}|[0-9a-f]{64})$", re.MULTILINE)


def _archive_commit(module_file: str | None) -> str | None:
    """The commit in `.git_archival.txt` (setuptools-scm's file; the install script writes it from the
    archive's header) beside the `mlebench/` package; None without one, or with `$Format:%H$` unfilled."""
    if not module_file:
        return None
    try:
        data = read_regular(Path(module_file).resolve().parent.parent / ".git_archival.txt")
    except OSError:
        return None
    found = _ARCHIVAL_NODE.search(data[:4096].decode(errors="replace"))
    return f"{found.group(1)} from a git archive" if found else None


def _vcs_commit(direct_url: str | None) -> str | None:
    """The commit pip recorded for `pip install git+https://…@<commit>` (direct_url.json's vcs_info)."""
    try:
        info = json.loads(direct_url) if direct_url else None
    except ValueError:
        return None
    vcs = info.get("vcs_info") if isinstance(info, dict) else None
    commit = vcs.get("commit_id") if isinstance(vcs, dict) else None
    return commit if isinstance(commit, str) else None
