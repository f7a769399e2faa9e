"""The replayed world model scored against the ground truth: the audit's world and calibration tables.

Reads the requests (their recorded predictions and outcomes) and the stored replies; writes strings (the
report's markdown) and calls the display it is given. The replayed and the recorded predictions of the same
candidates go through the same audit code (`audit.analysis.world_row`, `calibration_of`), side by side.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from mle_world import agent
from mle_world.audit.analysis import CalibrationRow, WorldRow, calibration_of, world_row
from mle_world.audit.predictions import PredictionLine
from mle_world.audit.report import WORLD_COLUMNS, bins_table, stage_table
from mle_world.audit.stats import brier_score
from mle_world.audit.tables import Column, Table, build, markdown, num, show
from mle_world.escapes import markdown_text
from mle_world.launch.display import Display
from mle_world.records import GateLabel, Prediction
from mle_world.replay.replies import ReplayReply
from mle_world.replay.requests import PairRequest, PointRequest

REPLAYED = "replayed"
RECORDED = "recorded"


def counterfactual(request: PointRequest, said: Prediction) -> GateLabel | None:
    """What the gated regime would have done with the replayed verdict, at the trial's own gate settings
    (`agent.rejects`; the forced rule ignored, as the recorded counterfactual ignores it). Known for one
    candidate a step only: with several, the step's other candidates were not replayed (no outcome)."""
    settings = request.trial.spec.agent.world_model
    if settings.candidates != 1 or settings.selection != "pointwise":
        return None
    return "skip" if agent.rejects(said, settings) else "execute"


def _line(request: PointRequest, said: Prediction, gate: GateLabel | None) -> PredictionLine:
    event = request.recorded
    return PredictionLine(
        stage=event.stage,
        mode=said.mode,
        valid=said.valid,
        gate=event.gate,
        executed=event.executed,
        counterfactual_gate=gate,
        p_improves=said.p_improves,
        p_bug=said.p_bug,
        actual_improved=event.actual_improved,
        actual_buggy=event.actual_buggy,
    )


@dataclass(frozen=True)
class PairRow:
    """Pairwise accuracy of one configuration: is `better` the sibling that did better?"""

    configuration: str
    pairs: int
    invalid: int
    accuracy: float | None
    brier: float | None
    """Of P(A did better): the confidence when the answer is A, one minus it when B."""


@dataclass
class Scores:
    """Everything the replay report shows."""

    model: str
    world: list[WorldRow]
    stages: list[CalibrationRow]
    overall: WorldRow | None
    pairs: list[PairRow]
    answered: int
    requests: int


def score(
    model: str, points: Sequence[PointRequest], pairs: Sequence[PairRequest], replies: dict[str, ReplayReply]
) -> Scores:
    """Per configuration, the replayed model's row beside the recorded one (the same candidates)."""
    replayed: dict[str, list[PredictionLine]] = defaultdict(list)
    recorded: dict[str, list[PredictionLine]] = defaultdict(list)
    answered = 0
    for request in points:
        reply = replies.get(request.request_id)
        if reply is None or reply.prediction is None:
            continue
        answered += 1
        cfg = request.trial.spec.configuration
        replayed[cfg].append(_line(request, reply.prediction, counterfactual(request, reply.prediction)))
        said = request.recorded.prediction
        recorded[cfg].append(_line(request, said, said.counterfactual_gate))
    rows: list[WorldRow] = []
    for cfg in sorted(replayed):
        for regime, lines in ((REPLAYED, replayed[cfg]), (RECORDED, recorded[cfg])):
            rows.append(dataclasses.replace(world_row("ungated", cfg, lines), regime=regime))
    everything = [line for lines in replayed.values() for line in lines]
    overall = None
    if everything:
        overall = dataclasses.replace(world_row("ungated", "all", everything), regime=REPLAYED)
        rows.append(overall)
    pair_rows = _pair_rows(pairs, replies)
    answered += sum(r.pairs for r in pair_rows)
    return Scores(
        model=model,
        world=rows,
        stages=calibration_of(everything),
        overall=overall,
        pairs=pair_rows,
        answered=answered,
        requests=len(points) + len(pairs),
    )


def _pair_rows(pairs: Sequence[PairRequest], replies: dict[str, ReplayReply]) -> list[PairRow]:
    by_cfg: dict[str, list[tuple[PairRequest, ReplayReply]]] = defaultdict(list)
    for request in pairs:
        reply = replies.get(request.request_id)
        if reply is not None and reply.mode == "pairwise":
            by_cfg[request.trial.spec.configuration].append((request, reply))
    rows = []
    for cfg in sorted(by_cfg):
        answered = by_cfg[cfg]
        valid = [(q, r) for q, r in answered if r.valid and r.better is not None]
        hits = [r.better == q.better for q, r in valid]
        probs = [
            (r.confidence if r.better == "A" else 1.0 - r.confidence)
            for _, r in valid
            if r.confidence is not None
        ]
        outcomes = [q.better == "A" for q, r in valid if r.confidence is not None]
        rows.append(
            PairRow(
                configuration=cfg,
                pairs=len(answered),
                invalid=len(answered) - len(valid),
                accuracy=sum(hits) / len(hits) if hits else None,
                brier=brier_score(probs, outcomes),
            )
        )
    return rows


PAIR_COLUMNS: list[Column[PairRow]] = [
    Column("configuration", lambda r: r.configuration, left=True),
    Column("pairs", lambda r: str(r.pairs)),
    Column("invalid", lambda r: str(r.invalid)),
    Column("accuracy", lambda r: num(r.accuracy, 3)),
    Column("Brier", lambda r: num(r.brier, 4)),
]
NOTE = (
    "Each candidate's world-model request rebuilt from its trial's journal as the agent built it, sent to the "
    "replayed model; scored against what its execution gave (events.jsonl). `replayed` rows are the replayed "
    "model, `recorded` rows the trial's own world model on the same candidates. Accuracy is at p_improves ≥ 0.5. "
    "`would skip`, gate precision and recall: the gated regime's decision on each candidate at its trial's "
    "gate settings (one candidate a step only), per decision: the search would have diverged after a skip."
)
PAIR_NOTE = (
    "Pairs of executed siblings (same parent, or both drafts), the context of the earlier one's step; right "
    "when `better` names the sibling that did better (a good run beats a buggy one, then the metric)."
)


def tables(scores: Scores) -> list[Table]:
    out = []
    if scores.world:
        out.append(
            build("replay", f"World model {scores.model}: replayed and recorded", WORLD_COLUMNS, scores.world)
        )
    if scores.stages:
        out.append(stage_table(scores.stages))
    if scores.overall is not None and scores.overall.bins:
        out.append(bins_table(scores.overall.bins))
    if scores.pairs:
        out.append(
            build("pairs", f"Pairwise, {scores.model}: the better sibling", PAIR_COLUMNS, scores.pairs)
        )
    return out


def show_scores(scores: Scores, display: Display) -> None:
    for table in tables(scores):
        show(table, display)


def report_markdown(scores: Scores, inputs: Sequence[str]) -> str:
    """replay-report.md."""
    parts = [
        f"# Replay of {markdown_text(scores.model)}",
        "",
        "Inputs: " + ", ".join(markdown_text(i) for i in inputs),
        "",
        f"{scores.answered} of {scores.requests} requests answered.",
        "",
    ]
    for table in tables(scores):
        note = PAIR_NOTE if table.name == "pairs" else NOTE if table.name == "replay" else ""
        parts += [f"## {markdown_text(table.title)}", ""]
        if note:
            parts += [note, ""]
        parts += [markdown(table), ""]
    return "\n".join(parts)
