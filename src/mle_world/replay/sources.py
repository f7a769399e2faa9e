"""The recorded candidates of ungated output dirs: each trial's spec, journal, events and task data, checked.

Reads launch.json, every trial's spec.json, journal.json (+ journal.jsonl) and events.jsonl, and the task's
public data (description, preview); writes nothing. Bad input is a `UserError` naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

import mle_world
from mle_world import agent, layout
from mle_world.errors import UserError, not_a_dir
from mle_world.plan.sweep import task_data_dirs
from mle_world.records import (
    SPEC_VERSION,
    ExecutionEvent,
    LaunchRecord,
    LLMCallEvent,
    PredictionEvent,
    TrialSpec,
)
from mle_world.storage import Unreadable, load_record, read_record, read_text
from mle_world.trial_events import EVENT


@dataclass(frozen=True)
class TaskData:
    """What every world prompt of a task shows besides the step (agent/preview.py reads it)."""

    text: str
    preview: str | None


@dataclass(frozen=True)
class TrialSource:
    """One ungated trial with a world model, as its records hold it."""

    output_dir: Path
    trial_dir: Path
    spec: TrialSpec
    checkpoint: agent.Checkpoint
    task: TaskData
    gpu: str | None
    """CUDA_VISIBLE_DEVICES its scripts saw (the world prompt says whether a GPU is there)."""
    recorded: Mapping[str, PredictionEvent]
    """node id → its PredictionEvent: the recorded prediction and the outcome."""
    consult_time: Mapping[int, float]
    """group → trial budget seconds used when the agent built the group's world context."""

    @property
    def trial_id(self) -> str:
        return self.spec.trial_id


@dataclass
class Sources:
    """The trials replay reads, and what it passed over (said in the report)."""

    trials: list[TrialSource] = field(default_factory=list)
    gated: int = 0
    without_world_model: int = 0
    not_started: int = 0


def consult_times(events: Sequence[object]) -> dict[int, float]:
    """Budget time used when each step's world context was built, from events.jsonl in file order.

    A step's world calls follow its coder calls and precede its executions and PredictionEvents, which carry
    the budget time at the step's end (`budget_time_s`) and the wall time then (`ts`). The context was built
    just before the first call of the step's last contiguous run of world calls (a resumed step's earlier
    session left its own run before), so the budget then is `budget_time_s` minus the wall time since that
    call started. Without such calls, the step's start: the previous step's end.
    """
    out: dict[int, float] = {}
    run_start = None
    in_world_run = False
    previous_end = 0.0
    for event in events:
        if isinstance(event, LLMCallEvent):
            if event.role == "world":
                start = event.ts.timestamp() - event.latency_s
                if not in_world_run:
                    run_start, in_world_run = start, True
                elif run_start is not None:
                    run_start = min(run_start, start)
            else:
                in_world_run = False
            continue
        if isinstance(event, PredictionEvent):
            in_world_run = False
            if event.step is None or event.step in out or event.budget_time_s is None:
                continue
            end = event.budget_time_s
            estimate = previous_end
            if run_start is not None:
                estimate = end - max(0.0, event.ts.timestamp() - run_start)
            out[event.step] = min(end, max(previous_end, estimate))
            previous_end, run_start = end, None
        else:
            in_world_run = False
    return out


def _events_in_order(path: Path) -> list[object]:
    """events.jsonl's valid events in file order (`trial_events.read_events` keeps them by kind); a bad
    line is passed over, as the audit passes it over."""
    try:
        text = read_text(path, errors="replace")
    except FileNotFoundError:
        return []
    except OSError as error:
        raise UserError(f"{path}: cannot read the events ({error.strerror or error})") from None
    out: list[object] = []
    for line in text.splitlines():
        if line.strip():
            try:
                out.append(EVENT.validate_json(line))
            except ValidationError:
                continue
    return out


def _launch(output_dir: Path) -> LaunchRecord:
    files = layout.OutputFiles(output_dir)
    if not output_dir.is_dir():
        raise UserError(f"replay: {output_dir}: {not_a_dir(output_dir)}")
    record = read_record(files.launch, LaunchRecord, "launch record")
    if record.harness_version != mle_world.__version__:
        raise UserError(
            f"{files.launch}: launched by harness {record.harness_version}, this is {mle_world.__version__}: "
            "its prompts may differ from this harness's; replay it with that version"
        )
    return record


