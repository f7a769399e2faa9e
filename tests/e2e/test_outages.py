"""Sweeps through the real CLI while scripted endpoints fail: outages ridden out, garbage, replicas.

Every scenario is one small sweep (local pool, process runtime, two trials) with its own fake
servers; all sweeps run at once, so the 30 s outages cost CI about one outage. Writes only under
pytest's tmp paths.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import scripted
import yaml
from e2ekit import REPO, cli
from fakeserver import FakeOpenAIServer, Reply

pytestmark = [pytest.mark.slow, pytest.mark.shared_setup, pytest.mark.timeout(900)]

OUTAGE_S = 30.0
BUDGET_S = 20.0
GRACE_S = 25.0
"""The launcher's wall limit is budget + grace (grace also covers the agent's start-up, slow on a busy
machine); budget + grace is shorter than budget + outage, so the limit must stretch."""
SEEDS = "1,2"


@dataclass
class Scenario:
    """One sweep: its servers, the script that breaks them, and what it left on disk."""

    name: str
    window_s: float
    arrange: Callable[[dict[str, Any]], None]
    replicas: int = 1
    servers: dict[str, list[FakeOpenAIServer]] = field(default_factory=dict)
    out: Path = Path()
    proc: subprocess.CompletedProcess[str] | None = None


def ride_500(s: dict[str, Any]) -> None:
    s["coder"][0].outage(OUTAGE_S, "500", after_requests=2)


def ride_429(s: dict[str, Any]) -> None:
    s["feedback"][0].outage(OUTAGE_S, "429", after_requests=1, retry_after_s=3)


def ride_refused(s: dict[str, Any]) -> None:
    s["coder"][0].outage(OUTAGE_S, "refuse", after_requests=2)
    # A broken body now and then is retried like an outage, never taken as a reply.
    s["coder"][0].push(Reply(garbage="truncated"))


def permanent(s: dict[str, Any]) -> None:
    s["coder"][0].outage(None, "refuse", after_requests=2)


def garbage(s: dict[str, Any]) -> None:
    s["feedback"][0].default = Reply(garbage="html")


def replica_dies(s: dict[str, Any]) -> None:
    s["coder"][0].outage(None, "refuse", after_requests=3)


SCENARIOS = (
    Scenario("http500", 120.0, ride_500),
    Scenario("http429", 120.0, ride_429),
    Scenario("refused", 120.0, ride_refused),
    Scenario("permanent", 3.0, permanent),
    Scenario("garbage", 3.0, garbage),
    Scenario("replicas", 120.0, replica_dies, replicas=2),
)


def sweep_config(tmp: Path, window_s: float) -> Path:
    config = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    config["budget"].update(
        {
            "time_limit_s": BUDGET_S,
            "max_steps": 100,
            "min_step_s": 2,
            "debug_timeout_s": 10,
            "exec_timeout_s": 20,
        }
    )
    config["search"].update({"num_drafts": 1, "debug_prob": 1.0})
    config["seeds"] = [int(seed) for seed in SEEDS.split(",")]
    for role, endpoint in config["endpoints"].items():
        endpoint["outage_window_s"] = window_s
        # Named, so no trial discovers its model from /v1/models: a discovery that rides out an outage
        # books the downtime but no llm_call (it is not a chat call), and the 429 check below would
        # then find no retries for the trial that started last.
        endpoint["model"] = f"{role}-model"
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_servers(stack: ExitStack, scenario: Scenario) -> None:
    def server(model: str, default: Any) -> FakeOpenAIServer:
        return stack.enter_context(FakeOpenAIServer(model, default=default))

    scenario.servers = {
        "coder": [server("coder-model", scripted.coder()) for _ in range(scenario.replicas)],
        "feedback": [server("feedback-model", scripted.review) for _ in range(scenario.replicas)],
        "world": [server("world-model", scripted.world())],
    }


def launch(scenario: Scenario, tmp: Path, data_dir: Path) -> subprocess.Popen[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    cluster = tmp / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"launch": {"wall_grace_s": GRACE_S, "max_attempts": 1}}))
    scenario.out = tmp / "out"
    urls = {role: ",".join(s.url for s in servers) for role, servers in scenario.servers.items()}
    argv = [
        *("--config", str(sweep_config(tmp, scenario.window_s)), "--cluster-config", str(cluster)),
        *("--regime", "ungated", "--configs", "aide", "--tasks", "iris-species", "--seeds", SEEDS),
        *("--runtime", "process", "--backend", "local", "--n-workers", "2", "--gpu-device", "none"),
        *("--data-dir", str(data_dir), "--output-dir", str(scenario.out), "--no-progress"),
        # The launcher's probes would count as chat requests in the scripts above.
        "--no-endpoint-check",
        *("--coder-url", urls["coder"], "--feedback-url", urls["feedback"], "--world-url", urls["world"]),
    ]
    return subprocess.Popen(
        [sys.executable, str(REPO / "run_paper.py"), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[dict[str, Scenario]]:
    """Run every scenario's sweep at once; yield them finished, servers still up for inspection."""
    base = tmp_path_factory.mktemp("outages")
    with ExitStack() as stack:
        procs = {}
        for scenario in SCENARIOS:
            start_servers(stack, scenario)
            scenario.arrange(scenario.servers)
            procs[scenario.name] = (scenario, launch(scenario, base / scenario.name, data_dir))
        for scenario, proc in procs.values():
            out, err = proc.communicate(timeout=600)
            scenario.proc = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        yield {s.name: s for s, _ in procs.values()}


def trials(scenario: Scenario) -> list[Path]:
    found = sorted(p.parent for p in scenario.out.glob("runs/*/*/status.json"))
    assert len(found) == 2, scenario.name
    return found


