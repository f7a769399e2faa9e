"""No module but `layout` spells a trial's or an output dir's file name: each path comes from
`layout.TrialFiles` / `layout.OutputFiles` (or their names), so renaming a file is one edit.

Reads the package's source files (an AST scan of their string constants); writes nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mle_world
from mle_world import layout
from mle_world.layout import OutputFiles, TrialFiles

PACKAGE = Path(mle_world.__file__).parent
PATH_CALLS = {"file", "may_have", "joinpath", "join", "open", "with_name"}
"""Calls whose string arguments are file names (`trial.file(...)`, `os.path.join`, `os.open`, …)."""


def bare_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each file name spelled as a string: any constant that is a dotted name
    (`"events.jsonl"`), and a plain one (`"logs"`) where it builds a path (`dir / "logs"`, `open("logs")`)."""
    names = layout.FILE_NAMES
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in names and "." in node.value:
            found.append((node.lineno, node.value))
        path_parts: list[ast.expr] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            path_parts = [node.right]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in PATH_CALLS:
                path_parts = list(node.args)
        found += [
            (part.lineno, part.value)
            for part in path_parts
            if isinstance(part, ast.Constant) and part.value in names and "." not in part.value
        ]
    return found


def test_no_module_but_layout_spells_a_trial_or_output_dir_file_name() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "layout.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        offenders += [f"{path.relative_to(PACKAGE)}:{line}: {name!r}" for line, name in bare_names(tree)]
    assert offenders == [], "use layout.TrialFiles / layout.OutputFiles:\n" + "\n".join(offenders)


def test_the_scan_finds_each_way_a_name_was_spelled() -> None:
    """The scan itself can fail: each spelling the tree had before layout named its files is caught."""
    source = "\n".join(
        [
            'a = trial_dir / "events.jsonl"',
            'b = trial_dir / "logs"',
            'c = trial.file("result.json")',
            'd = trial.may_have("submission")',
            'e = ("journal.json", "spec.json")',
            'f = os.open("submission", flags)',
            'ok = build("costs", "Costs (USD)")',  # a table's name, not a path
            'ok = "submission" in summary',
        ]
    )
    found = bare_names(ast.parse(source))
    assert sorted(line for line, _ in found) == [1, 2, 3, 4, 5, 5, 6], found


def test_the_file_objects_name_every_file_under_their_dir(tmp_path: Path) -> None:
    trial = OutputFiles(tmp_path).trial("aide", "iris", 3)
    assert trial == TrialFiles(tmp_path / "runs" / "aide" / "iris_seed3")
    assert trial.report == tmp_path / "runs" / "aide" / "iris_seed3_grading_report.json"
    assert trial.submission == trial.dir / "submission" / "submission.csv"
    assert trial.previous_result == trial.dir / "logs" / "result.previous.json"
    files = [
        getattr(trial, name) for name in dir(TrialFiles) if isinstance(getattr(TrialFiles, name), property)
    ]
    assert all(p.is_relative_to(trial.dir) for p in files if p != trial.report)
    out = OutputFiles(tmp_path)
    outputs = [
        getattr(out, name) for name in dir(OutputFiles) if isinstance(getattr(OutputFiles, name), property)
    ]
    assert all(p.parent == tmp_path or p.parent.parent == tmp_path for p in outputs)
    assert out.cost_summary == layout.cost_summary_path(tmp_path) and out.launch == tmp_path / layout.LAUNCH
