"""Collect a sweep's records for the audit: expected trials, grading reports, statuses, costs, events.

Reads `launch.json`, `runs/<cfg>/<task>_seed<seed>_grading_report.json`, `status.json`, `events.jsonl`,
`journal.json`, the trials' audit digests and `costs/*.csv` of one or more output dirs; writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from mle_world import layout
from mle_world.audit.attempts import superseded_by_rerun
from mle_world.audit.cache import ParsedInputs
from mle_world.audit.digest import COST, DIR, EVENTS, JOURNAL, REPORT, RESULT, STATUS, journal_alone
from mle_world.audit.digest_files import entries_of, read_digest, read_gathered
from mle_world.audit.graders import graders_problems
from mle_world.audit.journals import decode as decode_journal
from mle_world.audit.journals import encode as encode_journal
from mle_world.audit.journals import read_summary, summary_of_bytes
from mle_world.audit.listing import Canonical, expected_from_launch, name_list, name_set, names_in
from mle_world.audit.listing import listing as listing_of
from mle_world.audit.predictions import PredictionLines, predictions_of, read_predictions
from mle_world.audit.predictions import decode as decode_events
from mle_world.audit.predictions import encode as encode_events
from mle_world.audit.sweep_costs import attach_costs, take_total
from mle_world.audit.trial_records import Trial as Trial  # where the audit's modules have always found it
from mle_world.audit.trial_records import load_report, load_result, load_status
from mle_world.identity import provenance_changes
from mle_world.records import LaunchProvenance
from mle_world.trial_events import TrialEvents, read_events

_NONE: dict[str, Any] = {}
"""A trial without a digest's entries (never written to)."""


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
    provenance: dict[Path, LaunchProvenance] = field(default_factory=dict)
    """Each dir's latest launch: code, served models, image (from a readable launch.json)."""
    launch_history: dict[Path, tuple[LaunchProvenance, ...]] = field(default_factory=dict)
    """Each dir's launches, oldest first (launch.json's earlier launches and its own)."""
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """What the tables derive from the trials alike, made once (`comparisons.view`)."""

    # Made once (the trials are settled when load_sweep returns): 20 passes were 0.54 s at 100,000.
    @cached_property
    def found(self) -> list[Trial]:
        """Trials with a valid report."""
        return [t for t in self.trials if t.report is not None]

    @cached_property
    def missing(self) -> list[Trial]:
        """Trials without a report."""
        return [t for t in self.trials if t.problem == "missing" and not t.settled_without_report]

    @cached_property
    def superseded(self) -> list[Trial]:
        """Trials whose report is of an earlier attempt (a rerun is in flight or ended without one)."""
        return [t for t in self.trials if t.superseded is not None]

    @cached_property
    def invalid(self) -> list[Trial]:
        """Trials whose report is corrupt or inconsistent."""
        return [t for t in self.trials if t.problem is not None and t.problem != "missing"]

    @cached_property
    def failed(self) -> list[Trial]:
        """Trials whose status.json says failed."""
        return [t for t in self.trials if t.state == "failed"]