def status(trial: Path) -> dict[str, Any]:
    return json.loads((trial / "status.json").read_text())


def result(trial: Path) -> dict[str, Any]:
    return json.loads((trial / "result.json").read_text())


def events(trial: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (trial / "events.jsonl").read_text().splitlines()]


def ts(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["ts"])


@pytest.mark.parametrize("name", ["http500", "http429", "refused"])
def test_a_30s_outage_is_ridden_out_without_retry_and_costs_no_budget(sweeps, name):  # type: ignore[no-untyped-def]
    scenario = sweeps[name]
    assert scenario.proc is not None and scenario.proc.returncode == 0, (
        scenario.proc and scenario.proc.stderr[-3000:]
    )
    for trial in trials(scenario):
        st, res, log = status(trial), result(trial), events(trial)
        assert st["state"] == "succeeded" and st["attempt"] == 1, st
        assert res["status"] == "completed" and res["stop_reason"] == "time_limit", res
        # The outage was recorded as downtime: a down and an up event, and the total in result.json,
        # status.json (for `status`) and the launcher log (the wall limit stretched past budget + grace).
        outages = [e for e in log if e["type"] == "downtime"]
        assert [e["phase"] for e in outages][:2] == ["down", "up"], outages
        assert res["downtime_s"] > 0 and st["downtime_s"] == res["downtime_s"]
        up = ts(outages[1])
        # Its time used excludes the outage: the 20 s budget was not spent by the 30 s outage, so the
        # trial kept working afterwards (LLM calls and script runs after the role came back) ...
        after = [e for e in log if e["type"] in ("llm_call", "execution") and ts(e) > up]
        assert any(e["type"] == "execution" for e in after), f"{trial}: no work after the outage"
        assert all(e.get("outcome", "ok") != "error" for e in log if e["type"] == "llm_call")
        # ... and budget used plus downtime fit in the session's wall time.
        wall = (
            datetime.fromisoformat(st["ended_at"]) - datetime.fromisoformat(st["started_at"])
        ).total_seconds()
        assert res["time_used_s"] + res["downtime_s"] <= wall
        assert res["time_used_s"] <= BUDGET_S + GRACE_S
    if name == "http429":
        # Retry-After: 3 was honoured: no two failed feedback attempts of one trial closer than that.
        for trial in trials(scenario):
            retries = [ts(e) for e in events(trial) if e["type"] == "llm_call" and e["outcome"] == "retry"]
            gaps = [(b - a).total_seconds() for a, b in zip(retries, retries[1:], strict=False)]
            assert retries and all(g >= 2.5 for g in gaps), gaps


def test_status_and_audit_show_the_downtime(sweeps):  # type: ignore[no-untyped-def]
    out = sweeps["http500"].out
    proc = cli("status", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "endpoint downtime: 2 finished trial(s) rode out outages" in " ".join(proc.stdout.split())
    audit = cli("audit", str(out))
    assert audit.returncode == 0, audit.stderr[-2000:]
    line = "endpoint downtime: 2 trial(s) rode out outages"
    assert line in " ".join(audit.stdout.split()) and line in (out / "audit" / "report.md").read_text()


@pytest.mark.parametrize(
    ("name", "cause"), [("permanent", "coder: gave up"), ("garbage", "protocol garbage")]
)
def test_a_lasting_fault_fails_the_trials_as_infra_after_the_window(sweeps, name, cause):  # type: ignore[no-untyped-def]
    scenario = sweeps[name]
    for trial in trials(scenario):
        st, res = status(trial), result(trial)
        assert st["state"] == "failed" and st["failure_class"] == "infra", st
        assert cause in st["cause"] and res["stop_reason"].startswith("endpoint_unavailable"), st
        # Only after the configured window (3 s) of retrying.
        waited = re.search(r"gave up after ([\d.]+) s", st["cause"])
        assert waited is not None and float(waited.group(1)) >= scenario.window_s - 0.1, st["cause"]
    if name == "garbage":
        # Retried before giving up, never taken as a reply.
        for trial in trials(scenario):
            feedback = [e for e in events(trial) if e["type"] == "llm_call" and e["role"] == "feedback"]
            assert len(feedback) >= 2 and all(e["outcome"] != "ok" for e in feedback)


def test_a_replica_dies_mid_sweep_and_its_share_moves(sweeps):  # type: ignore[no-untyped-def]
    scenario = sweeps["replicas"]
    assert scenario.proc is not None and scenario.proc.returncode == 0, scenario.proc.stderr[-3000:]
    for trial in trials(scenario):
        assert status(trial)["state"] == "succeeded" and result(trial)["status"] == "completed"
    dead, live = scenario.servers["coder"]
    served_dead = [r for r in dead.sent if r.status == 200]
    assert len(served_dead) >= 1  # it served before it died
    assert len([r for r in live.sent if r.status == 200]) > 3 * len(served_dead)
    # The two healthy feedback replicas shared the reviews (tolerance: each at least a quarter).
    counts = [len([r for r in s.sent if r.status == 200]) for s in scenario.servers["feedback"]]
    assert min(counts) >= sum(counts) / 4, counts
    # check-endpoints lists both coder replicas: the dead one as unreachable, the role still usable.
    urls = ",".join(s.url for s in scenario.servers["coder"])
    feedback = ",".join(s.url for s in scenario.servers["feedback"])
    world = scenario.servers["world"][0].url
    proc = cli(
        *("check-endpoints", "--config", str(REPO / "configs" / "demo.yaml")),
        *("--coder-url", urls, "--feedback-url", feedback, "--world-url", world),
    )
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dead.url in text and live.url in text and "connection refused" in text
    assert f"note: coder replica {dead.url} is down" in text
