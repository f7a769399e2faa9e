"""Prepare the iris-species local competition from scikit-learn's bundled iris data.

Reads nothing from the network; writes raw/iris.csv, then public/ (train, test, sample submission)
and private/test.csv (answers).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split

TARGET = "species"
TEST_SIZE = 0.3


def fetch_raw(raw: Path, seed: int = 0) -> None:
    """Write the full dataset and the split seed into `raw` (the offline stand-in for a download)."""
    data = load_iris(as_frame=True)
    frame = data.frame.rename(
        columns={
            "sepal length (cm)": "sepal_length",
            "sepal width (cm)": "sepal_width",
            "petal length (cm)": "petal_length",
            "petal width (cm)": "petal_width",
        }
    )
    frame[TARGET] = [str(data.target_names[t]) for t in frame.pop("target")]
    frame.to_csv(raw / "iris.csv", index=False)
    (raw / "split.json").write_text(json.dumps({"seed": seed}), encoding="utf-8")


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Split into train/test (stratified, by the seed in raw/split.json) with shuffled ids."""
    seed = int(json.loads((raw / "split.json").read_text(encoding="utf-8"))["seed"])
    frame = pd.read_csv(raw / "iris.csv")
    rng = np.random.default_rng(seed)
    frame.insert(0, "id", rng.permutation(len(frame)) + 1000)
    train, test = train_test_split(frame, test_size=TEST_SIZE, random_state=seed, stratify=frame[TARGET])
    train.sort_values("id").to_csv(public / "train.csv", index=False)
    test = test.sort_values("id")
    test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    test[["id", TARGET]].to_csv(private / "test.csv", index=False)
    sample = test[["id"]].assign(**{TARGET: train[TARGET].mode().iloc[0]})
    sample.to_csv(public / "sample_submission.csv", index=False)