def load_sweep(dirs: Iterable[Path], parsed: ParsedInputs | None = None) -> Sweep:
    """Read every input dir into one Sweep; nothing here raises for a bad file.

    Each `runs/<configuration>/` is listed once, so a trial costs file reads, not extra stat calls;
    paths are strings (no Path object per trial and file). `parsed`: cost CSVs and events.jsonl files
    an earlier audit parsed, used while unchanged (events are then read here, not on first use).
    """
    sweep = Sweep(dirs=list(dirs))
    seen: set[str] = set()
    expected: dict[str, set[str]] = {}  # each report's dir → the names of the reports expected there
    listings: dict[Path, dict[str, bool]] = {}
    taken: dict[str, dict[str, str]] = {}

    def listing(directory: Path) -> dict[str, bool]:
        if directory not in listings:
            listings[directory] = listing_of(directory)
        return listings[directory]

    provenances = sweep.provenance
    for output_dir in sweep.dirs:
        with ExitStack() as opened:  # the configuration dirs' and costs/' fds, closed with the output dir
            out = str(output_dir)
            costs = str(layout.costs_dir(output_dir))  # as read_cost_totals names its files
            taken_here = taken.setdefault(costs, {})  # the cost CSVs whose totals the trials' digests gave
            costs_fd = _open_dir(costs) if parsed is not None else None
            if costs_fd is not None:
                opened.callback(os.close, costs_fd)
            places: dict[str, Canonical] = {}
            gathered: dict[str, dict[str, bytes]] = {}  # each configuration's gathered digests, read once
            fds: dict[str, int | None] = {}  # each configuration dir's, where its digests' files are stat'ed
            listed = expected_from_launch(output_dir, sweep.problems, provenances, sweep.launch_history)
            for trial_id, recorded in listed:
                key = layout.parse_trial_id(trial_id)
                if key is None:
                    sweep.problems.append(f"{output_dir}: malformed trial id {trial_id!r}")
                    continue
                if trial_id in seen:
                    sweep.duplicates.append(trial_id)
                    continue
                seen.add(trial_id)
                place = places.get(key.configuration)
                if place is None:
                    cfg_dir = layout.trial_dir(output_dir, key.configuration, key.task, key.seed).parent
                    place = places[key.configuration] = Canonical(
                        output_dir, key.configuration, listing(cfg_dir)
                    )
                names = place.names
                canonical, name, report = place.dir_and_report(key.task, key.seed)
                # A recorded dir that is not a directory falls back to the canonical one (no stat when equal).
                absent = None
                if recorded is None:
                    directory = canonical
                elif isinstance(recorded, str) and f"{out}/{recorded}" == canonical:
                    directory = canonical  # what launch.json records for the canonical layout
                else:
                    path = recorded if isinstance(recorded, Path) else output_dir / recorded
                    directory = str(path)
                    if directory != canonical and not path.is_dir():
                        absent, directory = directory, canonical
                trial = Trial(
                    trial_id=trial_id,
                    regime=key.regime,
                    configuration=key.configuration,
                    task=key.task,
                    seed=key.seed,
                    output_dir=output_dir,
                    dir_text=directory,
                    report_text=report,
                    dir_missing=directory == canonical and not names.get(name),
                    recorded_absent=absent,
                )
                offered, at = _NONE, None
                if parsed is not None and directory == canonical and place.parent is not None:
                    held = gathered.get(key.configuration)
                    if held is None:
                        held = gathered[key.configuration] = (
                            read_gathered(parsed, f"{place.parent}/{layout.GATHERED_DIGESTS}")
                            if layout.GATHERED_DIGESTS in names
                            else {}
                        )
                        fds[key.configuration] = at = _open_dir(place.parent)
                        if at is not None:
                            opened.callback(os.close, at)
                    digest = f"{name}{layout.AUDIT_DIGEST_SUFFIX}"
                    line = held.pop(name, None)  # freed once used
                    if line is not None or digest in names:
                        cost_name = layout.cost_name(key.configuration, key.task, key.seed)
                        cost_csv = f"{costs}/{cost_name}"
                        entries = None if line is None else entries_of(line, cost_name)
                        source = f"{place.parent}/{layout.GATHERED_DIGESTS}"
                        if entries is None and digest in names:
                            source = f"{place.parent}/{digest}"
                            entries = read_digest(parsed, source, cost_name)
                        offered = entries or _NONE
                        at = fds[key.configuration] if entries else None
                        if entries:
                            parsed.current = []  # the kinds of entry used, `get` and `take_total` add them
                        cost = offered.get(COST)
                        if cost is not None:
                            if take_total(trial, parsed, cost_csv, cost, costs_fd, cost_name):
                                taken_here[cost_name] = trial_id
                            else:
                                parsed.offer(COST, cost_csv, cost)  # for costs/' reading (`read_cost_totals`)
                if directory == canonical and names.get(name):
                    if parsed is None:
                        trial.files = names_in(directory)
                    else:
                        trial.files = parsed.get(
                            "dir", directory, names_in, name_list, name_set, None, offered.get(DIR), at, name
                        )
                report_dir, _, report_name = report.rpartition("/")
                load_report(trial, report_name in names, report, parsed, offered.get(REPORT), at)
                load_status(trial, parsed, offered.get(STATUS), at)
                if trial.report is not None and trial.state is not None:
                    trial.superseded = superseded_by_rerun(
                        trial.report.attempt, trial.state, trial.attempt, trial.cause
                    )
                    if trial.superseded is not None:
                        trial.report, trial.problem = None, "missing"
                load_result(trial, parsed, offered.get(RESULT), at)
                if parsed is not None and trial.files is not None and journal_alone([None, trial.files]):
                    # Its summary is all the tables need: from the digest, or kept by an earlier audit.
                    trial.journal_cache = parsed.get(
                        "journal", trial.file(layout.JOURNAL), read_summary, encode_journal, decode_journal,
                        summary_of_bytes, offered.get(JOURNAL), at, f"{name}/{layout.JOURNAL}",
                    )  # fmt: skip
                if parsed is not None and EVENTS in offered and trial.may_have(layout.EVENTS):
                    trial.predictions_cache = parsed.get(
                        "events", trial.file(layout.EVENTS), read_predictions, encode_events, decode_events,
                        predictions_of, offered[EVENTS], at, f"{name}/{layout.EVENTS}",
                    )  # fmt: skip
                if parsed is not None and parsed.current is not None:
                    if parsed.current:  # what the memo checks again (`digest_lines.used_entries_stand`)
                        parsed.lines.setdefault(source, []).append([name, parsed.current])
                    parsed.current = None
                sweep.trials.append(trial)
                in_dir = expected.get(report_dir)
                if in_dir is None:
                    in_dir = expected[report_dir] = set()
                in_dir.add(report_name)
    for output_dir in sweep.dirs:
        runs = output_dir / layout.RUNS
        # what layout.report_paths globs, from the listings already made
        for cfg, is_dir in sorted(listing(runs).items()):
            if not is_dir or cfg.startswith("."):
                continue
            prefix = os.path.join(runs, cfg, "")  # the reports' paths as os.path.join(runs, cfg, name)
            # Names, not paths, looked up: the listing's names carry their hash (100,000 paths built and
            # hashed were 0.1 s of CPU), and only what is unexpected is sorted.
            known = expected.get(prefix[:-1], set())
            suffix = layout.REPORT_SUFFIX
            found = [n for n in listing(runs / cfg) if n.endswith(suffix) and n not in known]
            sweep.unexpected += (prefix + name for name in sorted(found) if not name.startswith("."))
    sweep.problems += attach_costs(sweep.trials, sweep.dirs, parsed, taken)
    if parsed is not None:
        for trial in sweep.trials:
            if trial.predictions_cache is None and trial.may_have(layout.EVENTS):
                events = trial.file(layout.EVENTS)
                trial.predictions_cache = parsed.get(
                    "events", events, read_predictions, encode_events, decode_events, predictions_of
                )
    sweep.problems += graders_problems(sweep.trials, provenances)
    # Dirs audited together (a gated and an ungated sweep) compare like one table: their code, served
    # models and image must agree, or the gap between regimes is not the gate's alone.
    if len(provenances) > 1:
        (first_dir, first), *others = provenances.items()
        for other_dir, other in others:
            for change in provenance_changes(first, other):
                sweep.problems.append(f"{other_dir}: launched with other settings than {first_dir}: {change}")
    return sweep


def _open_dir(path: str) -> int | None:
    """An fd of the directory `path`, for the caller to close: the digests' files in it are stat'ed from
    there (`os.stat(name, dir_fd=fd)`), not through every component of their paths again; None when it
    cannot be opened (their whole paths are stat'ed)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None


def trial_events(trial: Trial) -> TrialEvents:
    """The trial's events.jsonl (tolerant), read at each call: a real trial's hundreds of lines, held for every
    trial of a sweep, would grow the audit's memory with the sweep (the tables keep `trial_predictions`)."""
    if not trial.may_have(layout.EVENTS):
        return TrialEvents(missing=True)
    return read_events(Path(trial.file(layout.EVENTS)))


def trial_predictions(trial: Trial) -> PredictionLines:
    """The trial's valid prediction events and bad event lines (what the tables use), read on first use."""
    if trial.predictions_cache is None:
        missing = trial.dir_missing
        trial.predictions_cache = (
            PredictionLines() if missing else read_predictions(trial.file(layout.EVENTS))
        )
    return trial.predictions_cache
