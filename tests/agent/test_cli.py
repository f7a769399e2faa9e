"""`python -m mle_world.agent --spec` as a real process: exit codes, SIGTERM, kill -9 + resume, isolation.

Reads the tiny competition; writes a trial dir under tmp_path and runs the agent as a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agent_helpers import coder_reply, counter_coder, good_script, make_spec, read_events
from fakeserver import FakeOpenAIServer

from mle_world.agent.journal import Checkpoint, load_checkpoint, log_path
from mle_world.launch.verdict import classify
from mle_world.records import AgentResult, BudgetSettings

pytestmark = pytest.mark.timeout(90)


def start_agent(spec_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mle_world.agent", "--spec", str(spec_path)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def wait_for_nodes(
    journal: Path, count: int, proc: subprocess.Popen[bytes], timeout: float = 30
) -> Checkpoint:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ckpt = load_checkpoint(journal)
        if ckpt is not None:
            if len(ckpt.nodes) >= count:
                return ckpt
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.05)
    raise AssertionError("no checkpoint in time")


def wait_for_file(path: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Wait until `path` exists (a marker the generated script writes as its run starts)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_completed_trial_exits_zero_and_writes_outputs(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=2, min_step_s=0)
    )
    trial = Path(spec.paths.trial_dir)
    proc = start_agent(trial / "spec.json")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    result = AgentResult.model_validate_json((trial / "result.json").read_text())
    assert result.status == "completed" and result.steps == 2
    for name in (
        "journal.json",
        "events.jsonl",
        "best_solution.py",
        "submission/submission.csv",
        "logs/agent.log",
    ):
        assert (trial / name).exists(), name
    assert list((trial / "logs" / "nodes").glob("*.full.log"))
    assert not (trial / "status.json").exists()


def test_endpoint_down_for_good_exits_nonzero_with_cause(tmp_path, competition, servers):
    public, _ = competition
    dead = FakeOpenAIServer()
    url = dead.url
    dead.stop()
    # A named model: no discovery, so the failure is the first chat call's (discovery fails earlier).
    spec = make_spec(
        tmp_path, public, servers, urls={"coder": url}, models={"coder": "m"}, outage_window_s=1.0
    )
    trial = Path(spec.paths.trial_dir)
    proc = start_agent(trial / "spec.json")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in err.decode()
    result = AgentResult.model_validate_json((trial / "result.json").read_text())
    assert result.status == "failed" and "endpoint_unavailable: coder" in result.stop_reason
    calls = [e for e in read_events(trial) if e["type"] == "llm_call"]
    # Every refused attempt is an event: retries while the outage window lasts (how many depends on
    # the machine's speed), then one error.
    outcomes = [e["outcome"] for e in calls]
    assert outcomes and set(outcomes[:-1]) <= {"retry"} and outcomes[-1] == "error", outcomes
    assert all("Connection refused" in e["error"] for e in calls)


def test_agent_refuses_a_journal_another_live_agent_holds(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=2, min_step_s=0)
    )
    trial = Path(spec.paths.trial_dir)
    (trial / "journal.json").write_text("a live agent's journal")
    # Another live agent: a process holding the journal lock, as the agent does for its whole life.
    holder = subprocess.Popen(
        ["flock", "--exclusive", str(trial / ".journal.lock"), "sleep", "60"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        refused = None
        while time.monotonic() < deadline:
            proc = start_agent(trial / "spec.json")
            _, err = proc.communicate(timeout=60)
            if proc.returncode == 75:
                refused = err.decode()
                break
            time.sleep(0.2)  # flock(1) not started yet: the agent ran into a bad journal instead
        assert refused is not None and "held by another live agent" in refused
        assert (trial / "journal.json").read_text() == "a live agent's journal"
        assert not (trial / "logs").exists() and not (trial / "result.json").exists()
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # flock(1) and the sleep that inherited the lock
        holder.wait()
    (trial / "journal.json").unlink()
    proc = start_agent(trial / "spec.json")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()  # the lock dies with its holder


@pytest.mark.slow
def test_sigterm_checkpoints_and_exits_143_then_resumes(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder(sleep_s=0.5)
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=120, max_steps=4, min_step_s=0)
    )
    trial = Path(spec.paths.trial_dir)
    proc = start_agent(trial / "spec.json")
    wait_for_nodes(trial / "journal.json", 1, proc)
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.returncode == 143
    assert not (trial / "result.json").exists()
    ckpt = load_checkpoint(trial / "journal.json")
    assert 1 <= len(ckpt.nodes) < 4 and ckpt.time_used_s > 0

    proc = start_agent(trial / "spec.json")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    result = AgentResult.model_validate_json((trial / "result.json").read_text())
    assert result.steps == 4 and result.resumed == 1
    assert result.time_used_s >= ckpt.time_used_s


@pytest.mark.slow
def test_kill_9_mid_trial_then_resume_carries_time(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder(sleep_s=0.5)
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=120, max_steps=4, min_step_s=0)
    )
    trial = Path(spec.paths.trial_dir)
    proc = start_agent(trial / "spec.json")
    first = wait_for_nodes(trial / "journal.json", 2, proc)
    wait_for_file(trial / "workspace" / "working" / "ran_c2_full", proc)  # the third step's run started
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    before = load_checkpoint(trial / "journal.json")
    assert len(before.nodes) >= len(first.nodes) and not (trial / "result.json").exists()

    proc = start_agent(trial / "spec.json")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    after = load_checkpoint(trial / "journal.json")
    result = AgentResult.model_validate_json((trial / "result.json").read_text())
    assert result.resumed == 1 and result.steps == 4
    assert [n.id for n in after.nodes[: len(before.nodes)]] == [n.id for n in before.nodes]
    # A finished trial's journal.json is whole: the appended log was folded into it.
    assert not log_path(trial / "journal.json").exists()
    assert Checkpoint.model_validate_json((trial / "journal.json").read_text()).nodes == after.nodes
    # Time used = time of the killed session (up to its last checkpoint) + the new session's.
    assert result.time_used_s > before.time_used_s
    assert after.sessions == 2


def test_generated_script_sees_no_key_and_no_private_answers(tmp_path, competition, servers):
    public, private = competition
    probe = """
