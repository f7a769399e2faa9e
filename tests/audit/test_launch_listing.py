"""The audit reads launch.json as `LaunchListing` (its trials plain dicts): it accepts exactly what
`LaunchRecord` accepts, gives the same trials, and an unreadable one is worded as `LaunchRecord` words it.

Reads nothing of the repository's; writes launch.json files under tmp_path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from auditkit import tid, write_launch
from pydantic import ValidationError

from mle_world.audit.listing import LaunchListing, ListedTrial, expected_from_launch
from mle_world.identity import unreadable_launch
from mle_world.records import LaunchedTrial, LaunchRecord
from mle_world.storage import load_record


def test_a_listed_trial_has_the_fields_of_a_launched_trial() -> None:
    fields = LaunchedTrial.model_fields
    assert all(info.is_required() for info in fields.values())  # a TypedDict's keys are all required
    assert get_type_hints(ListedTrial) == {name: info.annotation for name, info in fields.items()}
    assert ListedTrial.__required_keys__ == frozenset(fields)


def _launch(tmp_path: Path) -> dict[str, Any]:
    write_launch(tmp_path, "gated", [tid("gated", "aide", "task-00", seed) for seed in range(3)])
    return json.loads((tmp_path / "launch.json").read_text())  # type: ignore[no-any-return]


def test_the_same_trials_as_launch_record(tmp_path: Path) -> None:
    data = _launch(tmp_path)
    data["trials"][1]["trial_dir"] = "/elsewhere/task-00_seed1"
    text = json.dumps(data)
    record, listing = LaunchRecord.model_validate_json(text), LaunchListing.model_validate_json(text)
    assert [(t["trial_id"], t["trial_dir"]) for t in listing.trials] == [
        (t.trial_id, t.trial_dir) for t in record.trials
    ]
    assert listing.provenance() == record.provenance()
    assert listing.model_dump(exclude={"trials"}) == record.model_dump(exclude={"trials"})


@pytest.mark.parametrize(
    "spoil",
    [
        lambda t: t.update(extra="x"),  # a key no launched trial has
        lambda t: t.pop("command"),
        lambda t: t.update(trial_id=7),  # a number where a string belongs
        lambda t: t.update(trial_dir=None),
        lambda t: t.clear(),
    ],
)
def test_a_trial_launch_record_refuses_is_refused_and_worded_alike(tmp_path: Path, spoil: Any) -> None:
    data = _launch(tmp_path)
    spoil(data["trials"][2])
    text = json.dumps(data)
    with pytest.raises(ValidationError):
        LaunchRecord.model_validate_json(text)
    with pytest.raises(ValidationError):
        LaunchListing.model_validate_json(text)
    (tmp_path / "launch.json").write_text(text)
    problems: list[str] = []
    expected_from_launch(tmp_path, problems)
    said = unreadable_launch(load_record(tmp_path / "launch.json", LaunchRecord))  # type: ignore[arg-type]
    assert "trials.2" in said  # where, in the record, it is wrong
    assert problems == [f"{tmp_path / 'launch.json'}: unreadable launch.json ({said}); using files on disk"]


def test_a_trial_that_is_an_array_is_refused(tmp_path: Path) -> None:
    data = _launch(tmp_path)
    data["trials"][0] = list(data["trials"][0].values())
    with pytest.raises(ValidationError):
        LaunchListing.model_validate_json(json.dumps(data))
