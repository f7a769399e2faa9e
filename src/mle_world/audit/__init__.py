"""Audit one or more output dirs: completeness, medal rates, paired deltas, costs, world model.

Reads launch.json, grading reports, status.json, events.jsonl, journal.json, costs/*.csv and one
spec.json per dir and configuration; writes `<out_dir>/summary.csv`, `report.md`, PNG plots,
`index.html` and `trials/*.html`, and shows the tables on the `Display` it is given (the CLI's draws
them with rich); it never prints itself. A re-audit that `audit/memo.py` finds nothing changed for
only shows what the last one showed (it reads and writes nothing else).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mle_world import layout
from mle_world.audit.memo import RecordingDisplay, drop_memo, input_stamps, load_memo, memo_key, save_memo
from mle_world.collector import collector_paused
from mle_world.errors import UserError, not_a_dir
from mle_world.launch.display import Display, SilentDisplay

if TYPE_CHECKING:
    from mle_world.audit.analysis import AuditResult as AuditResult
    from mle_world.audit.analysis import (
        best_metric_curves,
        budget_rows,
        calibration_rows,
        cost_rows,
        delta_rows,
        rate_rows,
        world_rows,
    )
    from mle_world.audit.cache import ParsedInputs, open_parsed_inputs
    from mle_world.audit.collect import Sweep as Sweep
    from mle_world.audit.collect import load_sweep as load_sweep
    from mle_world.audit.comparisons import compare
    from mle_world.audit.pairing import science_problems
    from mle_world.audit.report import show_tables, write_outputs
    from mle_world.audit.whatif import whatif_rows

_COMPUTING = {
    "mle_world.audit.analysis": (
        "AuditResult",
        "best_metric_curves",
        "budget_rows",
        "calibration_rows",
        "cost_rows",
        "delta_rows",
        "rate_rows",
        "world_rows",
    ),
    "mle_world.audit.cache": ("ParsedInputs", "open_parsed_inputs"),
    "mle_world.audit.collect": ("Sweep", "load_sweep"),
    "mle_world.audit.comparisons": ("compare",),
    "mle_world.audit.pairing": ("science_problems",),
    "mle_world.audit.report": ("show_tables", "write_outputs"),
    "mle_world.audit.whatif": ("whatif_rows",),
}
"""The modules that compute an audit, imported on first use: a re-audit shown from its memo needs none
of them (numpy, the records and the tables were 0.25 s of its 0.75 s of CPU at 10,000 reports)."""


def _import_computing() -> None:
    """The computing modules' names into this module, keeping any already there (one replaced by a
    caller, e.g. a benchmark's or test's stand-in, stays)."""
    names = globals()
    for module, attributes in _COMPUTING.items():
        if any(a not in names for a in attributes):
            loaded = importlib.import_module(module)
            for attribute in attributes:
                names.setdefault(attribute, getattr(loaded, attribute))


def __getattr__(name: str) -> Any:
    """`mle_world.audit.load_sweep`, `AuditResult`, ...: imported on first use (PEP 562)."""
    if not any(name in attributes for attributes in _COMPUTING.values()):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _import_computing()
    return globals()[name]


def audit(
    dirs: Sequence[Path],
    *,
    pad_missing: bool = False,
    curves: bool = True,
    parsed: ParsedInputs | None = None,
) -> AuditResult:
    """Collect and compute every audit table (no output); `parsed`: input files an earlier audit parsed."""
    _import_computing()
    with collector_paused():
        sweep = load_sweep(dirs, parsed)
        sweep.problems += science_problems(sweep.trials)
        return AuditResult(
            sweep=sweep,
            rates=rate_rows(sweep, pad_missing),
            deltas=delta_rows(sweep),
            costs=cost_rows(sweep),
            world=world_rows(sweep),
            budgets=budget_rows(sweep),
            curves=best_metric_curves(sweep) if curves else [],
            pad_missing=pad_missing,
            calibration=calibration_rows(sweep),
            comparisons=compare(sweep),
            whatif=whatif_rows(sweep),
        )


def default_out_dir(dirs: Sequence[Path]) -> Path:
    """`<first dir>/audit` (also when several dirs are audited together)."""
    return layout.OutputFiles(dirs[0]).audit


def run_audit(
    dirs: Sequence[Path],
    *,
    strict: bool = False,
    pad_missing: bool = False,
    display: Display | None = None,
    out_dir: Path | None = None,
    plots: bool = True,
    trial_pages: bool = True,
    draw_plots: bool = True,
    keep: list[object] | None = None,
) -> int:
    """Audit `dirs`, write outputs, show the tables on `display`; exit code 1 under `strict` if anything is off.

    `draw_plots` off (`--no-plots`): no PNG is drawn; those already drawn from the same numbers are kept.
    `keep`: the audit's result and stamps are appended to it, for a caller that frees them faster than one
    by one (the CLI leaves them to the process's exit).

    "Off" means a missing, invalid or duplicate trial report, or an unreadable/missing launch.json.
    Raises UserError when an input dir does not exist.
    """
    if not dirs:
        raise UserError("audit: give at least one output dir")
    for directory in dirs:
        if not directory.is_dir():
            raise UserError(f"audit: {directory}: {not_a_dir(directory)}")
    target = out_dir if out_dir is not None else default_out_dir(dirs)
    began = time.time_ns()
    flags = {"pad_missing": pad_missing, "plots": plots, "trial_pages": trial_pages, "draw_plots": draw_plots}
    key = memo_key(dirs, target, flags)
    shown = display if display is not None else SilentDisplay()
    memo = load_memo(target, key)
    if memo is not None and memo.current():
        memo.show(shown)
        return 1 if strict and memo.bad else 0
    drop_memo(target)
    _import_computing()
    parsed = open_parsed_inputs(target)
    result = audit(dirs, pad_missing=pad_missing, parsed=parsed)
    from mle_world.audit.pages import write_pages

    out = RecordingDisplay(shown)
    with collector_paused():
        written = write_outputs(result, target, plots=plots, draw=draw_plots)
        pngs = [p.name for p in written if p.suffix == ".png"]
        written += write_pages(result, target, pngs, pages=trial_pages)
        parsed.save()
        show_tables(result, out)
    out.say(f"wrote {', '.join(str(p) for p in written)}")
    sweep = result.sweep
    bad = bool(sweep.missing or sweep.invalid or sweep.duplicates or sweep.problems)
    inputs = input_stamps(sweep, parsed, began)
    if inputs is not None:
        pages = [target / "trials"] if trial_pages else []  # where pages.write_trial_pages puts them
        save_memo(target, key, inputs, [*written, *pages], out.shown, bad)
    if keep is not None:
        keep.append((result, parsed, inputs))
    return 1 if strict and bad else 0
