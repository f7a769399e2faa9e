"""A sweep continued with other served models (or another harness) is refused, or recorded and flagged.

Runs the real CLI on the process runtime against scripted servers on loopback; reads launch.json and
the audit's output.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import scripted
from e2ekit import cli
from fakeserver import FakeOpenAIServer

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def served(coder_model: str) -> Iterator[list[str]]:
    """The three roles on loopback, the coder serving `coder_model`; yields the URL flags."""
    with (
        FakeOpenAIServer(coder_model, default=scripted.coder()) as coder,
        FakeOpenAIServer("feedback-model", default=scripted.review) as feedback,
        FakeOpenAIServer("world-model", default=scripted.world()) as world,
    ):
        yield ["--coder-url", coder.url, "--feedback-url", feedback.url, "--world-url", world.url]


def sweep(config: Path, data_dir: Path, out: Path, task: str, urls: list[str], *extra: str):  # type: ignore[no-untyped-def]
    return cli(
        "--config", str(config), "--runtime", "process", "--backend", "local", "--data-dir", str(data_dir),
        "--gpu-device", "none", "--no-progress", "--regime", "ungated", "--configs", "aide",
        "--tasks", task, "-i", "1", "--output-dir", str(out), *urls, *extra,
    )  # fmt: skip


def test_changed_served_model_is_refused_then_recorded_and_flagged(
    fast_config: Path, data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sweep"
    with served("coder-model") as urls:
        first = sweep(fast_config, data_dir, out, "iris-species", urls)
    assert first.returncode == 0, first.stderr
    launch = (out / "launch.json").read_bytes()
    (tmp_path / "before").mkdir()  # the first launch's record, audited beside the continued sweep below
    shutil.copy(out / "launch.json", tmp_path / "before" / "launch.json")

    with served("coder-model-v2") as urls:
        refused = sweep(fast_config, data_dir, out, "diabetes-progression", urls)
        assert refused.returncode == 2, refused.stderr
        assert "coder model coder-model -> coder-model-v2" in refused.stderr
        assert "--allow-provenance-change" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert (out / "launch.json").read_bytes() == launch
        assert not (out / "runs" / "aide" / "diabetes-progression_seed34").exists()

        allowed = sweep(fast_config, data_dir, out, "diabetes-progression", urls, "--allow-provenance-change")
    assert allowed.returncode == 0, allowed.stderr
    assert "coder model coder-model -> coder-model-v2" in allowed.stderr
    record = json.loads((out / "launch.json").read_text())
    assert [p["served_models"] for p in record["earlier_launches"]] == [
        ["coder=coder-model", "feedback=feedback-model", "world=world-model"]
    ]
    assert {t["trial_id"] for t in record["trials"]} == {
        "ungated/aide/iris-species/seed34",
        "ungated/aide/diabetes-progression/seed34",
    }

    # Which launch ran which trial (status.json `launches`), in the report and on the trial page.
    first_id, second_id = [p["launch_id"] for p in record["earlier_launches"]] + [record["launch_id"]]
    trials = {
        task: out / "runs" / "aide" / f"{task}_seed34" for task in ("iris-species", "diabetes-progression")
    }
    launches = {task: json.loads((d / "status.json").read_text())["launches"] for task, d in trials.items()}
    assert launches == {"iris-species": [first_id], "diabetes-progression": [second_id]}

    audit = cli("audit", str(out), "--strict", "--no-trial-pages")
    assert audit.returncode == 1, audit.stdout + audit.stderr
    assert "different provenance: coder model coder-model -> coder-model-v2" in audit.stdout
    report = (out / "audit" / "report.md").read_text()
    assert "models coder=coder-model-v2, feedback=feedback-model, world=world-model" in report
    [per_launch] = [line for line in report.splitlines() if line.startswith(f"- {out}: {first_id} (launch 1")]
    assert f"{second_id} (launch 2 of 2, " in per_launch
    assert per_launch.count(": 1 trial(s)") == 2
    shown = cli("show", str(trials["diabetes-progression"]))
    assert shown.returncode == 0, shown.stderr
    page = (trials["diabetes-progression"] / "trial.html").read_text()
    assert f"{second_id} (launch 2 of 2, " in page

    # Two dirs audited together (as the two regimes are) whose launches served other models.
    together = cli("audit", str(tmp_path / "before"), str(out), "--no-trial-pages")
    assert together.returncode == 0, together.stdout + together.stderr
    report = (tmp_path / "before" / "audit" / "report.md").read_text()
    assert f"{out}: launched with other settings than {tmp_path / 'before'}: coder model" in report


def test_launch_json_of_another_harness_is_one_line(
    fast_config: Path, data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sweep"
    with served("coder-model") as urls:
        assert sweep(fast_config, data_dir, out, "iris-species", urls).returncode == 0
        record = json.loads((out / "launch.json").read_text())
        record["harness_version"] = "9.0.0"
        record["written_by_a_newer_harness"] = True
        (out / "launch.json").write_text(json.dumps(record))
        again = sweep(fast_config, data_dir, out, "iris-species", urls)
    assert again.returncode == 2, again.stderr
    assert "written by harness 9.0.0" in again.stderr
    assert "Traceback" not in again.stderr
    audit = cli("audit", str(out), "--no-trial-pages")
    assert "unreadable launch.json (written by harness 9.0.0" in audit.stdout


def test_changed_answers_and_a_model_change_behind_an_unprobed_launch_are_refused(
    fast_config: Path, data_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(data_dir / "iris-species", data / "iris-species")
    out = tmp_path / "sweep"
    with served("coder-model") as urls:
        assert sweep(fast_config, data, out, "iris-species", urls).returncode == 0
        # A resume without probing the endpoints records no served model for it to compare...
        unprobed = sweep(fast_config, data, out, "iris-species", urls, "--no-endpoint-check")
        assert unprobed.returncode == 0, unprobed.stderr
    with served("coder-model-v2") as urls:
        # ...so the next probed launch is compared with the last launch that probed.
        refused = sweep(fast_config, data, out, "iris-species", urls)
    assert refused.returncode == 2 and "coder model coder-model -> coder-model-v2" in refused.stderr

    answers = data / "iris-species" / "prepared" / "private" / "test.csv"
    text = answers.read_text()
    answers.write_text(text.replace("virginica", "virginicA", 1))  # same size, other answers
    with served("coder-model") as urls:
        changed = sweep(fast_config, data, out, "iris-species", urls)
    assert changed.returncode == 2, changed.stderr
    assert "iris-species data" in changed.stderr and "Traceback" not in changed.stderr
    record = json.loads((out / "launch.json").read_text())
    assert set(record["data_manifests"]) == {"iris-species"}
