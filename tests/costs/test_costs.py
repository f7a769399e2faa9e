"""Per-trial cost CSVs and the summary, against hand-computed numbers."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from gradekit import spec_for

from mle_world.costs.account import COST_COLUMNS, CostRow, write_trial_costs
from mle_world.costs.prices import DEFAULT_PRICES, load_prices
from mle_world.costs.summary import SUMMARY_COLUMNS, CostSummaryRow, write_cost_summary
from mle_world.errors import ConfigError
from mle_world.records import TrialSpec

PRICES = """\
version: 3
as_of: "2026-01-15"
currency: USD
models:
  gpt-4o: {input: 2.50, output: 10.00}
self_hosted:
  feedback: {gpus: 2, usd_per_gpu_hour: 3.0}
  world: {gpus: 1, usd_per_gpu_hour: null}
execution: {usd_per_gpu_hour: 2.0}
"""
TS = datetime(2026, 1, 1, tzinfo=UTC).isoformat()


def llm(role: str, model: str, prompt: int | None, completion: int | None, latency: float) -> str:
    return json.dumps(
        {"type": "llm_call", "ts": TS, "role": role, "model": model, "purpose": "draft",
         "prompt_tokens": prompt, "completion_tokens": completion, "latency_s": latency, "outcome": "ok"}
    )  # fmt: skip


def execution(seconds: float, gpu: str | None) -> str:
    return json.dumps(
        {"type": "execution", "ts": TS, "node_id": "n", "kind": "full", "exec_time_s": seconds,
         "timeout_s": 9999, "timed_out": False, "exit_code": 0, "gpu": gpu}
    )  # fmt: skip


EVENTS = [
    llm("coder", "gpt-4o", 1000, 200, 2.0),
    llm("coder", "gpt-4o", 3000, 800, 4.0),
    llm("feedback", "local-qwen", 500, 100, 1.8),
    llm("world", "local-world", None, None, 3.6),
    execution(1800.0, "0"),
    execution(360.0, "0,1"),
    execution(100.0, None),
    "{corrupted",
    json.dumps({"type": "mystery"}),
]


@pytest.fixture
def prices(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "prices.yaml"
    path.write_text(PRICES)
    return load_prices(path)


def read_rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames or ()) == COST_COLUMNS
        rows = {row["role"]: row for row in reader}
    for row in rows.values():  # every line reads back as the typed row it was written from
        CostRow.model_validate({k: v for k, v in row.items() if v != ""})
    return rows


def make_trial(root: Path, spec: TrialSpec, lines: list[str] | None) -> Path:
    trial = root / "runs" / spec.configuration / f"{spec.task}_seed{spec.seed}"
    trial.mkdir(parents=True)
    if lines is not None:
        (trial / "events.jsonl").write_text("\n".join(lines) + "\n")
    return trial


def test_trial_costs_hand_computed(tmp_path: Path, prices) -> None:  # type: ignore[no-untyped-def]
    spec = spec_for("iris-species", 34)
    path = write_trial_costs(make_trial(tmp_path, spec, EVENTS), spec, tmp_path, prices)
    assert path == tmp_path / "costs" / "wm-point.iris-species.seed34.csv"
    rows = read_rows(path)
    assert list(rows) == ["coder", "feedback", "world", "execution"]
    coder, feedback, world, exe = rows["coder"], rows["feedback"], rows["world"], rows["execution"]
    # coder: 4000 in x $2.50/M + 1000 out x $10/M = 0.01 + 0.01
    assert (coder["calls"], coder["prompt_tokens"], coder["completion_tokens"]) == ("2", "4000", "1000")
    assert float(coder["llm_seconds"]) == 6.0 and coder["pricing"] == "per-token"
    assert float(coder["cost_usd"]) == pytest.approx(0.02)
    # feedback: self-hosted, 1.8 s / 3600 x 2 GPUs x $3 = 0.003
    assert feedback["pricing"] == "gpu-hour-by-llm-seconds"
    assert float(feedback["cost_usd"]) == pytest.approx(0.003)
    # world: no usage reported, no price → unknown, not zero
    assert world["calls_unknown_usage"] == "1" and world["prompt_tokens"] == "" and world["cost_usd"] == ""
    # execution: 1800 s x 1 GPU + 360 s x 2 GPUs = 0.7 GPU-h at $2 = 1.4
    assert float(exe["exec_seconds"]) == 2260.0 and float(exe["gpu_hours"]) == pytest.approx(0.7)
    assert float(exe["cost_usd"]) == pytest.approx(1.4)
    assert {r["bad_event_lines"] for r in rows.values()} == {"2"}
    assert {r["prices_version"] for r in rows.values()} == {"3@2026-01-15"}
    assert coder["trial_id"] == "gated/wm-point/iris-species/seed34"


def test_missing_events_file_is_unknown_not_free(tmp_path: Path, prices) -> None:  # type: ignore[no-untyped-def]
    spec = spec_for("iris-species", 35)
    rows = read_rows(write_trial_costs(make_trial(tmp_path, spec, None), spec, tmp_path, prices))
    assert list(rows) == ["coder", "feedback", "world", "execution"]
    # Nothing is known of a trial without events.jsonl: empty cells, never a $0 that looks priced.
    assert {r["cost_usd"] for r in rows.values()} == {""}
    assert {r["calls"] for r in rows.values()} == {""}
    assert {r["pricing"] for r in rows.values()} == {"unknown: no events.jsonl"}
    with open(write_cost_summary(tmp_path), newline="") as handle:
        summary = list(csv.DictReader(handle))
    assert summary and all(r["cost_usd"] == "" and r["trials_cost_unknown"] == "1" for r in summary)


def test_failed_attempt_without_usage_keeps_per_token_pricing(tmp_path: Path, prices) -> None:  # type: ignore[no-untyped-def]
    failed = json.dumps(
        {"type": "llm_call", "ts": TS, "role": "coder", "model": None, "purpose": "draft",
         "prompt_tokens": None, "completion_tokens": None, "latency_s": 30.0, "outcome": "retry",
         "error": "HTTP 500"}
    )  # fmt: skip
    spec = spec_for("iris-species", 36)
    lines = [llm("coder", "gpt-4o", 1000, 200, 2.0), failed, llm("coder", "gpt-4o", 3000, 800, 4.0)]
    rows = read_rows(write_trial_costs(make_trial(tmp_path, spec, lines), spec, tmp_path, prices))
    coder = rows["coder"]
    assert coder["pricing"] == "per-token" and coder["calls_unknown_usage"] == "0"
    assert float(coder["cost_usd"]) == pytest.approx(0.02)
    assert (coder["calls"], coder["prompt_tokens"]) == ("3", "4000")


def test_unknown_execution_price_stays_empty(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text('version: 1\nas_of: "2026-01-01"\nexecution: {usd_per_gpu_hour: null}\n')
    spec = spec_for("iris-species", 36)
    rows = read_rows(write_trial_costs(make_trial(tmp_path, spec, EVENTS), spec, tmp_path, load_prices(path)))
    assert rows["execution"]["cost_usd"] == "" and rows["coder"]["cost_usd"] == ""
    assert float(rows["execution"]["gpu_hours"]) == pytest.approx(0.7)
    # Executions without a GPU cost nothing whatever the GPU price: a CPU-only trial's cost stays known.
    cpu = spec_for("iris-species", 37)
    lines = [execution(1800.0, None), execution(60.0, "")]
    rows = read_rows(write_trial_costs(make_trial(tmp_path, cpu, lines), cpu, tmp_path, load_prices(path)))
    assert (rows["execution"]["cost_usd"], rows["execution"]["gpu_hours"]) == ("0.0", "0.0")


def test_a_role_whose_every_call_failed_is_priced_by_its_servers_time(tmp_path: Path, prices) -> None:  # type: ignore[no-untyped-def]
    """No call billed tokens and no model is priced per token: the self-hosted server's GPUs were busy
    for the calls' 36 s all the same (2 GPUs at 3 USD/h: 36 / 3600 * 2 * 3 = 0.06)."""
    failed = json.dumps(
        {"type": "llm_call", "ts": TS, "role": "feedback", "model": None, "purpose": "review",
         "prompt_tokens": None, "completion_tokens": None, "latency_s": 36.0, "outcome": "retry",
         "error": "HTTP 500"}
    )  # fmt: skip
    spec = spec_for("iris-species", 38)
    rows = read_rows(write_trial_costs(make_trial(tmp_path, spec, [failed]), spec, tmp_path, prices))
    assert rows["feedback"]["pricing"] == "gpu-hour-by-llm-seconds"
    assert float(rows["feedback"]["cost_usd"]) == pytest.approx(0.06)


