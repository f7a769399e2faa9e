"""Cost accounting: per-trial usage CSVs priced by configs/prices.yaml, and a per-sweep summary.

Reads `<trial>/events.jsonl` (LLM calls, executions) and `configs/prices.yaml`; writes
`costs/<configuration>.<task>.seed<seed>.csv` and `costs/summary.csv` (atomically).
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mle_world.config import read_yaml
from mle_world.errors import ConfigError
from mle_world.records import (
    ROLES,
    DowntimeEvent,
    ExecutionEvent,
    LLMCallEvent,
    PredictionEvent,
    Role,
    TrialSpec,
)
from mle_world.storage import write_text_atomic

DEFAULT_PRICES = Path(__file__).resolve().parents[2] / "configs" / "prices.yaml"
SUMMARY_NAME = "summary.csv"

COST_COLUMNS: tuple[str, ...] = (
    "trial_id",
    "regime",
    "configuration",
    "task",
    "seed",
    "role",
    "model",
    "calls",
    "calls_unknown_usage",
    "prompt_tokens",
    "completion_tokens",
    "llm_seconds",
    "exec_seconds",
    "gpu_hours",
    "pricing",
    "cost_usd",
    "prices_version",
    "bad_event_lines",
)
SUMMARY_COLUMNS: tuple[str, ...] = (
    "regime",
    "configuration",
    "role",
    "trials",
    "calls",
    "calls_unknown_usage",
    "prompt_tokens",
    "completion_tokens",
    "llm_seconds",
    "exec_seconds",
    "gpu_hours",
    "cost_usd",
    "trials_cost_unknown",
)
EXECUTION_ROLE = "execution"


class _PriceModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TokenPrice(_PriceModel):
    """USD per 1M tokens of one model id."""

    input: float | None = Field(None, ge=0)
    output: float | None = Field(None, ge=0)
    cached_input: float | None = Field(None, ge=0)


class GpuHourPrice(_PriceModel):
    """A self-hosted server (or the trial's own GPU): GPUs and USD per GPU-hour."""

    gpus: int = Field(1, ge=1)
    usd_per_gpu_hour: float | None = Field(None, ge=0)


class Prices(_PriceModel):
    """configs/prices.yaml."""

    version: int
    as_of: str
    currency: str = "USD"
    models: dict[str, TokenPrice] = Field(default_factory=dict)
    self_hosted: dict[Role, GpuHourPrice] = Field(default_factory=dict)
    execution: GpuHourPrice = GpuHourPrice()


def load_prices(path: Path = DEFAULT_PRICES) -> Prices:
    """Load and validate the price table; ConfigError names the file."""
    data = read_yaml(path, "price table")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        return Prices.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path}: {loc}: {first['msg']}") from exc


# --------------------------------------------------------------------------- events


@dataclass
class EventLog:
    """Parsed events.jsonl; unreadable lines are counted, never fatal."""

    llm: list[LLMCallEvent] = field(default_factory=list)
    executions: list[ExecutionEvent] = field(default_factory=list)
    predictions: list[PredictionEvent] = field(default_factory=list)
    downtime: list[DowntimeEvent] = field(default_factory=list)
    bad_lines: int = 0
    missing: bool = False


_EVENT_TYPES: dict[str, type[BaseModel]] = {
    "llm_call": LLMCallEvent,
    "execution": ExecutionEvent,
    "prediction": PredictionEvent,
    "downtime": DowntimeEvent,
}


def read_events(path: Path) -> EventLog:
    """Read events.jsonl tolerantly: a corrupted or unknown line counts as a bad line."""
    log = EventLog()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        log.missing = True
        return log
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            model = _EVENT_TYPES[data["type"]]
            event = model.model_validate(data)
        except (ValueError, KeyError, TypeError, ValidationError):
            log.bad_lines += 1
            continue
        if isinstance(event, LLMCallEvent):
            log.llm.append(event)
        elif isinstance(event, ExecutionEvent):
            log.executions.append(event)
        elif isinstance(event, PredictionEvent):
            log.predictions.append(event)
        elif isinstance(event, DowntimeEvent):
            log.downtime.append(event)
    return log


