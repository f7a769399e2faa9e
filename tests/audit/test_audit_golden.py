"""The audit's numbers stay what they were: a synthetic sweep's summary.csv, report.md and printed tables
against golden files written by the audit before it was optimised for speed.

Reads tests/audit/golden/; writes a synthetic sweep (600 reports, events, journals, statuses, a missing,
a corrupt and an unexpected report) under tmp_path.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console
from synthetic import add_irregularities, make_sweep

from mle_world.audit import run_audit
from mle_world.cli.display import RichDisplay

GOLDEN = Path(__file__).with_name("golden")

pytestmark = pytest.mark.shared_setup


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("golden-sweep")
    dirs = make_sweep(root, 600, events=True, seed=3)
    add_irregularities(dirs, seed=3)
    buf = io.StringIO()
    # Audited from inside the temp dir by relative paths: the lines naming files are as long, and wrap
    # the same, whatever the temp dir's length (another user, another TMPDIR).
    here = os.getcwd()
    os.chdir(root)
    try:
        relative = [Path(d.name) for d in dirs]
        display = RichDisplay(Console(file=buf, width=160))
        code = run_audit(relative, display=display, out_dir=Path("audit"), trial_pages=False)
    finally:
        os.chdir(here)
    assert code == 0
    outputs = {name: (root / "audit" / name).read_text() for name in ("summary.csv", "report.md")}
    outputs["console.txt"] = buf.getvalue()
    return {name: text.replace(str(root), "ROOT") for name, text in outputs.items()}


@pytest.mark.parametrize("name", ["summary.csv", "report.md", "console.txt"])
def test_audit_output_matches_golden(audited: dict[str, str], name: str) -> None:
    golden = GOLDEN / f"synthetic-{name}"
    if os.environ.get("MLEW_WRITE_GOLDEN"):
        golden.write_text(audited[name])
    assert golden.exists(), f"{golden} missing: run once with MLEW_WRITE_GOLDEN=1 and review it"
    assert audited[name] == golden.read_text()
