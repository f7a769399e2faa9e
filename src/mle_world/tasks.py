"""The competition registry: MLE-bench's ids plus local competition folders, in one id space.

Reads the shipped MLE-bench split lists, the package's competitions/ folders and any
`--competitions-dir` folders (each subfolder with a config.yaml is a competition); writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from mle_world.errors import UserError


def _split(name: str) -> tuple[str, ...]:
    text = resources.files("mle_world").joinpath("data", name).read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def package_competitions_dir() -> Path:
    """Where the local competitions shipped with the package live."""
    return Path(str(resources.files("mle_world").joinpath("competitions")))


def _competition_id(config_path: Path) -> str:
    try:
        data = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"{config_path}: unreadable competition config: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise UserError(f"{config_path}: competition config needs a string 'id'")
    comp_id: str = data["id"]
    if comp_id != config_path.parent.name:
        raise UserError(f"{config_path}: id '{comp_id}' differs from its folder name")
    return comp_id


def discover_local(dirs: list[Path]) -> dict[str, Path]:
    """Local competition folders by id; an id found twice is an error naming both folders."""
    found: dict[str, Path] = {}
    for root in dirs:
        if not root.is_dir():
            raise UserError(f"--competitions-dir {root}: not a directory")
        for config_path in sorted(root.glob("*/config.yaml")):
            comp_id = _competition_id(config_path)
            if comp_id in found:
                raise UserError(
                    f"competition id '{comp_id}' is defined twice: {found[comp_id]} and {config_path.parent}"
                )
            found[comp_id] = config_path.parent
    return found


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


def load_registry(extra_dirs: list[Path] | None = None) -> TaskRegistry:
    """Build the registry; local ids may not shadow MLE-bench ids."""
    mlebench = _split("mlebench_split75.txt") + _split("mlebench_dev.txt")
    dirs = [package_competitions_dir()] if package_competitions_dir().is_dir() else []
    local = discover_local(dirs + list(extra_dirs or []))
    for comp_id, folder in local.items():
        if comp_id in mlebench:
            raise UserError(f"competition id '{comp_id}' in {folder} clashes with an MLE-bench competition")
    return TaskRegistry(mlebench=mlebench, lite=_split("mlebench_lite.txt"), local=local)
