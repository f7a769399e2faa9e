"""Ungated sweeps for the what-if gates: spec.json with a configuration's gate settings, and events.jsonl of
consulted steps (predictions of every candidate, the executed one's outcome and execution times).

Reads the packaged paper.yaml (the shipped configurations' settings); writes trial dirs under the output
dirs given (deterministic for a given seed).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from auditkit import TS, tid, trial_dir, write_launch
from gradekit import spec_for

from mle_world.plan.config import load_paper_config, packaged_config
from mle_world.records import WorldModelSettings


@cache
def paper_settings(configuration: str) -> WorldModelSettings:
    """The world-model settings paper.yaml gives `configuration`."""
    return load_paper_config(packaged_config("paper.yaml"), lambda task: True).configurations[configuration]


def write_spec(directory: Path, configuration: str, task: str, seed: int, world: WorldModelSettings) -> None:
    """spec.json of an ungated trial of `configuration` with these world-model settings."""
    spec = spec_for(task, seed, "ungated", configuration)
    spec = spec.model_copy(update={"agent": spec.agent.model_copy(update={"world_model": world})})
    (directory / "spec.json").write_text(spec.model_dump_json())


@dataclass(frozen=True)
class Said:
    """One candidate's verdict."""

    p_improves: float | None
    confidence: float | None = 0.9
    p_bug: float | None = 0.1
    valid: bool = True


def step_lines(
    step: int,
    candidates: Sequence[Said],
    *,
    executed: int = 0,
    improved: bool | None,
    exec_s: Sequence[float] = (),
    stage: str = "improve",
) -> list[dict[str, Any]]:
    """A consulted ungated step as the agent writes it: a prediction line per candidate (the executed one
    `not_gated`, with its outcome; `improved` None: it had no time to run) and its execution lines."""
    lines: list[dict[str, Any]] = []
    ran = improved is not None
    for index, said in enumerate(candidates):
        node = f"s{step}c{index}"
        prediction: dict[str, Any] = {"mode": "pointwise", "valid": said.valid}
        for name in ("p_improves", "confidence", "p_bug"):
            if getattr(said, name) is not None:
                prediction[name] = getattr(said, name)
        mine = index == executed
        line: dict[str, Any] = {
            "type": "prediction", "ts": TS, "node_id": node, "stage": stage, "step": step,
            "candidate": index, "prediction": prediction, "gate": "not_gated" if mine else "not_selected",
            "executed": mine and ran,
        }  # fmt: skip
        if mine and ran:
            line.update(actual_improved=improved, actual_buggy=False)
        lines.append(line)
    for seconds, kind in zip(exec_s, ("debug", "full"), strict=False):
        lines.append(
            {"type": "execution", "ts": TS, "node_id": f"s{step}c{executed}", "kind": kind,
             "exec_time_s": seconds, "timeout_s": 3600.0, "timed_out": False, "exit_code": 0}
        )  # fmt: skip
    return lines


def write_trial(
    out: Path,
    configuration: str,
    task: str,
    seed: int,
    lines: Sequence[dict[str, Any]],
    world: WorldModelSettings,
) -> None:
    """A trial dir with spec.json and events.jsonl."""
    directory = trial_dir(out, configuration, task, seed)
    write_spec(directory, configuration, task, seed, world)
    (directory / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def known_accuracy_sweep(
    out: Path, *, accuracy: float, trials: int, steps: int, seed: int = 0, configuration: str = "wm-point"
) -> None:
    """An ungated sweep of one configuration whose world model is right `accuracy` of the time.

    Each step's executed candidate improves with probability 1/2; a right verdict says so with
    p_improves 0.8 (it improves) or 0.2 (it does not), a wrong one the other way round, always at
    confidence 0.9 and p_bug 0.1. At threshold 0.5 and min_confidence up to 0.9 the gate vetoes exactly
    the steps the world model says will not improve, so its accuracy is the world model's.
    """
    rng = random.Random(seed)
    world = paper_settings(configuration)
    ids = []
    for t in range(trials):
        task = f"task-{t:03d}"
        ids.append(tid("ungated", configuration, task, 34))
        lines: list[dict[str, Any]] = []
        for step in range(steps):
            improved = rng.random() < 0.5
            right = rng.random() < accuracy
            says_improves = improved if right else not improved
            said = Said(p_improves=0.8 if says_improves else 0.2)
            lines += step_lines(step, [said], improved=improved, exec_s=[60.0, 600.0])
        write_trial(out, configuration, task, 34, lines, world)
    write_launch(out, "ungated", ids)


def add_whatif_records(dirs: Sequence[Path], seed: int = 0, steps: int = 5) -> int:
    """The ungated dir of `synthetic.make_sweep` with what the what-if needs: spec.json of paper.yaml's
    settings in each world-model trial and events.jsonl of `steps` consulted steps (each candidate's
    prediction with a confidence, the executed one's outcome and two execution lines). Returns the trials
    rewritten."""
    rng = random.Random(seed)
    written = 0
    for out in dirs:
        record = json.loads((out / "launch.json").read_text())
        if record["regime"] != "ungated":
            continue
        for trial in record["trials"]:
            _, configuration, task, seed_text = trial["trial_id"].split("/")
            if configuration == "aide":
                continue
            world = paper_settings(configuration)
            if world.selection != "pointwise":
                continue
            lines: list[dict[str, Any]] = []
            for step in range(steps):
                candidates = [
                    Said(p_improves=rng.random(), confidence=rng.random(), p_bug=rng.random() * 0.6)
                    for _ in range(world.candidates)
                ]
                executed = rng.randrange(world.candidates)
                improved = rng.random() < (candidates[executed].p_improves or 0.0)
                exec_s = [rng.uniform(10, 120), rng.uniform(60, 3600)]
                lines += step_lines(step, candidates, executed=executed, improved=improved, exec_s=exec_s)
            directory = out / trial["trial_dir"]
            directory.mkdir(parents=True, exist_ok=True)
            write_spec(directory, configuration, task, int(seed_text.removeprefix("seed")), world)
            (directory / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
            written += 1
    return written
