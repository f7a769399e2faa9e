"""Collect a sweep's records for the audit: expected trials, grading reports, statuses, costs, events.

Reads `launch.json`, `runs/<cfg>/<task>_seed<seed>_grading_report.json`, `status.json`,
`events.jsonl`, `journal.json` and `costs/*.csv` of one or more output dirs; writes nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mle_world import layout
from mle_world.agent.journal import load_journal_data
from mle_world.costs.summary import read_cost_rows
from mle_world.grading.report import GradingReport
from mle_world.records import AgentResult, LaunchRecord, TrialStatus
from mle_world.trial_events import TrialEvents, read_events


@dataclass
class Trial:
    """One expected trial and what was found for it."""

    trial_id: str
    regime: str
    configuration: str
    task: str
    seed: int
    output_dir: Path
    trial_dir: Path
    report_path: Path
    """Where its grading report lives (`layout.report_beside` the canonical trial dir)."""
    report: GradingReport | None = None
    problem: str | None = None
    """'missing' or 'invalid: …' when there is no usable report."""
    state: str | None = None
    cause: str | None = None
    downtime_s: float = 0.0
    """Endpoint downtime the trial rode out (status.json; excluded from its budget)."""
    cost_usd: float | None = None
    cost_known: bool = False
    has_costs: bool = False
    tokens: int | None = None
    gpu_hours: float | None = None
    dir_missing: bool = field(default=False, repr=False, compare=False)
    """The listing of its configuration dir has no trial dir: skip reading files inside it."""
    result: AgentResult | None = None
    """The agent's result.json (stop reason, counts), when readable."""
    events_cache: TrialEvents | None = field(default=None, repr=False, compare=False)
    """events.jsonl parsed once (tables and pages share it)."""
    journal_cache: tuple[Any] | None = field(default=None, repr=False, compare=False)
    """(journal.json data or None,) read once (curves and pages share it)."""

    @property
    def settled_without_report(self) -> bool:
        """Failed for good and left no submission: counts as a non-medal for its seed (not missing)."""
        return (
            self.report is None
            and self.state == "failed"
            and not (self.trial_dir / "submission" / "submission.csv").is_file()
        )


@dataclass
class Sweep:
    """Everything the audit found in its input dirs."""

    dirs: list[Path]
    trials: list[Trial] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    """Reports on disk that no launch.json lists."""
    problems: list[str] = field(default_factory=list)
    """Dir-level problems (missing/corrupt launch.json, unreadable cost files, bad trial ids)."""

    @property
    def found(self) -> list[Trial]:
        """Trials with a valid report."""
        return [t for t in self.trials if t.report is not None]

    @property
    def missing(self) -> list[Trial]:
        """Trials without a report."""
        return [t for t in self.trials if t.problem == "missing" and not t.settled_without_report]

    @property
    def invalid(self) -> list[Trial]:
        """Trials whose report is corrupt or inconsistent."""
        return [t for t in self.trials if t.problem is not None and t.problem != "missing"]

    @property
    def failed(self) -> list[Trial]:
        """Trials whose status.json says failed."""
        return [t for t in self.trials if t.state == "failed"]


def _expected_from_launch(output_dir: Path, sweep: Sweep) -> list[tuple[str, Path | None]]:
    path = output_dir / layout.LAUNCH
    if path.is_file():
        try:
            record = LaunchRecord.model_validate_json(path.read_text(encoding="utf-8"))
            out: list[tuple[str, Path | None]] = []
            for trial in record.trials:
                trial_dir = Path(trial.trial_dir)
                out.append((trial.trial_id, trial_dir if trial_dir.is_absolute() else output_dir / trial_dir))
            return out
        except (OSError, ValueError, ValidationError) as exc:
            sweep.problems.append(
                f"{path}: unreadable launch.json ({type(exc).__name__}); using files on disk"
            )
    else:
        sweep.problems.append(f"{path}: missing; expected trials taken from the files on disk")
    return _expected_from_disk(output_dir)


def _expected_from_disk(output_dir: Path) -> list[tuple[str, Path | None]]:
    """Fallback: trials with a spec.json or a report; the regime comes from spec.json when present."""
    found: dict[str, Path | None] = {}
    for spec in layout.spec_paths(output_dir):
        try:
            data = json.loads(spec.read_text(encoding="utf-8"))
            found[str(data["trial_id"])] = spec.parent
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for report in layout.report_paths(output_dir):
        try:
            data = json.loads(report.read_text(encoding="utf-8"))
            found.setdefault(str(data["trial_id"]), None)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return list(found.items())