import json, os, sys
found = []
for root, dirs, files in os.walk(".", followlinks=True):
    for name in dirs + files:
        path = os.path.join(root, name)
        found.append([path, os.path.realpath(path)])
walk_up = os.path.exists(os.path.join("input", "..", "private")) or os.path.exists(os.path.join("..", "private"))
os.makedirs("submission", exist_ok=True)
open("submission/submission.csv", "w").write("id,target\\n")
writable = True
try:
    open("input/new.csv", "w").write("x")
except OSError:
    writable = False
json.dump({"env": dict(os.environ), "paths": found, "walk_up": walk_up, "input_writable": writable},
          open("working/probe.json", "w"))
print("Validation metric: 0.5")
"""
    servers["coder"].push(coder_reply(probe))
    spec = make_spec(
        tmp_path,
        public,
        servers,
        key_env="MLE_TEST_SECRET",
        budget=BudgetSettings(time_limit_s=60, max_steps=1, min_step_s=0),
    )
    trial = Path(spec.paths.trial_dir)
    proc = start_agent(
        trial / "spec.json", env={"MLE_TEST_SECRET": "sk-very-secret", "OPENAI_API_KEY": "sk-2"}
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    report = json.loads((trial / "workspace" / "working" / "probe.json").read_text())

    assert "sk-very-secret" not in json.dumps(report["env"]) and "sk-2" not in json.dumps(report["env"])
    assert "MLE_TEST_SECRET" not in report["env"] and "OPENAI_API_KEY" not in report["env"]
    assert servers["coder"].chat_requests[0]["_auth"] == "Bearer sk-very-secret"  # the agent itself has it
    private_root = str(private.resolve())
    assert report["paths"], "the probe saw nothing"
    assert not any(real.startswith(private_root) for _, real in report["paths"])
    assert not report["walk_up"]
    if os.geteuid() != 0:  # root ignores the view's 0555 mode; containers mount the data read-only
        assert not report["input_writable"]
    assert any(path.endswith("train.csv") for path, _ in report["paths"])
    # And from outside: nothing under the workspace resolves into private/.
    for path in (trial / "workspace").rglob("*"):
        assert not str(path.resolve()).startswith(private_root), path
        assert not (path / ".." / "private").exists()


def test_sigusr2_also_checkpoints_and_exits_143(tmp_path, competition, servers):
    public, _ = competition
    # A quick first node, then a script that would run for a minute unless its group is killed.
    servers["coder"].push(coder_reply(good_script(0.5, tag="first")))
    servers["coder"].default = lambda request: coder_reply(good_script(0.6, sleep_s=60, tag="long"))
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=120, max_steps=4, min_step_s=0)
    )
    trial = Path(spec.paths.trial_dir)
    proc = start_agent(trial / "spec.json")
    wait_for_nodes(trial / "journal.json", 1, proc)
    wait_for_file(trial / "workspace" / "working" / "ran_long_full", proc)  # inside the long full run
    os.kill(proc.pid, signal.SIGUSR2)
    proc.wait(timeout=30)
    assert proc.returncode == 143 and not (trial / "result.json").exists()
    ckpt = load_checkpoint(trial / "journal.json")
    assert len(ckpt.nodes) == 1
    # The interrupted script's process group was killed with the agent's clean exit (unkilled, the
    # script would run for a minute; a killed one may take a moment to leave /proc).
    workspace = str((trial / "workspace").resolve())

    def script_alive() -> bool:
        return any(
            "runfile.py" in _cmdline(pid) and _cwd(pid) == workspace
            for pid in os.listdir("/proc")
            if pid.isdigit()
        )

    deadline = time.monotonic() + 10
    while script_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not script_alive()


def _cwd(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_corrupt_journal_fails_with_one_line_naming_the_file(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=2, min_step_s=0)
    )
    trial = Path(spec.paths.trial_dir)
    journal = trial / "journal.json"
    journal.write_text('{"trial_id": 7, "nodes": "not a list"}')
    proc = start_agent(trial / "spec.json")
    _, err = proc.communicate(timeout=60)
    text = err.decode()
    assert proc.returncode == 2, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and str(journal) in lines[0] and "corrupt journal" in lines[0], text
    assert "Traceback" not in text and "pydantic.dev" not in text
    assert journal.read_text() == '{"trial_id": 7, "nodes": "not a list"}'  # left for the user to inspect
    assert servers["coder"].requests == []


def test_journal_of_a_newer_harness_is_refused_in_one_line(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=1, min_step_s=0)
    )
    trial = Path(spec.paths.trial_dir)
    journal = trial / "journal.json"
    text = json.dumps(
        {"version": 99, "trial_id": spec.trial_id, "science_hash": spec.science_hash, "a_newer_field": 1}
    )
    journal.write_text(text)
    proc = start_agent(trial / "spec.json")
    _, err = proc.communicate(timeout=60)
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert proc.returncode == 2, lines
    assert len(lines) == 1 and "journal version 99 is newer than this agent's" in lines[0], lines
    assert journal.read_text() == text  # not rewritten without the fields this agent does not know
    assert servers["coder"].requests == []


def test_spec_of_another_harness_version_is_one_line(tmp_path, competition, servers):
    public, _ = competition
    spec = make_spec(tmp_path, public, servers)
    path = Path(spec.paths.trial_dir) / "spec.json"
    data = json.loads(path.read_text())
    for change in ({"spec_version": 2}, {"a_newer_field": True}):
        path.write_text(json.dumps({**data, **change}))
        proc = start_agent(path)
        _, err = proc.communicate(timeout=60)
        lines = [line for line in err.decode().splitlines() if line.strip()]
        assert proc.returncode == 2, lines
        assert len(lines) == 1 and "written by another harness version" in lines[0], lines


def test_a_failure_of_the_agents_own_files_is_the_infrastructures(tmp_path, competition, servers):
    """A step whose write fails with ENOSPC (another trial's script filled the disk, until its files
    were removed) ended 'error: OSError ...', which the launcher counts as the agent's failure (a
    settled zero, never retried) when the final checkpoint found room again. Here the journal's log
    becomes /dev/full while the coder answers: the step's checkpoint fails (ENOSPC, then EINVAL from
    undoing the append), the final one has room."""
    public, _ = competition
    spec = make_spec(tmp_path, public, servers)
    trial = Path(spec.paths.trial_dir)
    code = counter_coder()

    def coder(request):  # type: ignore[no-untyped-def]
        log_path(trial / "journal.json").unlink(missing_ok=True)
        log_path(trial / "journal.json").symlink_to("/dev/full")
        return code(request)

    servers["coder"].default = coder
    proc = start_agent(trial / "spec.json")
    _, err = proc.communicate(timeout=60)
    assert (trial / "result.json").exists(), err.decode()[-3000:]
    result = AgentResult.model_validate_json((trial / "result.json").read_text())
    assert proc.returncode == 1 and result.status == "failed", err.decode()[-2000:]
    assert result.stop_reason.startswith("infra: OSError: "), result.stop_reason  # ENOSPC, then EINVAL
    assert classify(1, result, timed_out=False, limit_text="60", last_line="").failure_class == "infra"


def test_a_node_without_the_sandbox_fails_the_trial_as_infra(tmp_path, competition, servers):
    """No bubblewrap on the node (or no user namespaces): no run of the agent's is possible there, which
    is the node's fault. As the agent's failure it was a settled zero that `--retry-failed infra` skipped."""
    public, _ = competition
    spec = make_spec(tmp_path, public, servers)
    trial = Path(spec.paths.trial_dir)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    proc = start_agent(trial / "spec.json", env={"PATH": str(empty)})
    _, err = proc.communicate(timeout=60)
    result = AgentResult.model_validate_json((trial / "result.json").read_text())
    assert proc.returncode == 1 and result.stop_reason.startswith("sandbox_unavailable: "), err.decode()[
        -2000:
    ]
    assert "bwrap" in result.stop_reason
    verdict = classify(1, result, timed_out=False, limit_text="60", last_line="")
    assert (verdict.state, verdict.failure_class) == ("failed", "infra"), verdict
