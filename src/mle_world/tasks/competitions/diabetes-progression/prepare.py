"""Prepare the diabetes-progression local competition from scikit-learn's bundled diabetes data.

Reads nothing from the network; writes raw/diabetes.csv, then public/ (train, test, sample
submission) and private/test.csv (answers).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

TARGET = "progression"
TEST_SIZE = 0.3


def fetch_raw(raw: Path, seed: int = 0) -> None:
    """Write the full dataset (unscaled) and the split seed into `raw`."""
    frame = load_diabetes(as_frame=True, scaled=False).frame.rename(columns={"target": TARGET})
    frame.to_csv(raw / "diabetes.csv", index=False)
    (raw / "split.json").write_text(json.dumps({"seed": seed}), encoding="utf-8")


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Split into train/test (by the seed in raw/split.json) with shuffled ids."""
    seed = int(json.loads((raw / "split.json").read_text(encoding="utf-8"))["seed"])
    frame = pd.read_csv(raw / "diabetes.csv")
    rng = np.random.default_rng(seed)
    frame.insert(0, "id", rng.permutation(len(frame)) + 100)
    train, test = train_test_split(frame, test_size=TEST_SIZE, random_state=seed)
    train.sort_values("id").to_csv(public / "train.csv", index=False)
    test = test.sort_values("id")
    test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    test[["id", TARGET]].to_csv(private / "test.csv", index=False)
    mean = round(float(train[TARGET].mean()), 3)
    test[["id"]].assign(**{TARGET: mean}).to_csv(public / "sample_submission.csv", index=False)