def test_summary_sums_per_regime_configuration_role(tmp_path: Path, prices) -> None:  # type: ignore[no-untyped-def]
    known = [line for line in EVENTS if '"world"' not in line]
    for seed, lines in ((34, known), (35, known), (36, EVENTS)):
        spec = spec_for("iris-species", seed)
        write_trial_costs(make_trial(tmp_path, spec, lines), spec, tmp_path, prices)
    other = spec_for("iris-species", 34, configuration="aide", regime="ungated")
    write_trial_costs(make_trial(tmp_path, other, known[:1]), other, tmp_path, prices)
    with open(write_cost_summary(tmp_path), newline="") as handle:
        rows = {(r["regime"], r["configuration"], r["role"]): r for r in csv.DictReader(handle)}
    coder = rows[("gated", "wm-point", "coder")]
    assert (coder["trials"], coder["calls"], coder["prompt_tokens"]) == ("3", "6", "12000")
    assert float(coder["cost_usd"]) == pytest.approx(0.06)
    world = rows[("gated", "wm-point", "world")]
    assert world["cost_usd"] == "" and world["trials_cost_unknown"] == "1"
    assert float(rows[("gated", "wm-point", "execution")]["gpu_hours"]) == pytest.approx(2.1)
    assert float(rows[("ungated", "aide", "coder")]["cost_usd"]) == pytest.approx(0.0025 + 0.002)
    assert not (tmp_path / "costs" / "summary.csv").read_text().count("summary")