def load_report(trial: Trial, listed: bool | None = None, path: str | None = None) -> None:
    """Attach the trial's report, or record why there is none (never raises).

    `listed`: whether its directory listing has the report (saves a stat per trial); None to look.
    `path`: the report's path as a string when the caller has it (saves building a Path).
    """
    if path is None:
        path = str(trial.report_path)
    if listed is False or (listed is None and not os.path.exists(path)):
        trial.problem = "missing"
        return
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        report = GradingReport.model_validate_json(text)
    except FileNotFoundError:
        trial.problem = "missing"
        return
    except (OSError, UnicodeDecodeError) as exc:
        trial.problem = f"invalid: unreadable ({type(exc).__name__})"
        return
    except ValidationError as exc:
        kind = "corrupt JSON" if any(e["type"] == "json_invalid" for e in exc.errors()) else "schema"
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        trial.problem = f"invalid: {kind} ({where}: {first['msg']})" if where else f"invalid: {kind}"
        return
    if report.trial_id != trial.trial_id:
        trial.problem = f"invalid: report is for {report.trial_id}"
        return
    trial.report = report


def load_status(trial: Trial) -> None:
    """Attach state and cause from status.json when readable."""
    if trial.dir_missing:
        return
    try:
        with open(os.path.join(trial.trial_dir, layout.STATUS), encoding="utf-8") as handle:
            text = handle.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return
    except (OSError, ValueError):
        trial.cause = "unreadable status.json"
        return
    try:
        status = TrialStatus.model_validate_json(text)
    except (ValueError, ValidationError):
        trial.cause = "unreadable status.json"
        return
    trial.state = status.state
    trial.cause = status.cause
    trial.downtime_s = status.downtime_s


def _listing(directory: Path) -> dict[str, bool]:
    """Names in `directory` → is a directory (following symlinks); empty when it cannot be listed."""
    try:
        with os.scandir(directory) as entries:
            out = {}
            for entry in entries:
                try:
                    out[entry.name] = entry.is_dir()
                except OSError:
                    out[entry.name] = False
            return out
    except OSError:
        return {}


def load_result(trial: Trial) -> None:
    """Attach the agent's result.json when readable (stop reason and counters for the budget table)."""
    if trial.dir_missing:
        return
    try:
        trial.result = AgentResult.model_validate_json(
            (trial.trial_dir / "result.json").read_text(encoding="utf-8")
        )
    except (OSError, ValueError, ValidationError):
        trial.result = None


def attach_costs(sweep: Sweep) -> None:
    """Per-trial totals from costs/*.csv: cost (known only if every row is), tokens, GPU-hours."""
    by_id = {t.trial_id: t for t in sweep.trials}
    for output_dir in sweep.dirs:
        costs_dir = layout.costs_dir(output_dir)
        if not costs_dir.is_dir():
            continue
        rows, bad = read_cost_rows(costs_dir)
        sweep.problems.extend(f"{costs_dir / name}: unreadable cost CSV" for name in bad)
        totals: dict[str, dict[str, Any]] = {}
        for row in rows:
            total = totals.setdefault(row["trial_id"], {"cost": 0.0, "known": True, "tokens": 0, "gpu": 0.0})
            cost = row.get("cost_usd", "")
            if cost in ("", None):
                total["known"] = False
            else:
                total["cost"] += float(cost)
            for column in ("prompt_tokens", "completion_tokens"):
                if row.get(column):
                    total["tokens"] += int(float(row[column]))
            if row.get("gpu_hours"):
                total["gpu"] += float(row["gpu_hours"])
        for trial_id, total in totals.items():
            trial = by_id.get(trial_id)
            if trial is None or trial.output_dir != output_dir:
                continue
            trial.has_costs = True
            trial.cost_known = bool(total["known"])
            trial.cost_usd = total["cost"] if total["known"] else None
            trial.tokens = int(total["tokens"])
            trial.gpu_hours = float(total["gpu"])


