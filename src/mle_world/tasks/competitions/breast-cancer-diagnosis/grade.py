"""Grade breast-cancer-diagnosis: ROC AUC of the predicted probability of `malignant` (higher is better).

Reads the submission and answer frames it is given; writes nothing.
"""

from __future__ import annotations

import pandas as pd
from sklearn.metrics import roc_auc_score

from mle_world.grading import InvalidSubmissionError, prepare_for_metric


def grade(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Area under the ROC curve of the submitted scores against the true labels."""
    sub, ans = prepare_for_metric(submission, answers, "id", ["malignant"])
    try:
        scores = sub["malignant"].astype(float)
    except (TypeError, ValueError) as exc:
        raise InvalidSubmissionError(f"`malignant` must be numeric ({exc})") from exc
    return float(roc_auc_score(ans["malignant"].astype(int), scores))
