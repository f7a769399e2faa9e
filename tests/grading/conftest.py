"""Fixtures for grading tests: prepared local competitions and custom competitions.

Reads the package's local competitions; writes only under pytest's tmp paths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from gradekit import write_custom_competition

from mle_world.tasks.local import list_local_competitions, prepare_local


@pytest.fixture(scope="session")
def local_comps() -> dict[str, Path]:
    return list_local_competitions()


@pytest.fixture(scope="session")
def prepared_data(tmp_path_factory: pytest.TempPathFactory, local_comps: dict[str, Path]) -> Path:
    """iris-species and diabetes-progression prepared with seed 0."""
    data = tmp_path_factory.mktemp("data")
    for comp_id in ("iris-species", "diabetes-progression"):
        prepare_local(comp_id, local_comps[comp_id], data, seed=0)
    return data


@pytest.fixture
def custom_competition(tmp_path: Path) -> Callable[[str, Sequence[float]], tuple[dict[str, Path], Path]]:
    """Factory: (id, leaderboard scores) → (competitions mapping, prepared data dir)."""
    comps_root = tmp_path / "comps"
    data = tmp_path / "data"

    def make(comp_id: str, scores: Sequence[float]) -> tuple[dict[str, Path], Path]:
        folder = write_custom_competition(comps_root, comp_id, scores)
        prepare_local(comp_id, folder, data)
        return {comp_id: folder}, data

    return make
