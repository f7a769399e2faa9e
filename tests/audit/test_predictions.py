"""The audit's fast reader of events.jsonl gives exactly what `trial_events.read_events` gives: the same
valid predictions (same values) and the same count of bad lines, for usual lines and for every kind of
line its cheap check cannot vouch for.

Reads nothing; writes events.jsonl files under tmp_path.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from auditkit import prediction
from pydantic import TypeAdapter

from mle_world.audit import shapes
from mle_world.audit.predictions import PredictionLine, read_predictions
from mle_world.trial_events import read_events

TS = "2026-01-01T00:00:00Z"
LLM = {
    "type": "llm_call", "ts": TS, "role": "coder", "model": "m", "purpose": "draft", "prompt_tokens": 10,
    "completion_tokens": 2, "latency_s": 0.5, "outcome": "ok",
}  # fmt: skip
EXECUTION = {
    "type": "execution", "ts": TS, "node_id": "n", "kind": "full", "exec_time_s": 1, "timeout_s": 60.0,
    "timed_out": False, "exit_code": 0,
}  # fmt: skip


def variants() -> list[str]:
    usual = prediction("not_gated", 0.7, True, p_bug=0.1, actual_buggy=False, counterfactual_gate="skip")
    said = usual["prediction"]
    assert isinstance(said, dict) and said["p_bug"] == 0.1  # a valid line as the agent writes it
    # The same answer flat on the event (as no agent writes it): not a valid event.
    flat = {**{k: v for k, v in usual.items() if k != "prediction"}, **said}
    lines = [json.dumps(usual), json.dumps(flat), json.dumps(LLM), json.dumps(EXECUTION), ""]
    lines += [
        json.dumps({**usual, "prediction": {**said, "p_improves": 1}}),
        json.dumps({**usual, "prediction": {**said, "valid": "yes"}}),
        json.dumps({**usual, "prediction": {**said, "rank": 0, "comparisons": []}}),
        json.dumps(
            {
                **usual,
                "prediction": {
                    **said,
                    "comparisons": [{"a": "x", "b": "y", "valid": True, "counted": False}],
                },
            }
        ),
        json.dumps(
            {
                **usual,
                "prediction": {**said, "comparisons": [{"a": "x", "b": "y", "valid": 1, "counted": False}]},
            }
        ),
        json.dumps({**usual, "prediction": {**said, "extra": 1}}),
        json.dumps({**usual, "prediction": {k: v for k, v in said.items() if k != "mode"}}),
        json.dumps({**usual, "prediction": None}),
        json.dumps({**usual, "prediction": {**said, "counterfactual_gate": "forced"}}),
        json.dumps({**flat, "prediction": said}),  # both shapes at once
    ]
    odd: list[dict[str, object]] = [  # in the flat shape lines had before the prediction was nested
        {**flat, "p_improves": 1, "p_bug": 0},  # integers in float fields are floats after validation
        {**flat, "valid": "true"},  # lax strings pydantic may or may not take: the validator decides
        {**flat, "executed": 1},
        {**flat, "ts": "2026-02-30T00:00:00Z"},  # no such day
        {**flat, "ts": "2026-01-01 00:00:00"},
        {**flat, "ts": "2026-01-01T00:00:00.123456+02:00"},
        {**flat, "gate": "maybe"},
        {**flat, "stage": "draft", "mode": "pairwise"},
        {**flat, "surprise": 1},  # unknown field: records forbid extras
        {k: v for k, v in flat.items() if k != "type"},  # no type: no event at all
        {k: v for k, v in flat.items() if k != "gate"},  # a required field missing
        {k: v for k, v in flat.items() if k != "p_improves"},  # an optional field missing
        {**flat, "p_improves": None, "actual_improved": None},
        {**flat, "node_id": "a\u2028b"},  # a line separator str.splitlines splits on
        {**LLM, "prompt_tokens": 3.0},
        {**LLM, "role": "nobody"},
        {**EXECUTION, "exit_code": None, "gpu": "0"},
        {"type": "unknown", "ts": TS},
    ]
    lines += [json.dumps(e, ensure_ascii=False) for e in odd]
    lines += ["{not json", "[1, 2]", "null", '{"type": "prediction"}', "   ", json.dumps(usual)[:-5]]
    lines += [json.dumps(usual).replace("0.7", "NaN")]
    return lines


def expected(path: Path) -> tuple[list[PredictionLine], int]:
    events = read_events(path)
    lines = [
        PredictionLine(
            stage=e.stage,
            mode=e.prediction.mode,
            valid=e.prediction.valid,
            gate=e.gate,
            executed=e.executed,
            counterfactual_gate=e.prediction.counterfactual_gate,
            p_improves=e.prediction.p_improves,
            p_bug=e.prediction.p_bug,
            actual_improved=e.actual_improved,
            actual_buggy=e.actual_buggy,
        )
        for e in events.predictions
    ]
    return lines, events.bad_lines


@pytest.mark.parametrize("index", range(len(variants())))
def test_each_kind_of_line_reads_as_read_events_reads_it(tmp_path: Path, index: int) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(variants()[index] + "\n", encoding="utf-8")
    got = read_predictions(str(path))
    assert repr((got.predictions, got.bad_lines)) == repr(expected(path))  # repr: NaN == NaN


def test_a_whole_file_reads_the_same_and_values_are_typed_as_validated(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(variants()) + "\n", encoding="utf-8")
    got = read_predictions(str(path))
    predictions, bad = expected(path)
    assert repr((got.predictions, got.bad_lines)) == repr((predictions, bad))
    assert len(predictions) >= 15 and bad >= 15  # both paths exercised, not only the bad lines
    assert [type(p.p_improves) for p in got.predictions if p.p_improves is not None] == [float] * sum(
        p.p_improves is not None for p in predictions
    )
    missing = tmp_path / "none.jsonl"
    assert read_predictions(str(missing)).predictions == [] and read_predictions(str(missing)).bad_lines == 0


USUAL = json.dumps(prediction("not_gated", 0.7, True, p_bug=0.1, counterfactual_gate="skip"))
FILES: dict[str, bytes] = {
    "crlf": f"{USUAL}\r\n{USUAL}\r\n".encode(),
    "lone-cr": f"{USUAL}\r{USUAL}\r\r\n".encode(),
    "not-utf8": f"{USUAL}\n".encode()
    + f"{USUAL}\n".replace("not_gated", "not_g\udcffated").encode("utf-8", "surrogateescape"),
    "bom": b"\xef\xbb\xbf" + f"{USUAL}\n{USUAL}\n".encode(),
    "truncated": f"{USUAL}\n{USUAL}".encode()[:-7],
    "big": (f"{USUAL}\n" * 5000).encode(),
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_kind_of_file_reads_as_read_events_reads_it(tmp_path: Path, name: str) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(FILES[name])
    got = read_predictions(str(path))
    assert repr((got.predictions, got.bad_lines)) == repr(expected(path))


def test_what_is_no_regular_file_reads_as_read_events_reads_it(tmp_path: Path) -> None:
    (tmp_path / "usual.jsonl").write_text(f"{USUAL}\n")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "usual.jsonl")
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    (tmp_path / "dir.jsonl").mkdir()
    for name in ("link.jsonl", "dangling.jsonl", "dir.jsonl", "missing.jsonl"):
        got = read_predictions(str(tmp_path / name))
        assert repr((got.predictions, got.bad_lines)) == repr(expected(tmp_path / name))
    assert len(read_predictions(str(tmp_path / "link.jsonl")).predictions) == 1


def test_keys_in_any_order_read_the_same(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    reordered = [json.dumps(dict(reversed(json.loads(USUAL).items()))), USUAL]
    path.write_text("\n".join(reordered * 3) + "\n", encoding="utf-8")
    got = read_predictions(str(path))
    assert len(got.predictions) == 6 and repr((got.predictions, got.bad_lines)) == repr(expected(path))


def test_a_timestamp_is_vouched_for_only_when_pydantic_accepts_it(tmp_path: Path) -> None:
    # datetime.fromisoformat takes an offset's minutes past 59 (+00:60 is an hour); pydantic refuses
    # them: such a line is a bad line for read_events, so it must not be a prediction here.
    adapter = TypeAdapter(datetime)
    for sign in "+-":
        for hours in range(26):
            for minutes in range(100):
                stamp = f"2026-01-01T00:00:00{sign}{hours:02d}:{minutes:02d}"
                if shapes.is_timestamp(stamp):
                    adapter.validate_python(stamp)  # raises when pydantic refuses what was vouched for
    path = tmp_path / "events.jsonl"
    usual = prediction("not_gated", 0.7, True, p_bug=0.1, counterfactual_gate="skip")
    path.write_text(
        "".join(json.dumps({**usual, "ts": f"{TS[:-1]}{z}"}) + "\n" for z in ("+00:60", "-05:75", "+23:59"))
    )
    got = read_predictions(str(path))
    assert repr((got.predictions, got.bad_lines)) == repr(expected(path)) and got.bad_lines == 2
