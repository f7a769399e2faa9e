"""What-if gates: what the pointwise gate would have decided on each consulted step of ungated trials, over a
grid of its settings, scored against what the step's executed candidate then did (issue 30).

Reads the ungated trials' events.jsonl (predictions, outcomes, execution times) and one spec.json per output
dir and configuration (the gate's settings); writes nothing. No model is called: the agent's own pure gate
rules (`rank_pointwise`, `rejects`, `choose` from `mle_world.agent`) run on the recorded predictions.

What the records cannot say, and what is done instead (docs/numbers.md, "What-if gates"):
- After its first veto a gated search would have diverged (another journal, other parents and candidates),
  so every number is per decision: each recorded step is judged on its own, never as a trial.
- A decision is a consulted step whose executed candidate ran to an outcome; a veto of it saves that
  candidate's recorded execution time (debug pre-run and full run) and loses its improvement, if any.
  A step the gate would run is no skip, whichever sibling it would have run (only the executed one has an
  outcome).
- The veto ignores `max_consecutive_skips`, as the agent's own `counterfactual_gate` does; *forced* counts
  the would-skips that the rule would have run anyway had the steps come in the recorded order (a step
  numbered apart from the one before ran something in between, which resets the count).
- Siblings are ranked in generation order (`candidate`); their tie-break by predicted metric needs the
  task's direction, which changes which sibling would run, never whether the step is vetoed.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from mle_world import layout
from mle_world.agent import choose, rank_pointwise, rejects
from mle_world.audit.collect import Sweep, Trial, trial_events
from mle_world.records import Prediction, PredictionEvent, TrialSpec, WorldModelSettings
from mle_world.storage import Unreadable, load_record

THRESHOLDS = (0.3, 0.5, 0.7, 0.9)
MIN_CONFIDENCES = (0.0, 0.6, 0.8)
BUG_THRESHOLDS = (0.5, 0.8)
"""The table's grid of `threshold` × `min_confidence` × `bug_threshold`; each configuration's own settings
(its spec.json) are added to it and marked."""
CURVE_THRESHOLDS = tuple(i / 10 for i in range(11))
"""The plot's thresholds, at each configuration's own min_confidence and bug_threshold."""
STAGES = ("draft", "debug", "improve")
SPEC_TRIES = 3
"""Ungated trials of one dir and configuration whose spec.json is looked for before giving up on it."""


@dataclass(frozen=True)
class Decision:
    """One consulted step of an ungated trial whose executed candidate ran to an outcome."""

    step: int | None
    stage: str
    predictions: tuple[Prediction, ...]
    """The step's candidates' verdicts in generation order (the gate's sibling order)."""
    improved: bool
    """The executed candidate was good and improved on the best node before it."""
    exec_s: float
    """Recorded execution seconds of the executed candidate (debug pre-run and full run)."""


@dataclass(frozen=True)
class Setting:
    """One point of the grid."""

    threshold: float
    min_confidence: float
    bug_threshold: float


@dataclass
class WhatIfRow:
    """The gate at one setting over the decisions of one configuration and stage."""

    configuration: str
    stage: str
    setting: Setting
    paper: bool
    """The configuration's own settings (its spec.json)."""
    decisions: int = 0
    would_skip: int = 0
    """Decisions the gate would have vetoed (forced rule ignored, as `counterfactual_gate`)."""
    forced: int = 0
    """Would-skips the `max_consecutive_skips` rule would have run, in the recorded order of steps."""
    improved: int = 0
    lost: int = 0
    """Would-skips whose executed candidate improved: improvements the gate would have lost."""
    right_skips: int = 0
    """Would-skips whose executed candidate did not improve."""
    hours: float = 0.0
    hours_saved: float = 0.0

    @property
    def skip_share(self) -> float | None:
        return self.would_skip / self.decisions if self.decisions else None

    @property
    def not_improved(self) -> int:
        return self.decisions - self.improved

    @property
    def accuracy(self) -> float | None:
        """Share of decisions the gate called right: vetoed and did not improve, or run and improved."""
        right = self.right_skips + (self.improved - self.lost)
        return right / self.decisions if self.decisions else None

    @property
    def precision(self) -> float | None:
        """Of the would-skips, the share that did not improve."""
        return self.right_skips / self.would_skip if self.would_skip else None

    @property
    def recall(self) -> float | None:
        """Of the decisions that did not improve, the share the gate would have vetoed."""
        return self.right_skips / self.not_improved if self.not_improved else None

    @property
    def lost_share(self) -> float | None:
        """Of the improvements, the share the gate would have lost."""
        return self.lost / self.improved if self.improved else None


@dataclass
class WhatIf:
    """The what-if table's rows (the grid) and the plot's (a threshold sweep at the paper's other settings)."""

    rows: list[WhatIfRow] = field(default_factory=list)
    curves: list[WhatIfRow] = field(default_factory=list)

    @property
    def paper_rows(self) -> list[WhatIfRow]:
        return [r for r in self.rows if r.paper]


# --------------------------------------------------------------------------- the records


def trial_lines(trial: Trial) -> tuple[list[PredictionEvent], dict[str, float]]:
    """The trial's valid prediction lines (`collect.trial_events`: read once, shared with its page) and each
    node's recorded execution seconds."""
    events = trial_events(trial)
    seconds: dict[str, float] = {}
    for run in events.executions:
        seconds[run.node_id] = seconds.get(run.node_id, 0.0) + run.exec_time_s
    return events.predictions, seconds


def trial_decisions(trial: Trial) -> list[Decision]:
    """The trial's consulted pointwise steps with an outcome, in step order (events.jsonl's order).

    Lines are grouped by `step`; a line without one (older agents) is a step of its own. A step written
    twice (a trial killed between writing its lines and checkpointing replays the step) keeps each
    candidate's last line.
    """
    lines, seconds = trial_lines(trial)
    steps: dict[object, dict[object, PredictionEvent]] = {}
    for index, line in enumerate(lines):
        if line.prediction.mode != "pointwise":
            continue
        key = line.step if line.step is not None else ("line", index)
        candidate = line.candidate if line.candidate is not None else ("line", index)
        siblings = steps.setdefault(key, {})
        siblings[candidate] = line  # a replayed candidate: its last line
    decisions = []
    for siblings in steps.values():
        group = list(siblings.values())
        if all(e.candidate is not None for e in group):
            group.sort(key=lambda e: e.candidate or 0)
        ran = [e for e in group if e.gate == "not_gated"]
        executed = ran[0] if len(ran) == 1 else None
        if executed is None or not executed.executed or executed.actual_improved is None:
            continue  # no outcome: the budget left no time to run the chosen candidate
        decisions.append(
            Decision(
                step=executed.step,
                stage=executed.stage,
                predictions=tuple(e.prediction for e in group),
                improved=executed.actual_improved,
                exec_s=seconds.get(executed.node_id, 0.0),
            )
        )
    return decisions


def _spec(trial: Trial) -> TrialSpec | None:
    if not trial.may_have(layout.SPEC):
        return None
    spec = load_record(trial.file(layout.SPEC), TrialSpec)
    return None if isinstance(spec, Unreadable) else spec


def configuration_settings(trials: Iterable[Trial]) -> dict[str, WorldModelSettings]:
    """Each ungated configuration's world-model settings, from the first readable spec.json of its trials
    (a few tried per dir and configuration), for pointwise configurations only."""
    found: dict[str, WorldModelSettings] = {}
    tried: dict[tuple[str, str], int] = {}
    for trial in trials:
        if trial.configuration in found:
            continue  # before its key: a Path made a string for every trial was most of this loop
        key = (str(trial.output_dir), trial.configuration)
        if tried.get(key, 0) >= SPEC_TRIES:
            continue
        tried[key] = tried.get(key, 0) + 1
        spec = _spec(trial)
        if spec is None:
            continue
        tried[key] = SPEC_TRIES
        wm = spec.agent.world_model
        if wm.enabled and wm.selection == "pointwise":
            found[trial.configuration] = wm
    return found


# --------------------------------------------------------------------------- the gate replayed

_RNG = random.Random(0)
"""What `choose` is given: the gated regime draws nothing from it (as `consult` passes)."""
_FIRST = (0,)


def replay(
    trials: Sequence[Sequence[Decision]],
    base: WorldModelSettings,
    setting: Setting,
    totals: dict[str, WhatIfRow],
    paper: bool,
) -> dict[str, WhatIfRow]:
    """The gate at `setting` (the rest of `base`) over each trial's decisions, one row per stage of `totals`
    (the stage's decisions, hours and improvements, which no setting changes)."""
    settings = base.model_copy(
        update={
            "threshold": setting.threshold,
            "min_confidence": setting.min_confidence,
            "bug_threshold": setting.bug_threshold,
        }
    )
    rows = {
        stage: dataclasses.replace(total, setting=setting, paper=paper) for stage, total in totals.items()
    }
    forced: dict[tuple[tuple[int, ...], int], bool] = {}
    """`choose`'s verdict on a vetoed step by (ranking, vetoed steps before it): pure, so asked once each."""
    for decisions in trials:
        consecutive = 0
        previous: int | None = None
        for decision in decisions:
            step = decision.step
            if previous is not None and step is not None and step != previous + 1:
                consecutive = 0  # a step in between ran a node (the agent resets its count then)
            previous = step
            predictions = decision.predictions
            # `consult` vetoes a step when its best-ranked candidate is rejected, and `rank_pointwise` ranks
            # rejected candidates last: the step is vetoed when every candidate is rejected (a test holds
            # the two equal), and only then is it ranked (for `choose`), which costs 4x as much.
            if len(predictions) == 1:
                vetoed = rejects(predictions[0], settings)
            else:
                vetoed = all(rejects(prediction, settings) for prediction in predictions)
            if not vetoed:
                consecutive = 0  # the step runs (`choose` labels it "execute")
                continue
            order = tuple(rank_pointwise(predictions, settings, None)) if len(predictions) > 1 else _FIRST
            row = rows[decision.stage]
            row.would_skip += 1
            row.hours_saved += decision.exec_s / 3600.0
            if decision.improved:
                row.lost += 1
            else:
                row.right_skips += 1
            key = (order, consecutive)
            if key not in forced:
                outcome = choose(
                    order=order,
                    rejected=True,
                    regime="gated",
                    consecutive_skips=consecutive,
                    settings=settings,
                    rng=_RNG,
                )
                forced[key] = outcome.labels[order[0]] == "forced"
            if forced[key]:
                row.forced += 1
                consecutive = 0
            else:
                consecutive += 1
    return rows


def stage_totals(trials: Sequence[Sequence[Decision]], configuration: str) -> dict[str, WhatIfRow]:
    """Per stage, a row of the decisions, their execution hours and improvements (no setting's counts)."""
    totals: dict[str, WhatIfRow] = {}
    for decisions in trials:
        for decision in decisions:
            row = totals.get(decision.stage)
            if row is None:
                row = totals[decision.stage] = WhatIfRow(configuration, decision.stage, _NO_SETTING, False)
            row.decisions += 1
            row.hours += decision.exec_s / 3600.0
            row.improved += decision.improved
    return totals


_NO_SETTING = Setting(math.nan, math.nan, math.nan)


def _setting_order(setting: Setting) -> tuple[float, float, float]:
    return (setting.threshold, setting.min_confidence, setting.bug_threshold)


def _stage_order(stage: str) -> int:
    return STAGES.index(stage) if stage in STAGES else len(STAGES)


def whatif_rows(sweep: Sweep) -> WhatIf:
    """The what-if grid per pointwise configuration and stage, from the sweep's ungated trials."""
    ungated = [t for t in sweep.trials if t.regime == "ungated"]
    settings = configuration_settings(ungated)
    out = WhatIf()
    for configuration, base in sorted(settings.items()):
        trials = [trial_decisions(t) for t in ungated if t.configuration == configuration]
        trials = [decisions for decisions in trials if decisions]
        if not trials:
            continue
        totals = stage_totals(trials, configuration)
        own = Setting(base.threshold, base.min_confidence, base.bug_threshold)
        grid = {Setting(t, c, b) for t in THRESHOLDS for c in MIN_CONFIDENCES for b in BUG_THRESHOLDS}
        curve = [Setting(t, own.min_confidence, own.bug_threshold) for t in CURVE_THRESHOLDS]
        computed = {s: replay(trials, base, s, totals, s == own) for s in grid | {own} | set(curve)}
        table = sorted(grid | {own}, key=_setting_order)
        for stage in sorted(totals, key=_stage_order):
            out.rows += [computed[setting][stage] for setting in table]
            out.curves += [computed[setting][stage] for setting in curve]
    return out