# --------------------------------------------------------------------------- per trial


def _gpu_count(gpu: str | None) -> int:
    if gpu is None or not gpu.strip():
        return 0
    return len([g for g in gpu.split(",") if g.strip()])


def _fmt(value: float | int | None) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return repr(round(value, 6))


def role_row(role: Role, events: Sequence[LLMCallEvent], prices: Prices) -> dict[str, Any]:
    """Usage and cost of one role; per-token pricing when every call's model has a price and usage."""
    calls = len(events)
    unknown = sum(1 for e in events if e.prompt_tokens is None or e.completion_tokens is None)
    known = [e for e in events if e.prompt_tokens is not None and e.completion_tokens is not None]
    prompt = sum(e.prompt_tokens or 0 for e in known) if known or calls == 0 else None
    completion = sum(e.completion_tokens or 0 for e in known) if known or calls == 0 else None
    seconds = sum(e.latency_s for e in events)
    models = Counter(e.model or "" for e in events)
    cost: float | None = None
    pricing = ""
    token_prices = [prices.models.get(e.model or "") for e in events]
    if calls == 0:
        cost, pricing = 0.0, "none"
    elif unknown == 0 and all(p and p.input is not None and p.output is not None for p in token_prices):
        cost = sum(
            (e.prompt_tokens or 0) * (p.input or 0.0) / 1e6
            + (e.completion_tokens or 0) * (p.output or 0.0) / 1e6
            for e, p in zip(events, token_prices, strict=True)
            if p is not None
        )
        pricing = "per-token"
    else:
        server = prices.self_hosted.get(role)
        if server is not None and server.usd_per_gpu_hour is not None:
            cost = seconds / 3600.0 * server.gpus * server.usd_per_gpu_hour
            pricing = "gpu-hour-by-llm-seconds"
    return {
        "role": role,
        "model": ";".join(m for m, _ in models.most_common()),
        "calls": calls,
        "calls_unknown_usage": unknown,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "llm_seconds": seconds,
        "exec_seconds": None,
        "gpu_hours": None,
        "pricing": pricing,
        "cost_usd": cost,
    }


def execution_row(events: Sequence[ExecutionEvent], prices: Prices) -> dict[str, Any]:
    """GPU-hours of executions that ran with a GPU (CUDA_VISIBLE_DEVICES set)."""
    seconds = sum(e.exec_time_s for e in events)
    gpu_hours = sum(e.exec_time_s * _gpu_count(e.gpu) for e in events) / 3600.0
    rate = prices.execution.usd_per_gpu_hour
    return {
        "role": EXECUTION_ROLE,
        "model": "",
        "calls": len(events),
        "calls_unknown_usage": 0,
        "prompt_tokens": None,
        "completion_tokens": None,
        "llm_seconds": None,
        "exec_seconds": seconds,
        "gpu_hours": gpu_hours,
        "pricing": "gpu-hour" if rate is not None else "",
        "cost_usd": gpu_hours * rate if rate is not None else (0.0 if gpu_hours == 0 else None),
    }


def trial_cost_rows(events: EventLog, spec: TrialSpec, prices: Prices) -> list[dict[str, Any]]:
    """One row per role plus one for execution."""
    rows = [role_row(role, [e for e in events.llm if e.role == role], prices) for role in ROLES]
    rows.append(execution_row(events.executions, prices))
    ident = {
        "trial_id": spec.trial_id,
        "regime": spec.regime,
        "configuration": spec.configuration,
        "task": spec.task,
        "seed": spec.seed,
        "prices_version": f"{prices.version}@{prices.as_of}",
        "bad_event_lines": events.bad_lines,
    }
    return [{**ident, **row} for row in rows]


def _csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_fmt(v) if not isinstance(v, str) else v for v in (row.get(c) for c in columns)])
    return buffer.getvalue()


