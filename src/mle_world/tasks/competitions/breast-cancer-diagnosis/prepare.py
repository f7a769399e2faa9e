"""Prepare the breast-cancer-diagnosis local competition from scikit-learn's bundled WDBC data.

Reads nothing from the network; writes raw/wdbc.csv, then public/ (train, test, sample submission)
and private/test.csv (answers).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

TARGET = "malignant"
TEST_SIZE = 0.3


def fetch_raw(raw: Path, seed: int = 0) -> None:
    """Write the full dataset and the split seed into `raw` (the offline stand-in for a download)."""
    data = load_breast_cancer(as_frame=True)
    frame = data.frame.copy()
    frame.columns = [str(c).replace(" ", "_") for c in frame.columns]
    frame[TARGET] = (frame.pop("target") == 0).astype(int)  # sklearn: 0 = malignant
    frame.to_csv(raw / "wdbc.csv", index=False)
    (raw / "split.json").write_text(json.dumps({"seed": seed}), encoding="utf-8")


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Split into train/test (stratified, by the seed in raw/split.json) with shuffled ids."""
    seed = int(json.loads((raw / "split.json").read_text(encoding="utf-8"))["seed"])
    frame = pd.read_csv(raw / "wdbc.csv")
    rng = np.random.default_rng(seed)
    frame.insert(0, "id", rng.permutation(len(frame)) + 10000)
    train, test = train_test_split(frame, test_size=TEST_SIZE, random_state=seed, stratify=frame[TARGET])
    train.sort_values("id").to_csv(public / "train.csv", index=False)
    test = test.sort_values("id")
    test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    test[["id", TARGET]].to_csv(private / "test.csv", index=False)
    test[["id"]].assign(**{TARGET: 0.5}).to_csv(public / "sample_submission.csv", index=False)
