"""Generate leaderboard.csv of every package competition from real fitted scikit-learn baselines.

Reads the package competitions (prepared with seed 0 into a temp dir); writes
`src/mle_world/tasks/competitions/<id>/leaderboard.csv` (Kaggle export header, best to worst).

Usage: python scripts/make_leaderboards.py [--rows 120] [--only ID]
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from mle_world.grading.medals import is_lower_better
from mle_world.tasks.local import list_local_competitions, load_competition, load_grade_fn, prepare_local

# id -> (target column, task kind, lower is better)
SPECS: dict[str, tuple[str, str, bool]] = {
    "iris-species": ("species", "label", False),
    "breast-cancer-diagnosis": ("malignant", "proba", False),
    "diabetes-progression": ("progression", "regression", True),
}


def classifiers(rng: np.random.Generator) -> Callable[[], Any]:
    """A random classifier of random strength."""
    kind = rng.integers(0, 6)
    seed = int(rng.integers(0, 10_000))
    if kind == 0:
        c = float(10 ** rng.uniform(-4, 2))
        return lambda: make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))
    if kind == 1:
        k = int(rng.integers(1, 60))
        return lambda: make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=k))
    if kind == 2:
        depth = int(rng.integers(1, 8))
        return lambda: DecisionTreeClassifier(max_depth=depth, random_state=seed)
    if kind == 3:
        return GaussianNB
    if kind == 4:
        n, depth = int(rng.integers(2, 60)), int(rng.integers(1, 8))
        return lambda: RandomForestClassifier(n_estimators=n, max_depth=depth, random_state=seed)
    strategy = str(rng.choice(["stratified", "uniform", "prior"]))
    return lambda: DummyClassifier(strategy=strategy, random_state=seed)


def regressors(rng: np.random.Generator) -> Callable[[], Any]:
    """A random regressor of random strength."""
    kind = rng.integers(0, 7)
    seed = int(rng.integers(0, 10_000))
    if kind == 0:
        return LinearRegression
    if kind == 1:
        alpha = float(10 ** rng.uniform(-3, 4))
        return lambda: make_pipeline(StandardScaler(), Ridge(alpha=alpha))
    if kind == 2:
        k = int(rng.integers(1, 80))
        return lambda: make_pipeline(StandardScaler(), KNeighborsRegressor(n_neighbors=k))
    if kind == 3:
        depth = int(rng.integers(1, 10))
        return lambda: DecisionTreeRegressor(max_depth=depth, random_state=seed)
    if kind == 4:
        n, depth = int(rng.integers(5, 100)), int(rng.integers(1, 8))
        return lambda: RandomForestRegressor(n_estimators=n, max_depth=depth, random_state=seed)
    if kind == 5:
        n, lr = int(rng.integers(10, 200)), float(rng.uniform(0.01, 0.3))
        return lambda: GradientBoostingRegressor(
            n_estimators=n, learning_rate=lr, max_depth=2, random_state=seed
        )
    strategy = str(rng.choice(["mean", "median"]))
    return lambda: DummyRegressor(strategy=strategy)


def baseline_scores(comp_id: str, comp_dir: Path, rows: int) -> list[float]:
    """Fit `rows` baselines (model x features x training fraction) and grade each on the test set."""
    target, kind, _ = SPECS[comp_id]
    comp = load_competition(comp_dir)
    grade = load_grade_fn(comp)
    with tempfile.TemporaryDirectory() as tmp:
        prepared = prepare_local(comp_id, comp_dir, Path(tmp), seed=0)
        train = pd.read_csv(prepared / "public" / "train.csv")
        test = pd.read_csv(prepared / "public" / "test.csv")
        answers = pd.read_csv(prepared / "private" / "test.csv")
    features = [c for c in train.columns if c not in ("id", target)]
    rng = np.random.default_rng(sum(map(ord, comp_id)))
    scores: list[float] = []
    while len(scores) < rows:
        make = regressors(rng) if kind == "regression" else classifiers(rng)
        cols = list(rng.choice(features, size=int(rng.integers(1, len(features) + 1)), replace=False))
        frac = float(rng.uniform(0.15, 1.0))
        sub_train = train.sample(frac=frac, random_state=int(rng.integers(0, 10_000)))
        if kind != "regression" and sub_train[target].nunique() < 2:
            continue
        model = make()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(sub_train[cols], sub_train[target])
                if kind == "proba":
                    classes = list(model.classes_)
                    proba = model.predict_proba(test[cols])
                    pred: Any = proba[:, classes.index(1)] if 1 in classes else np.zeros(len(test))
                else:
                    pred = model.predict(test[cols])
        except ValueError:  # e.g. more neighbours than training rows: draw another baseline
            continue
        submission = pd.DataFrame({"id": test["id"], target: pred})
        scores.append(round(float(grade(submission, answers)), 5))
    return scores


def write_leaderboard(path: Path, scores: list[float], lower_is_better: bool) -> None:
    """Kaggle export format, best to worst."""
    ordered = sorted(scores, reverse=not lower_is_better)
    n = len(ordered)
    frame = pd.DataFrame(
        {
            "scoreNullable": ordered,
            "teamId": [1_000_000 + 37 * i for i in range(n)],
            "hasTeamName": [True] * n,
            "submissionDate": [
                f"2025-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{(7 * i) % 60:02d}:00" for i in range(n)
            ],
            "score": ordered,
            "hasScore": [True] * n,
        }
    )
    frame.to_csv(path, index=False)
    if n > 1 and ordered[0] != ordered[-1] and is_lower_better(ordered) != lower_is_better:
        raise SystemExit(f"{path}: direction check failed")


def main() -> None:
    """Regenerate the leaderboards."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=120)
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    for comp_id, comp_dir in sorted(list_local_competitions().items()):
        if comp_id not in SPECS or (args.only and comp_id != args.only):
            continue
        scores = baseline_scores(comp_id, comp_dir, args.rows)
        write_leaderboard(comp_dir / "leaderboard.csv", scores, SPECS[comp_id][2])
        best, worst = (min, max) if SPECS[comp_id][2] else (max, min)
        print(f"{comp_id}: {len(scores)} rows, best {best(scores)}, worst {worst(scores)}")


if __name__ == "__main__":
    main()