def collect(dirs: Iterable[Path]) -> Sweep:
    """Read every input dir into one Sweep; nothing here raises for a bad file.

    Each `runs/<configuration>/` is listed once, so a trial costs file reads, not extra stat calls.
    """
    sweep = Sweep(dirs=list(dirs))
    seen: set[str] = set()
    expected_paths: set[str] = set()
    listings: dict[Path, dict[str, bool]] = {}

    def listing(directory: Path) -> dict[str, bool]:
        if directory not in listings:
            listings[directory] = _listing(directory)
        return listings[directory]

    for output_dir in sweep.dirs:
        cfg_dirs: dict[str, Path] = {}
        for trial_id, trial_dir in _expected_from_launch(output_dir, sweep):
            key = layout.parse_trial_id(trial_id)
            if key is None:
                sweep.problems.append(f"{output_dir}: malformed trial id {trial_id!r}")
                continue
            if trial_id in seen:
                sweep.duplicates.append(trial_id)
                continue
            seen.add(trial_id)
            canonical_dir = layout.trial_dir(output_dir, key.configuration, key.task, key.seed)
            cfg_dir = cfg_dirs.get(key.configuration)
            if cfg_dir is None:
                cfg_dir = cfg_dirs[key.configuration] = canonical_dir.parent
            names = listing(cfg_dir)
            canonical = str(canonical_dir)
            # A recorded dir that is not a directory falls back to the canonical one (no stat when equal).
            if trial_dir is None or (str(trial_dir) != canonical and not trial_dir.is_dir()):
                trial_dir = canonical_dir
            trial = Trial(
                trial_id=trial_id,
                regime=key.regime,
                configuration=key.configuration,
                task=key.task,
                seed=key.seed,
                output_dir=output_dir,
                trial_dir=trial_dir,
                report_path=layout.report_beside(canonical_dir),
                dir_missing=str(trial_dir) == canonical and not names.get(canonical_dir.name),
            )
            report_path = trial.report_path
            load_report(trial, listed=report_path.name in names, path=str(report_path))
            load_status(trial)
            load_result(trial)
            sweep.trials.append(trial)
            expected_paths.add(str(report_path))
    for output_dir in sweep.dirs:
        runs = output_dir / layout.RUNS
        # what layout.report_paths globs, from the listings already made
        for cfg, is_dir in sorted(listing(runs).items()):
            if not is_dir or cfg.startswith("."):
                continue
            for name in sorted(listing(runs / cfg)):
                if name.endswith(layout.REPORT_SUFFIX) and not name.startswith("."):
                    report = os.path.join(runs, cfg, name)
                    if report not in expected_paths:
                        sweep.unexpected.append(report)
    attach_costs(sweep)
    return sweep


def trial_events(trial: Trial) -> TrialEvents:
    """The trial's events.jsonl (tolerant), read on first use."""
    if trial.events_cache is None:
        missing = TrialEvents(missing=True)
        trial.events_cache = missing if trial.dir_missing else read_events(trial.trial_dir / "events.jsonl")
    return trial.events_cache


def trial_journal(trial: Trial) -> Any:
    """The trial's journal (journal.json + journal.jsonl) as parsed JSON, or None when absent or corrupt.

    Read on first use.
    """
    if trial.journal_cache is None:
        try:
            if trial.dir_missing:
                raise FileNotFoundError(trial.trial_dir)
            data = load_journal_data(trial.trial_dir / "journal.json")
        except (OSError, ValueError):
            data = None
        trial.journal_cache = (data,)
    return trial.journal_cache[0]


def journal_curve(trial: Trial) -> tuple[list[tuple[float, float]], bool | None]:
    """(hours since the first node, metric) of good executed nodes in the journal, and direction.

    Tolerant: an absent or corrupt journal gives an empty curve. Times come from the node's budget
    clock (`budget_time_s`), else from `ctime` (older journals); without times the node's step
    stands in for hours.
    """
    data = trial_journal(trial)
    try:
        nodes = data["nodes"]
    except (KeyError, TypeError):
        return [], None
    points: list[tuple[float, float]] = []
    ctimes = [float(n.get("ctime") or 0.0) for n in nodes if isinstance(n, dict)]
    origin = min((c for c in ctimes if c > 0), default=0.0)
    for index, node in enumerate(nodes):
        if not isinstance(node, dict) or node.get("is_buggy") or not node.get("executed", True):
            continue
        metric = node.get("metric")
        if isinstance(metric, dict):
            metric = metric.get("value")
        if not isinstance(metric, int | float) or isinstance(metric, bool) or metric != metric:
            continue
        budget = node.get("budget_time_s")
        ctime = float(node.get("ctime") or 0.0)
        if isinstance(budget, int | float) and not isinstance(budget, bool):
            # The trial's budget clock: carried over resumes, so a requeue gap is not counted.
            hours = float(budget) / 3600.0
        elif origin > 0 and ctime > 0:
            hours = (ctime - origin) / 3600.0
        else:
            hours = float(node.get("step", index))
        points.append((hours, float(metric)))
    lower = data.get("lower_is_better") if isinstance(data, dict) else None
    return sorted(points), lower if isinstance(lower, bool) else None
