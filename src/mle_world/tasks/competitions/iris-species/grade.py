"""Grade iris-species: accuracy of predicted `species` labels (higher is better).

Reads the submission and answer frames it is given; writes nothing.
"""

from __future__ import annotations

import pandas as pd

from mle_world.grading import InvalidSubmissionError, prepare_for_metric


def grade(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Fraction of test rows whose predicted species equals the true one."""
    sub, ans = prepare_for_metric(submission, answers, "id", ["species"])
    labels = set(ans["species"].astype(str))
    unknown = set(sub["species"].astype(str)) - labels
    if unknown:
        raise InvalidSubmissionError(f"unknown species label(s): {sorted(unknown)[:5]}")
    return float((sub["species"].astype(str) == ans["species"].astype(str)).mean())
