"""Which trials an output dir expects and where `layout` puts their files, for the audit: launch.json (or
the files on disk), the canonical trial dirs and reports as strings, and directory listings.

Reads `launch.json`, `runs/*/*/spec.json` and grading reports (for the fallback) and lists directories;
writes nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict  # pydantic validates typing's TypedDict from Python 3.12 only

from mle_world import layout
from mle_world.audit.launches import history_of
from mle_world.identity import mixed_provenance, unreadable_launch
from mle_world.records import LaunchProvenance, LaunchRecord
from mle_world.storage import Unreadable, load_record, read_text


@with_config(ConfigDict(extra="forbid"))
class ListedTrial(TypedDict):
    """`LaunchedTrial`'s fields as a plain dict (tests/audit check they stay the same)."""

    trial_id: str
    science_hash: str
    trial_dir: str
    command: str


class LaunchListing(LaunchRecord):
    """launch.json as the audit reads it: `LaunchRecord`, validated the same, its trials plain dicts. A
    pydantic model a trial was 0.07 s of CPU and 30 MB of page faults a launch of 50,000 trials (half its
    read); the audit keeps two of their fields."""

    trials: tuple[ListedTrial, ...]  # type: ignore[assignment]


def expected_from_launch(
    output_dir: Path,
    problems: list[str],
    provenances: dict[Path, LaunchProvenance] | None = None,
    histories: dict[Path, tuple[LaunchProvenance, ...]] | None = None,
) -> list[tuple[str, str | Path | None]]:
    """(trial id, trial dir) of every trial launch.json lists: the dir as recorded (a string, relative to
    `output_dir` unless absolute); from the files on disk (a Path or None) when launch.json is unusable.

    A launch.json whose launches ran different code, served models, image or data (`--allow-provenance-change`)
    adds a problem per difference; `provenances` gets the dir's latest launch's provenance, `histories`
    every launch's, oldest first."""
    path = output_dir / layout.LAUNCH
    if path.is_file():
        record: LaunchRecord | Unreadable = load_record(path, LaunchListing)
        if isinstance(record, Unreadable):
            record = load_record(path, LaunchRecord)  # the authority: its error words what is wrong
        if isinstance(record, Unreadable):
            why = (
                type(record.error).__name__
                if isinstance(record.error, OSError)
                else unreadable_launch(record)
            )
            problems.append(f"{path}: unreadable launch.json ({why}); using files on disk")
        else:
            for change in mixed_provenance(record):
                problems.append(f"{path}: trials from launches with different provenance: {change}")
            if provenances is not None:
                provenances[output_dir] = record.provenance()
            if histories is not None:
                histories[output_dir] = history_of(record)
            if isinstance(record, LaunchListing):
                return [(trial["trial_id"], trial["trial_dir"]) for trial in record.trials]
            return [(trial.trial_id, trial.trial_dir) for trial in record.trials]
    else:
        problems.append(f"{path}: missing; expected trials taken from the files on disk")
    return list(expected_from_disk(output_dir))


def expected_from_disk(output_dir: Path) -> list[tuple[str, Path | None]]:
    """Fallback: trials with a spec.json or a report; the regime comes from spec.json when present."""
    found: dict[str, Path | None] = {}
    for spec in layout.spec_paths(output_dir):
        try:
            data = json.loads(read_text(spec))  # only its trial id: a spec of another version counts
            found[str(data["trial_id"])] = spec.parent
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for report in layout.report_paths(output_dir):
        try:
            data = json.loads(read_text(report))
            found.setdefault(str(data["trial_id"]), None)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return list(found.items())


def listing(directory: Path) -> dict[str, bool]:
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


def names_in(directory: str) -> frozenset[str] | None:
    """The names in `directory`, or None when it cannot be listed."""
    try:
        return frozenset(os.listdir(directory))
    except OSError:
        return None


def name_list(names: frozenset[str] | None) -> list[str] | None:
    return None if names is None else sorted(names)


def name_set(data: object) -> frozenset[str]:
    if type(data) is not list:
        raise TypeError("not a listing")
    "".join(data)  # raises TypeError unless every name is a str (a C loop, not a generator's)
    return frozenset(data)


@dataclass
class Canonical:
    """Where `layout` puts the trial dirs and reports of one output dir's configuration, as strings."""

    output_dir: Path
    configuration: str
    names: dict[str, bool]
    """The listing of the configuration's dir."""
    parent: str | None = None
    """`runs/<configuration>` when `layout`'s names are `<task>_seed<seed>` beside it (checked once)."""

    def dir_and_report(self, task: str, seed: int) -> tuple[str, str, str]:
        """(trial dir, its name, report path) as `layout.trial_dir` and `layout.report_beside` give them."""
        if self.parent is not None:
            name = f"{task}_seed{seed}"
            directory = f"{self.parent}/{name}"
            return directory, name, f"{directory}{layout.REPORT_SUFFIX}"
        canonical = layout.trial_dir(self.output_dir, self.configuration, task, seed)
        directory, report = str(canonical), str(layout.report_beside(canonical))
        parent = str(canonical.parent)
        if directory == f"{parent}/{task}_seed{seed}" and report == f"{directory}{layout.REPORT_SUFFIX}":
            self.parent = parent  # string building gives the same paths from now on
        return directory, canonical.name, report