def _spec(path: Path) -> TrialSpec:
    """The trial's spec; one that another harness version wrote (a field this one does not know, another
    spec_version) is said to be so, as the agent says it."""
    got = load_record(path, TrialSpec)
    if not isinstance(got, Unreadable):
        return got
    error = got.error
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        try:
            version = json.loads(read_text(path)).get("spec_version")
        except (OSError, ValueError, AttributeError):
            version = None
        if first["type"] == "extra_forbidden" or (version is not None and version != SPEC_VERSION):
            where = ".".join(str(part) for part in first["loc"])
            raise UserError(
                f"{path}: {where}: {first['msg']} (spec_version {version}, this harness reads {SPEC_VERSION}): "
                f"written by another harness version than this replay's mle_world {mle_world.__version__}"
            )
    raise UserError(got.line("trial spec"))


def _checkpoint(files: layout.TrialFiles) -> agent.Checkpoint | None:
    try:
        checkpoint = agent.load_checkpoint(files.journal)
    except agent.CorruptJournal as error:
        raise UserError(str(error)) from None
    if checkpoint is not None and checkpoint.version != agent.JOURNAL_VERSION:
        raise UserError(
            f"{files.journal}: journal version {checkpoint.version}, this harness replays version "
            f"{agent.JOURNAL_VERSION}: written by another harness version"
        )
    return checkpoint


def _public_dir(spec: TrialSpec, launch: LaunchRecord, data_dir: Path | None, trial_dir: Path) -> Path:
    """--data-dir's task dir, else the spec's own (a process runtime's host path), else launch.json's."""
    if data_dir is not None:
        public = task_data_dirs(data_dir, spec.task)[0]
    elif Path(spec.paths.data_dir).is_dir():
        public = Path(spec.paths.data_dir)
    else:
        public = task_data_dirs(Path(launch.data_dir), spec.task)[0]
    if not public.is_dir():
        flag = "--data-dir" if data_dir is not None else f"{trial_dir}: the sweep's data dir"
        raise UserError(
            f"{flag}: {public}: {not_a_dir(public)} (the task's public data the world prompts show; "
            "pass --data-dir with the sweep's data dir)"
        )
    return public


def load_sources(
    output_dirs: Sequence[Path], configurations: Sequence[str] = (), data_dir: Path | None = None
) -> Sources:
    """The ungated trials with a world model of `output_dirs` (of `configurations`, when given)."""
    found = Sources()
    tasks: dict[tuple[Path, bool], TaskData] = {}
    for output_dir in output_dirs:
        launch = _launch(output_dir)
        specs = layout.spec_paths(output_dir)
        for path in specs:
            spec = _spec(path)
            if configurations and spec.configuration not in configurations:
                continue
            if spec.regime != "ungated":
                found.gated += 1
                continue
            if not spec.agent.world_model.enabled:
                found.without_world_model += 1
                continue
            files = layout.TrialFiles(path.parent)
            checkpoint = _checkpoint(files)
            if checkpoint is None or not checkpoint.nodes:
                found.not_started += 1
                continue
            public = _public_dir(spec, launch, data_dir, files.dir)
            key = (public, spec.agent.data_preview)
            if key not in tasks:
                preview = agent.data_preview(public) if spec.agent.data_preview else None
                tasks[key] = TaskData(agent.task_description(public), preview)
            ordered = _events_in_order(files.events)
            executions = [e for e in ordered if isinstance(e, ExecutionEvent)]
            gpu = next((e.gpu for e in executions if e.gpu is not None), None)
            predictions = [e for e in ordered if isinstance(e, PredictionEvent)]
            found.trials.append(
                TrialSource(
                    output_dir=output_dir,
                    trial_dir=files.dir,
                    spec=spec,
                    checkpoint=checkpoint,
                    task=tasks[key],
                    gpu=gpu,
                    recorded={e.node_id: e for e in predictions},
                    consult_time=consult_times(ordered),
                )
            )
        if not specs:
            raise UserError(f"replay: {output_dir}: no trials (no {layout.RUNS}/*/*/{layout.SPEC})")
    if not found.trials:
        skipped = f"{found.gated} gated, {found.without_world_model} without a world model, {found.not_started} not started"
        raise UserError(
            f"replay: {', '.join(map(str, output_dirs))}: no ungated trial with a world model and a journal "
            f"({skipped}): replay needs an ungated sweep's ground truth"
        )
    return found
