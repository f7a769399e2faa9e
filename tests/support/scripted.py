"""Scripted endpoints for the end-to-end sweep: a coder whose scripts really solve the local tasks.

Reads nothing; the responders build replies for tests/support/fakeserver.py from the request text.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from fakeserver import Reply, prompt_text

# A self-contained solution for any local competition: 1-nearest-neighbour (improve) or a constant
# baseline (draft) on the numeric columns, a hold-out metric printed for the feedback model, and
# ./submission/submission.csv in the sample submission's format. Pure Python, so it starts fast.
SOLUTION = r"""
import csv, math, os, sys, time
DEBUG = "--debug" in sys.argv
KNN = {knn}
time.sleep({sleep_s} if not DEBUG else 0)
train = list(csv.DictReader(open("input/train.csv")))
test = list(csv.DictReader(open("input/test.csv")))
sample = list(csv.DictReader(open("input/sample_submission.csv")))
id_col, target = list(sample[0].keys())[:2]
features = [c for c in test[0] if c != id_col]
try:
    float(train[0][target])
    regression = True
except ValueError:
    regression = False
if DEBUG:
    train = train[:40]
cut = int(len(train) * 0.8)
fit, hold = train[:cut], train[cut:]

def vec(row):
    return [float(row[c]) for c in features]

def predict(rows, pool):
    if not KNN:
        if regression:
            mean = sum(float(r[target]) for r in pool) / len(pool)
            return [mean for _ in rows]
        labels = [r[target] for r in pool]
        return [max(set(labels), key=labels.count) for _ in rows]
    out = []
    for row in rows:
        v = vec(row)
        best = min(pool, key=lambda p: sum((a - b) ** 2 for a, b in zip(vec(p), v)))
        out.append(float(best[target]) if regression else best[target])
    return out

guess = predict(hold, fit)
if regression:
    rmse = math.sqrt(sum((g - float(r[target])) ** 2 for g, r in zip(guess, hold)) / len(hold))
    print("epoch 1/1 done")
    print(f"Validation metric (RMSE, lower is better): {{rmse:.4f}}")
else:
    acc = sum(g == r[target] for g, r in zip(guess, hold)) / len(hold)
    print("epoch 1/1 done")
    print(f"Validation metric (accuracy, higher is better): {{acc:.4f}}")
os.makedirs("submission", exist_ok=True)
with open("submission/submission.csv", "w", newline="") as handle:
    writer = csv.writer(handle)
    writer.writerow([id_col, target])
    for row, value in zip(test, predict(test, train)):
        writer.writerow([row[id_col], value])
"""


def solution(knn: bool, sleep_s: float = 0.0) -> str:
    return SOLUTION.format(knn=knn, sleep_s=sleep_s)


def coder(sleep_s: float = 0.0):  # type: ignore[no-untyped-def]
    """Drafts get the constant baseline; improvements and debugs get 1-NN."""

    def respond(request: dict[str, Any]) -> Reply:
        text = prompt_text(request)
        improve = "previously developed solution" in text or "had a bug" in text
        plan = (
            "Use 1-nearest-neighbour on the numeric features." if improve else "Predict a constant baseline."
        )
        return Reply(content=f"{plan}\n\n```python\n{solution(improve, sleep_s)}\n```\n", usage=(210, 130))

    return respond


def review(request: dict[str, Any]) -> Reply:
    """A sensible feedback model: reads the metric line and its direction from the output."""
    text = prompt_text(request).split("Execution output", 1)[-1]
    match = re.search(r"Validation metric \((\w+), (lower|higher) is better\): ([-+\d.eE]+)", text)
    is_bug = match is None or "Traceback" in text
    answer = {
        "is_bug": is_bug,
        "summary": "The run failed." if is_bug else f"{match.group(1)} {match.group(3)}",  # type: ignore[union-attr]
        "metric": None if is_bug else float(match.group(3)),  # type: ignore[union-attr]
        "lower_is_better": bool(match and match.group(2) == "lower"),
        "has_csv_submission": not is_bug,
    }
    if request.get("tools"):
        return Reply(tool_call=("submit_review", answer), usage=(320, 41))
    return Reply(content=json.dumps(answer), usage=(330, 47))


def world():  # type: ignore[no-untyped-def]
    """Alternates a confident rejection and a confident approval, so the gate has work to do."""
    flips = itertools.cycle([0.2, 0.9])

    def respond(request: dict[str, Any]) -> Reply:
        p = next(flips)
        body = {
            "p_bug": 0.1,
            "p_improves": p,
            "predicted_metric": None,
            "confidence": 0.9,
            "rationale": "scripted",
        }
        return Reply(content=json.dumps(body), usage=(510, 33))

    return respond
