"""Cost accounting of one trial: its events priced by the price table, one CSV row per role.

Reads `<trial>/events.jsonl` (LLM calls, executions); writes `costs/<configuration>.<task>.seed<seed>.csv`
(atomically).
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel

from mle_world import layout
from mle_world.costs.prices import Prices
from mle_world.escapes import csv_cell
from mle_world.records import ROLES, ExecutionEvent, LLMCallEvent, Record, Role, TrialSpec
from mle_world.storage import write_text_atomic
from mle_world.trial_events import TrialEvents, read_events


class Amounts(Record):
    """What is counted and summed: calls, tokens and seconds (a trial's role, or a summary group)."""

    calls: int | None = None
    calls_unknown_usage: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    llm_seconds: float | None = None
    exec_seconds: float | None = None
    gpu_hours: float | None = None
    cost_usd: float | None = None


class Usage(Amounts):
    """One role's usage and cost in a trial (or the executions' GPU-hours): a cost row without its trial."""

    role: str
    model: str = ""
    pricing: str = ""


class CostRow(Usage):
    """One line of `costs/<configuration>.<task>.seed<seed>.csv`: the trial, then one role's usage."""

    trial_id: str
    regime: str
    configuration: str
    task: str
    seed: int
    prices_version: str
    bad_event_lines: int


COUNTED: tuple[str, ...] = tuple(c for c in Amounts.model_fields if c != "cost_usd")
COST_COLUMNS: tuple[str, ...] = (
    *("trial_id", "regime", "configuration", "task", "seed", "role", "model"),
    *COUNTED,
    *("pricing", "cost_usd", "prices_version", "bad_event_lines"),
)
"""The CSV's column order (the trial first); every column is a field of CostRow."""
EXECUTION_ROLE = "execution"


def _gpu_count(gpu: str | None) -> int:
    if gpu is None or not gpu.strip():
        return 0
    return len([g for g in gpu.split(",") if g.strip()])


def _cell(value: str | float | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return csv_cell(value)
    if isinstance(value, int):
        return str(value)
    return repr(round(value, 6))


def role_row(role: Role, events: Sequence[LLMCallEvent], prices: Prices) -> Usage:
    """Usage and cost of one role; per-token pricing when every call's model has a price and usage."""
    calls = len(events)
    known = [e for e in events if e.prompt_tokens is not None and e.completion_tokens is not None]
    # An attempt that failed without usage (HTTP 5xx, timeout, garbage) bills no tokens, so it must not
    # turn a per-token role into GPU-hour pricing; only a completed call without usage is unknown.
    unknown = sum(
        1 for e in events if e.outcome == "ok" and (e.prompt_tokens is None or e.completion_tokens is None)
    )
    prompt = sum(e.prompt_tokens or 0 for e in known) if known or unknown == 0 else None
    completion = sum(e.completion_tokens or 0 for e in known) if known or unknown == 0 else None
    seconds = sum((e.latency_s for e in events), 0.0)
    models = Counter(e.model or "" for e in events)
    cost: float | None = None
    pricing = ""

    def priced(event: LLMCallEvent) -> bool:
        price = prices.models.get(event.model or "")
        return price is not None and price.input is not None and price.output is not None

    if calls == 0:
        cost, pricing = 0.0, "none"
    elif unknown == 0 and all(priced(e) for e in known) and (known or all(priced(e) for e in events)):
        cost = 0.0
        for e in known:
            price = prices.models[e.model or ""]
            cost += (e.prompt_tokens or 0) * (price.input or 0.0) / 1e6
            cost += (e.completion_tokens or 0) * (price.output or 0.0) / 1e6
        pricing = "per-token"
    else:
        server = prices.self_hosted.get(role)
        if server is not None and server.usd_per_gpu_hour is not None:
            cost = seconds / 3600.0 * server.gpus * server.usd_per_gpu_hour
            pricing = "gpu-hour-by-llm-seconds"
    return Usage(
        role=role,
        model=";".join(m for m, _ in models.most_common()),
        calls=calls,
        calls_unknown_usage=unknown,
        prompt_tokens=prompt,
        completion_tokens=completion,
        llm_seconds=seconds,
        pricing=pricing,
        cost_usd=cost,
    )


def execution_row(events: Sequence[ExecutionEvent], prices: Prices) -> Usage:
    """GPU-hours of executions that ran with a GPU (CUDA_VISIBLE_DEVICES set)."""
    seconds = sum((e.exec_time_s for e in events), 0.0)
    gpu_hours = sum(e.exec_time_s * _gpu_count(e.gpu) for e in events) / 3600.0
    rate = prices.execution.usd_per_gpu_hour
    return Usage(
        role=EXECUTION_ROLE,
        calls=len(events),
        calls_unknown_usage=0,
        exec_seconds=seconds,
        gpu_hours=gpu_hours,
        pricing="gpu-hour" if rate is not None else "",
        cost_usd=gpu_hours * rate if rate is not None else (0.0 if gpu_hours == 0 else None),
    )


def unknown_row(role: str) -> Usage:
    """A role of a trial without events.jsonl: nothing is known, so nothing is priced (never $0)."""
    return Usage(role=role, pricing="unknown: no events.jsonl")


def trial_cost_rows(events: TrialEvents, spec: TrialSpec, prices: Prices) -> list[CostRow]:
    """One row per role plus one for execution."""
    if events.missing:
        usages = [unknown_row(role) for role in (*ROLES, EXECUTION_ROLE)]
    else:
        usages = [role_row(role, [e for e in events.llm if e.role == role], prices) for role in ROLES]
        usages.append(execution_row(events.executions, prices))
    return [
        CostRow(
            trial_id=spec.trial_id,
            regime=spec.regime,
            configuration=spec.configuration,
            task=spec.task,
            seed=spec.seed,
            prices_version=f"{prices.version}@{prices.as_of}",
            bad_event_lines=events.bad_lines,
            **usage.model_dump(),
        )
        for usage in usages
    ]


def csv_text(columns: Sequence[str], rows: Iterable[BaseModel]) -> str:
    """A CSV of `rows` (models with a field per column): integers as is, floats to 6 places, None empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(getattr(row, c)) for c in columns])
    return buffer.getvalue()


def write_trial_costs(trial_dir: Path, spec: TrialSpec, output_dir: Path, prices: Prices) -> Path:
    """Write one trial's cost CSV from its events.jsonl; a missing or corrupt log is not fatal."""
    rows = trial_cost_rows(read_events(layout.TrialFiles(trial_dir).events), spec, prices)
    path = layout.cost_path(output_dir, spec.configuration, spec.task, spec.seed)
    write_text_atomic(path, csv_text(COST_COLUMNS, rows))
    return path