def test_cost_output_dir_rewrites_every_trial(tmp_path: Path, prices) -> None:  # type: ignore[no-untyped-def]
    from mle_world.costs.summary import cost_output_dir
    from mle_world.storage import write_model

    for seed in (34, 35):
        spec = spec_for("iris-species", seed)
        write_model(make_trial(tmp_path, spec, EVENTS) / "spec.json", spec)
    bad = tmp_path / "runs" / "wm-point" / "broken_seed1"
    bad.mkdir()
    (bad / "spec.json").write_text("{")
    written = cost_output_dir(tmp_path, prices)
    assert [p.name for p in written] == [
        "wm-point.iris-species.seed34.csv", "wm-point.iris-species.seed35.csv", "summary.csv",
    ]  # fmt: skip


def test_shipped_price_table_loads() -> None:
    prices = load_prices(DEFAULT_PRICES)
    assert prices.version >= 1 and prices.as_of and prices.execution.usd_per_gpu_hour is not None


def test_bad_price_table_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text('version: 1\nas_of: "x"\nmodels: {m: {input: -1}}\n')
    with pytest.raises(ConfigError, match=r"p\.yaml: models\.m\.input"):
        load_prices(path)


def test_every_csv_column_is_a_field_of_its_row_model() -> None:
    assert sorted(COST_COLUMNS) == sorted(CostRow.model_fields)
    assert sorted(SUMMARY_COLUMNS) == sorted(CostSummaryRow.model_fields)
