"""Headless Chromium for page tests: screenshots kept as test artifacts, the DOM as the browser built it.

Reads the pages it is given; writes PNGs under the artifacts dir (`MLE_WORLD_TEST_ARTIFACTS`, default
`test-artifacts/screenshots/` in the checkout) and a fresh profile dir per run under the system temp dir.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--disable-dev-shm-usage",  # containers often mount a tiny /dev/shm
)


def artifacts_dir() -> Path:
    path = Path(os.environ.get("MLE_WORLD_TEST_ARTIFACTS", REPO / "test-artifacts")) / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def chromium() -> str:
    """Debian's `chromium` (installed by scripts/test.sh); a missing browser fails the test, not skips it."""
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium not found: scripts/test.sh installs Debian's chromium package")
    return path


def _run(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        proc = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, url],
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def dump_dom(url: str) -> str:
    """The serialised DOM after the page loaded (text nodes re-escaped, so markup is visible as such)."""
    return _run(url, "--dump-dom").stdout


def screenshot(url: str, name: str, width: int = 1280, height: int = 1400) -> Path:
    """A PNG of the page's first `height` pixels, kept in the artifacts dir under `name`."""
    target = artifacts_dir() / name
    target.unlink(missing_ok=True)
    _run(url, f"--window-size={width},{height}", f"--screenshot={target}")
    assert target.is_file(), f"chromium wrote no screenshot for {url}"
    return target


def drawn_fraction(png: Path) -> float:
    """Share of pixels that differ from the most common colour (0 for a blank page)."""
    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(png)
    flat = (pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    _, counts = np.unique(flat, axis=0, return_counts=True)
    return 1.0 - counts.max() / len(flat)
