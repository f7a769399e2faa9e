"""Grade diabetes-progression: root mean squared error of `progression` (lower is better).

Reads the submission and answer frames it is given; writes nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mle_world.grading import InvalidSubmissionError, prepare_for_metric


def grade(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """RMSE between predicted and true disease progression one year after baseline."""
    sub, ans = prepare_for_metric(submission, answers, "id", ["progression"])
    try:
        pred = sub["progression"].astype(float).to_numpy()
    except (TypeError, ValueError) as exc:
        raise InvalidSubmissionError(f"`progression` must be numeric ({exc})") from exc
    if not np.isfinite(pred).all():
        raise InvalidSubmissionError("`progression` must be finite")
    true = ans["progression"].astype(float).to_numpy()
    return float(np.sqrt(np.mean((pred - true) ** 2)))