def cost_path(output_dir: Path, spec: TrialSpec) -> Path:
    """`costs/<configuration>.<task>.seed<seed>.csv` (flat, so costs/*.csv finds every trial)."""
    return output_dir / "costs" / f"{spec.configuration}.{spec.task}.seed{spec.seed}.csv"


def write_trial_costs(trial_dir: Path, spec: TrialSpec, output_dir: Path, prices: Prices) -> Path:
    """Write one trial's cost CSV from its events.jsonl; a missing or corrupt log is not fatal."""
    rows = trial_cost_rows(read_events(trial_dir / "events.jsonl"), spec, prices)
    path = cost_path(output_dir, spec)
    write_text_atomic(path, _csv_text(COST_COLUMNS, rows))
    return path


def cost_output_dir(output_dir: Path, prices: Prices) -> list[Path]:
    """Rewrite the cost CSV of every trial under `runs/*/*/spec.json`, then `costs/summary.csv`.

    Trials whose spec.json is unreadable are skipped. Returns the files written.
    """
    from mle_world.storage import read_model

    written: list[Path] = []
    for spec_path in sorted((output_dir / "runs").glob("*/*/spec.json")):
        try:
            spec = read_model(spec_path, TrialSpec)
        except (OSError, ValueError, ValidationError):
            continue
        written.append(write_trial_costs(spec_path.parent, spec, output_dir, prices))
    written.append(write_cost_summary(output_dir))
    return written


# --------------------------------------------------------------------------- summary


def _num(cell: str | None) -> float | None:
    if cell is None or cell == "":
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def read_cost_rows(costs_dir: Path) -> tuple[list[dict[str, str]], list[str]]:
    """Rows of every per-trial CSV in `costs_dir` and the names of unreadable files."""
    rows: list[dict[str, str]] = []
    bad: list[str] = []
    for path in sorted(costs_dir.glob("*.csv")):
        if path.name == SUMMARY_NAME:
            continue
        try:
            with open(path, encoding="utf-8", newline="") as handle:
                reader = csv.DictReader(handle)
                if reader.fieldnames is None or not {"trial_id", "role", "cost_usd"} <= set(
                    reader.fieldnames
                ):
                    bad.append(path.name)
                    continue
                rows.extend(reader)
        except (OSError, csv.Error, UnicodeDecodeError):
            bad.append(path.name)
    return rows, bad


def summarise_cost_rows(rows: Iterable[Mapping[str, str]]) -> list[dict[str, Any]]:
    """Sum per regime x configuration x role; cost is empty when any trial's cost is unknown."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    numeric = ("calls", "calls_unknown_usage", "prompt_tokens", "completion_tokens")
    floats = ("llm_seconds", "exec_seconds", "gpu_hours")
    for row in rows:
        key = (row.get("regime", ""), row.get("configuration", ""), row.get("role", ""))
        group = groups.setdefault(
            key,
            {
                "regime": key[0],
                "configuration": key[1],
                "role": key[2],
                "trials": set(),
                **{c: None for c in (*numeric, *floats)},
                "cost_usd": 0.0,
                "trials_cost_unknown": 0,
            },
        )
        group["trials"].add(row.get("trial_id", ""))
        for column in (*numeric, *floats):
            value = _num(row.get(column))
            if value is not None:
                group[column] = (group[column] or 0) + (int(value) if column in numeric else value)
        cost = _num(row.get("cost_usd"))
        if cost is None:
            group["trials_cost_unknown"] += 1
        else:
            group["cost_usd"] += cost
    out = []
    for key in sorted(groups):
        group = groups[key]
        group["trials"] = len(group["trials"])
        if group["trials_cost_unknown"]:
            group["cost_usd"] = None
        out.append(group)
    return out


def write_cost_summary(output_dir: Path) -> Path:
    """Write `costs/summary.csv` from every per-trial CSV in `costs/`."""
    costs_dir = output_dir / "costs"
    rows, _ = read_cost_rows(costs_dir) if costs_dir.is_dir() else ([], [])
    path = costs_dir / SUMMARY_NAME
    write_text_atomic(path, _csv_text(SUMMARY_COLUMNS, summarise_cost_rows(rows)))
    return path
