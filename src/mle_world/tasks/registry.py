"""The competition registry: MLE-bench's ids plus local competition folders, in one id space.

Reads the shipped MLE-bench split lists and, through `tasks.local`, the package's competitions/ and any
`--competitions-dir` folders; writes nothing.
"""

from __future__ import annotations

import csv
import importlib.util
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from mle_world.tasks.local import check_no_mlebench_clash, list_local_competitions


def _split(name: str) -> tuple[str, ...]:
    text = resources.files("mle_world.tasks").joinpath("data", name).read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


@dataclass(frozen=True)
class TaskRegistry:
    """Every selectable competition id: MLE-bench's (75 + 7 dev) and local folders."""

    mlebench: tuple[str, ...]
    lite: tuple[str, ...]
    local: dict[str, Path] = field(default_factory=dict)

    def __contains__(self, task: object) -> bool:
        return task in self.local or task in self.mlebench

    def is_local(self, task: str) -> bool:
        return task in self.local

    def all_ids(self) -> list[str]:
        return sorted(set(self.mlebench) | set(self.local))

    def lower_is_better(self, task: str) -> bool | None:
        """The metric direction grading uses, when known: MLE-bench's rule on the leaderboard (the first,
        best score below the last) of a local folder or of an installed `mlebench`; else None."""
        if task in self.local:
            return leaderboard_direction(self.local[task] / "leaderboard.csv")
        spec = importlib.util.find_spec("mlebench") if task in self.mlebench else None
        if spec is None or not spec.submodule_search_locations:
            return None
        for root in spec.submodule_search_locations:
            direction = leaderboard_direction(Path(root) / "competitions" / task / "leaderboard.csv")
            if direction is not None:
                return direction
        return None


def leaderboard_direction(path: Path) -> bool | None:
    """True when lower is better by MLE-bench's rule; None for a missing, LFS-pointer or empty file.

    A row without a score counts as NaN, as pandas reads it for grading (`first < NaN` is false: higher
    is better), not skipped: the direction the agent is told must be the one its medals are ranked by."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        scores = [float(row["score"]) if row["score"] not in (None, "") else math.nan for row in rows]
    except (OSError, KeyError, ValueError):
        return None
    return scores[0] < scores[-1] if scores else None


def load_registry(extra_dirs: list[Path] | None = None) -> TaskRegistry:
    """Build the registry; local ids may not shadow MLE-bench ids."""
    mlebench = _split("mlebench_split75.txt") + _split("mlebench_dev.txt")
    local = list_local_competitions(extra_dirs or [])
    check_no_mlebench_clash(local, mlebench)
    return TaskRegistry(mlebench=mlebench, lite=_split("mlebench_lite.txt"), local=local)
