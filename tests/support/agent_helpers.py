"""Helpers for the agent tests: a tiny competition, specs, scripted coder/feedback/world replies.

Reads nothing; writes the competition folder and spec files under the tmp paths given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fakeserver import FakeOpenAIServer, Reply, prompt_text

from mle_world.agent.sandbox.workspace import TrialLayout, set_up_trial_dir
from mle_world.records import (
    AgentSettings,
    BudgetSettings,
    EndpointSettings,
    SearchSettings,
    StageGuidance,
    TrialPaths,
    TrialSpec,
    WorldModelSettings,
)


def make_competition(root: Path) -> tuple[Path, Path]:
    """MLE-bench layout: public/ (description, train, test, sample submission) and private/ answers."""
    public, private = root / "public", root / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    (public / "description.md").write_text("# Tiny task\nPredict `target` for each id. Metric: accuracy.\n")
    (public / "train.csv").write_text(
        "id,x,target\n" + "".join(f"{i},{i * 0.5},{i % 2}\n" for i in range(40))
    )
    (public / "test.csv").write_text("id,x\n" + "".join(f"{i},{i * 0.5}\n" for i in range(40, 50)))
    (public / "sample_submission.csv").write_text("id,target\n" + "".join(f"{i},0\n" for i in range(40, 50)))
    (public / "extra").mkdir()
    (public / "extra" / "notes.txt").write_text("nested data file\n")
    (private / "answers.csv").write_text("id,target\n" + "".join(f"{i},{i % 2}\n" for i in range(40, 50)))
    return public, private


def sandbox_layout(tmp_path: Path) -> TrialLayout:
    """A set-up trial dir whose public data is one small train.csv ("id,y\n1,2\n")."""
    data = tmp_path / "data" / "public"
    data.mkdir(parents=True)
    (data / "train.csv").write_text("id,y\n1,2\n")
    layout = TrialLayout(tmp_path / "trial", data)
    set_up_trial_dir(layout)
    return layout


def good_script(metric: float, *, sleep_s: float = 0.0, tag: str = "") -> str:
    return f"""
import csv, os, sys, time
debug = "--debug" in sys.argv
rows = list(csv.DictReader(open("input/train.csv")))
test = list(csv.DictReader(open("input/test.csv")))
open(os.path.join("working", "ran_{tag or "x"}" + ("_debug" if debug else "_full")), "w").write("1")
if not debug:
    time.sleep({sleep_s})
os.makedirs("submission", exist_ok=True)
with open("submission/submission.csv", "w") as f:
    f.write("id,target\\n")
    for r in test:
        f.write(r["id"] + ",1\\n")
print("trained on", len(rows), "rows", "(debug)" if debug else "")
print("Validation metric: {metric}")
"""


def buggy_script() -> str:
    return """
import csv
rows = list(csv.DictReader(open("input/train.csv")))
raise ValueError("could not convert string to float: 'abc'")
"""


def coder_reply(code: str, plan: str = "A simple plan.") -> Reply:
    return Reply(content=f"{plan}\n\n```python\n{code}\n```\n", usage=(120, 80))


def review_responder(request: dict[str, Any]) -> Reply:
    """Reads the execution output in the review prompt like a sensible feedback model would."""
    text = prompt_text(request)
    output = text.split("Execution output", 1)[-1]
    match = re.search(r"Validation metric: ([-+\d.eE]+)", output)
    is_bug = match is None or "Traceback" in output or "TimeoutError" in output
    answer = {
        "is_bug": is_bug,
        "has_csv_submission": not is_bug,
        "summary": "It crashed." if is_bug else f"Validation metric {match.group(1) if match else '?'}.",
        "metric": None if is_bug or match is None else float(match.group(1)),
        "lower_is_better": False,
    }
    if request.get("tools"):
        return Reply(tool_call=("submit_review", answer), usage=(300, 40))
    return Reply(content=json.dumps(answer), usage=(310, 45))


def world_reply(
    p_improves: float, *, p_bug: float = 0.1, confidence: float = 0.9, metric: float | None = None
) -> Reply:
    body = {
        "p_bug": p_bug,
        "p_improves": p_improves,
        "predicted_metric": metric,
        "confidence": confidence,
        "rationale": "scripted",
    }
    return Reply(content=f"Reasoning...\n```json\n{json.dumps(body)}\n```", usage=(500, 60))


def candidate_index(request: dict[str, Any]) -> int:
    match = re.search(r"This is candidate (\d+) of (\d+)", prompt_text(request))
    return int(match.group(1)) - 1 if match else 0


def stage_of_request(request: dict[str, Any]) -> str:
    text = prompt_text(request)
    if "Your previous solution had a bug" in text:
        return "debug"
    if "previously developed solution" in text:
        return "improve"
    return "draft"


def counter_coder(
    start: float = 0.5, step: float = 0.1, sleep_s: float = 0.0
) -> Callable[[dict[str, Any]], Reply]:
    """Every call returns a good script with a higher metric than the last."""
    counter = iter(range(10_000))

    def respond(request: dict[str, Any]) -> Reply:
        n = next(counter)
        return coder_reply(good_script(round(start + step * n, 4), sleep_s=sleep_s, tag=f"c{n}"))

    return respond


def make_spec(
    tmp_path: Path,
    data_dir: Path,
    servers: dict[str, FakeOpenAIServer],
    *,
    regime: str = "ungated",
    configuration: str = "aide",
    world: WorldModelSettings | None = None,
    budget: BudgetSettings | None = None,
    search: SearchSettings | None = None,
    stages: tuple[StageGuidance, ...] | None = None,
    urls: dict[str, str] | None = None,
    models: dict[str, str] | None = None,
    outage_window_s: float = 2.0,
    key_env: str | None = None,
    seed: int = 34,
) -> TrialSpec:
    trial_dir = tmp_path / "trial"
    trial_dir.mkdir(exist_ok=True)
    endpoints = {
        role: EndpointSettings(
            url=(urls or {}).get(role, server.url),
            model=(models or {}).get(role),
            key_env=key_env,
            timeout_s=20,
            outage_window_s=outage_window_s,
        )
        for role, server in servers.items()
    }
    spec = TrialSpec(
        trial_id=f"{regime}/{configuration}/tiny/seed{seed}",
        science_hash="abc123",
        regime=regime,  # type: ignore[arg-type]
        configuration=configuration,
        task="tiny",
        seed=seed,
        agent=AgentSettings(
            endpoints=endpoints,  # type: ignore[arg-type]
            budget=budget
            or BudgetSettings(
                time_limit_s=120, max_steps=3, exec_timeout_s=20, debug_timeout_s=10, min_step_s=0
            ),
            search=search or SearchSettings(num_drafts=1, debug_prob=1.0, max_debug_depth=3),
            stages=stages
            or (
                StageGuidance(name="mini training", until=0.35, guidance="Work on a subsample."),
                StageGuidance(name="full training", until=0.8, guidance="Train on all data."),
                StageGuidance(
                    name="final ensembling", until=1.0, guidance="Ensemble the best.", ensemble_top_k=2
                ),
            ),
            world_model=world or WorldModelSettings(),
        ),
        paths=TrialPaths(trial_dir=str(trial_dir), data_dir=str(data_dir)),
    )
    (trial_dir / "spec.json").write_text(spec.model_dump_json(indent=2))
    return spec


def read_events(trial_dir: Path) -> list[dict[str, Any]]:
    path = trial_dir / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
