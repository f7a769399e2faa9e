"""House rule: no module of the package above ~400 lines unless its docstring says why.

Reads src/mle_world/**/*.py (competition folders excluded); writes nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

LIMIT = 400
REASON = "Longer than 400 lines because"
SRC = Path(__file__).resolve().parents[1] / "src" / "mle_world"


def test_long_modules_say_why_in_their_docstring() -> None:
    unexplained = []
    for path in sorted(SRC.rglob("*.py")):
        if "competitions" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > LIMIT and REASON not in (ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(f"{path.relative_to(SRC)}: {len(text.splitlines())} lines")
    assert not unexplained, f"split these modules or add '{REASON} ...' to their docstring: {unexplained}"
