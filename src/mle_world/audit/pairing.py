"""Whether the trials the audit pairs ran the same experiment but for what the pair compares.

Reads one spec.json per output dir and configuration (the first listed trial that has one); writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mle_world import layout
from mle_world.audit.collect import Trial
from mle_world.identity import science_of
from mle_world.records import TrialSpec
from mle_world.storage import Unreadable, load_record

SHOWN = 4
"""Differing fields named per problem line; the rest are counted."""
TRIES = 3
"""Trials of one dir and configuration whose spec.json is looked for before giving up on it."""


def differing(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the fields whose values differ between two JSON-like values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            out += differing(a.get(key), b.get(key), f"{prefix}{key}.")
        return out
    return [] if a == b else [prefix.rstrip(".") or "(value)"]


def _named(fields: list[str]) -> str:
    shown = ", ".join(fields[:SHOWN])
    return shown + (f" and {len(fields) - SHOWN} more" if len(fields) > SHOWN else "")


def _science(trial: Trial) -> dict[str, Any] | None:
    spec = load_record(trial.file(layout.SPEC), TrialSpec)
    return None if isinstance(spec, Unreadable) else science_of(spec.agent)


def science_problems(trials: Iterable[Trial], baseline: str = "aide") -> list[str]:
    """Problem lines for paired trials whose settings differ in more than what their pair compares.

    Gated − ungated pairs one configuration's trials of two dirs: its agent settings must be the same
    in both (a threshold, budget or `-i` changed between the two launches would be read as the
    gate's effect). A configuration − `baseline` pair compares the world model: the rest of the
    settings (budget, search, stages, endpoints' models and sampling) must be the baseline's.
    """
    # Keyed by each dir as a string, made once per run of trials of one dir: a Path hashed (twice or
    # three times a trial, in Python) was 0.05 s of CPU at 100,000 trials. A dir's string is its name
    # in the lines below as it was as a Path.
    found: dict[tuple[str, str], dict[str, Any]] = {}
    misses: dict[tuple[str, str], int] = {}
    done: set[tuple[str, str]] = set()
    last: Path | None = None
    directory = ""
    for trial in trials:
        if trial.output_dir is not last:
            last = trial.output_dir
            directory = str(last)
        key = (directory, trial.configuration)
        if key in done or not trial.may_have(layout.SPEC):
            continue
        science = _science(trial)
        if science is not None:
            found[key] = science
            done.add(key)
        else:  # a dir without spec.json files (not launched yet, or synthetic): a few reads, not one per trial
            misses[key] = misses.get(key, 0) + 1
            if misses[key] >= TRIES:
                done.add(key)
    problems = []
    first: dict[str, tuple[str, dict[str, Any]]] = {}
    for (directory, configuration), science in found.items():
        if configuration not in first:
            first[configuration] = (directory, science)
            continue
        where, theirs = first[configuration]
        fields = differing(theirs, science)
        if fields:
            problems.append(
                f"{directory}: configuration {configuration} ran other settings than in {where} "
                f"({_named(fields)}): its paired gated − ungated deltas compare different experiments"
            )
    for (directory, configuration), science in found.items():
        base = found.get((directory, baseline))
        if configuration == baseline or base is None:
            continue
        fields = differing({**base, "world_model": None}, {**science, "world_model": None})
        if fields:
            problems.append(
                f"{directory}: configuration {configuration} differs from {baseline} in more than its world "
                f"model ({_named(fields)}): its delta against {baseline} is not the world model's alone"
            )
    return problems
