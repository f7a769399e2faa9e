"""Grading: MLE-bench's report, medal rules, the built-in and MLE-bench graders, and trial grading.

The names below are the API of competitions' `grade.py` files (`from mle_world.grading import ...`).
"""

from mle_world.grading.submission import InvalidSubmissionError as InvalidSubmissionError
from mle_world.grading.submission import prepare_for_metric as prepare_for_metric
