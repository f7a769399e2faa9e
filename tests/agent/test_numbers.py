"""The numbers the paper reports: step budget, context budget, skip labels, blind prompt, metric
direction and printed metric, seeds and resume, world-model prompt, counterfactual gate, time.

Reads the tiny competition fixture; runs trials against scripted servers on loopback (in process, or
`python -m mle_world.agent` as a subprocess for kill + resume) and writes trial dirs under tmp_path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import (
    candidate_index,
    coder_reply,
    counter_coder,
    good_script,
    make_spec,
    read_events,
    review_responder,
    stage_of_request,
    world_reply,
)
from fakeserver import FakeOpenAIServer, Reply, prompt_text

from mle_world.agent.__main__ import build_agent
from mle_world.agent.journal import Checkpoint, Node, load_checkpoint
from mle_world.agent.llm.client import Backoff
from mle_world.agent.loop import Agent
from mle_world.agent.sandbox.disk_quota import DiskShortage
from mle_world.records import AgentResult, BudgetSettings, SearchSettings, TrialSpec, WorldModelSettings

pytestmark = pytest.mark.timeout(120)
FAST = Backoff(base_s=0.01, cap_s=0.05)
ACCEPT_ALL = WorldModelSettings(enabled=True, candidates=4, threshold=0.5)


def sub(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir()
    return tmp_path / name


def run(spec: TrialSpec) -> AgentResult:
    return build_agent(spec, backoff=FAST, kill_grace_s=1.0).run()


def checkpoint_of(trial: Path) -> Checkpoint | None:
    return load_checkpoint(trial / "journal.json")


def nodes_of(spec: TrialSpec) -> list[Node]:
    ckpt = checkpoint_of(Path(spec.paths.trial_dir))
    assert ckpt is not None
    return ckpt.nodes


def steps_remaining(server: FakeOpenAIServer) -> list[int]:
    return [
        int(re.search(r"<TOTAL_STEPS_REMAINING: (\d+)>", prompt_text(r)).group(1))
        for r in server.chat_requests
    ]  # type: ignore[union-attr]


# ---- bug 1: the step budget counts executions ------------------------------------------------


@pytest.mark.parametrize("regime", ["gated", "ungated"])
def test_aide_and_rank4_execute_the_same_number_of_nodes(tmp_path, competition, servers, regime):
    public, _ = competition
    servers["coder"].default = counter_coder()
    servers["world"].default = lambda r: world_reply(0.9, confidence=0.9)
    budget = BudgetSettings(time_limit_s=600, max_steps=4, min_step_s=0)
    aide = make_spec(sub(tmp_path, "aide"), public, servers, regime=regime, budget=budget)
    aide_result = run(aide)
    aide_remaining = steps_remaining(servers["coder"])
    servers["coder"].requests.clear()
    rank4 = make_spec(sub(tmp_path, "rank4"), public, servers, regime=regime, world=ACCEPT_ALL, budget=budget)
    rank4_result = run(rank4)

    assert aide_result.executed == rank4_result.executed == 4
    assert aide_result.stop_reason == rank4_result.stop_reason == "max_steps"
    # The prompt's remaining steps and the budget stage follow executions, not candidates.
    assert aide_remaining == [4, 3, 2, 1]
    assert steps_remaining(servers["coder"]) == [4] + [3] * 4 + [2] * 4 + [1] * 4
    # An accept-all world model vetoes nothing: the other candidates are "not selected", not skips.
    assert rank4_result.vetoed_steps == 0 and rank4_result.consulted_steps == 3
    assert rank4_result.not_selected == 9 and rank4_result.nodes == 13
    gates = [n.gate for n in nodes_of(rank4) if n.gate is not None]
    assert "skip" not in gates and gates.count("not_selected") == 9


# ---- bug 2: prompts fit the context window; overflow is a node-level event -------------------

CONTEXT_400 = (
    "This model's maximum context length is {limit} tokens. However, you requested {asked} tokens "
    "({prompt} in the messages, {completion} in the completion). Please reduce the length of the messages "
    "or completion."
)


def enforcing(limit: int, inner: Any) -> Any:
    """A vLLM-like server: HTTP 400 when prompt (3 characters a token) + max_tokens exceeds `limit`."""

    def respond(request: dict[str, Any]) -> Reply | str:
        prompt = len(prompt_text(request)) // 3
        completion = int(request.get("max_tokens") or 0)
        if prompt + completion > limit:
            text = CONTEXT_400.format(
                limit=limit, asked=prompt + completion, prompt=prompt, completion=completion
            )
            return Reply(status=400, error_message=text)
        return inner(request)

    return respond


def long_coder() -> Any:
    """Good scripts with long plans and long code, each better than the last (Memory grows fast)."""
    counter = iter(range(10_000))

    def respond(request: dict[str, Any]) -> Reply:
        n = next(counter)
        plan = f"Plan {n}: " + "use gradient boosting with careful feature engineering. " * 40
        code = good_script(round(0.5 + 0.01 * n, 4), tag=f"l{n}") + "\n" + "# padding line of code\n" * 150
        return coder_reply(code, plan)

    return respond


@pytest.mark.parametrize("advertised", [True, False])
def test_prompts_stay_within_a_small_context(tmp_path, competition, advertised):
    """With the context length known the prompts are budgeted; unknown, a 400 shrinks and retries."""
    public, _ = competition
    limit = 9000
    coder = FakeOpenAIServer(
        model="c", max_model_len=limit if advertised else None, default=enforcing(limit, long_coder())
    )
    feedback = FakeOpenAIServer(model="f", default=review_responder)
    with coder, feedback:
        servers = {"coder": coder, "feedback": feedback}
        spec = make_spec(
            tmp_path,
            public,
            servers,
            budget=BudgetSettings(time_limit_s=600, max_steps=12, min_step_s=0),
            search=SearchSettings(num_drafts=1, debug_prob=1.0, max_debug_depth=3),
        )
        result = run(spec)
        sizes = [len(prompt_text(r)) // 3 + int(r["max_tokens"]) for r in coder.chat_requests]
        rejected = [s for s in coder.sent if s.status == 400]
    assert result.status == "completed" and result.executed == 12 and result.context_overflows == 0
    assert max(sizes) > limit if not advertised else max(sizes) <= limit
    assert bool(rejected) is not advertised
    prompts = [
        prompt_text(r)
        for r in coder.chat_requests
        if len(prompt_text(r)) // 3 + int(r["max_tokens"]) <= limit
    ]
    assert any("earlier solution(s) omitted to fit the context window" in p for p in prompts)  # Memory
    ensembling = [p for p in prompts if "Best solutions so far (for ensembling)" in p]
    assert ensembling and all("characters omitted to fit the context window" in p for p in ensembling)
    memory_ok = [p for p in prompts if "Plan 10:" in p or "Plan 9:" in p]
    assert memory_ok  # the most recent nodes stay in Memory


def test_world_model_fails_open_on_a_context_400(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    world = FakeOpenAIServer(
        model="w", max_model_len=None, default=enforcing(100, lambda r: world_reply(0.0))
    )
    with world:
        spec = make_spec(
            tmp_path,
            public,
            {**servers, "world": world},
            regime="gated",
            world=WorldModelSettings(enabled=True),
            budget=BudgetSettings(time_limit_s=600, max_steps=3, min_step_s=0),
        )
        result = run(spec)
    assert result.status == "completed" and result.executed == 3 and result.vetoed_steps == 0
    predictions = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "prediction"]
    assert len(predictions) == 2 and not any(p["prediction"]["valid"] for p in predictions)
    assert all(p["gate"] == "execute" for p in predictions)
    assert "context length" in (nodes_of(spec)[1].prediction.error or "")  # type: ignore[union-attr]


def test_an_overflowing_step_is_no_gate_decision(tmp_path, competition, servers):
    """A step whose prompt never fits records a buggy node without a gate label: the world model was
    not asked, so `aide` (and any configuration) counts no candidate as not selected."""
    public, _ = competition
    servers["coder"].default = enforcing(100, counter_coder())
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=600, max_steps=2, min_step_s=0)
    )
    result = run(spec)
    nodes = nodes_of(spec)
    assert result.status == "completed" and result.context_overflows == 2 and result.executed == 2
    assert result.not_selected == 0 and [n.gate for n in nodes] == [None, None]
    assert all(n.is_buggy and not n.skipped for n in nodes)


def test_a_vetoed_step_says_nothing_ran(tmp_path, competition, servers):
    """The candidates of a vetoed multi-candidate step were not run because the step was vetoed."""
    public, _ = competition
    servers["coder"].default = counter_coder()
    servers["world"].default = lambda r: world_reply(
        0.9 if "There is no working solution" in prompt_text(r) else 0.1
    )
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="gated",
        world=WorldModelSettings(enabled=True, candidates=4, max_consecutive_skips=1),
        budget=BudgetSettings(time_limit_s=600, max_steps=2, min_step_s=0),
    )
    run(spec)
    vetoed = [n for n in nodes_of(spec) if n.group == 1]
    assert sorted(n.gate for n in vetoed) == ["not_selected"] * 3 + ["skip"]
    for node in vetoed:
        assert "another candidate was run" not in node.analysis and "vetoed" in node.analysis


# ---- bug 5: the blind world model is asked the same question ---------------------------------


def test_blind_prompt_says_a_best_exists_without_its_score(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].push(
        coder_reply(good_script(0.6123, tag="draft")), coder_reply(good_script(0.7, tag="next"))
    )
    servers["world"].default = lambda r: world_reply(0.9)
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="gated",
        world=WorldModelSettings(enabled=True, context="blind"),
        budget=BudgetSettings(time_limit_s=600, max_steps=2, min_step_s=0),
    )
    run(spec)
    (prompt,) = [prompt_text(r) for r in servers["world"].chat_requests]
    assert "A working solution with a validation metric already exists" in prompt
    assert "hidden" in prompt and "0.6123" not in prompt
    assert "beats the best so far" in prompt  # the same definition of p_improves as in full context


# ---- deviations: world prompt, counterfactual gate, MLE_SEED ----------------------------------


def test_world_prompt_states_the_protocol_and_the_buggy_rule(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    servers["world"].default = lambda r: world_reply(0.1, confidence=0.9)
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="ungated",
        world=WorldModelSettings(enabled=True),
        budget=BudgetSettings(
            time_limit_s=600, max_steps=2, exec_timeout_s=20, debug_timeout_s=10, min_step_s=0
        ),
    )
    run(spec)
    (prompt,) = [prompt_text(r) for r in servers["world"].chat_requests]
    assert "`python runfile.py --debug`" in prompt and "limit of 10 seconds" in prompt
    assert "full run `python runfile.py`" in prompt and "limit of 20 seconds" in prompt
    assert "no GPU" in prompt
    assert (
        "exits non-zero or exceeds its time limit" in prompt and "no validation metric is reported" in prompt
    )
    # Ungated: the node ran, and the gate's decision is recorded as the counterfactual.
    (event,) = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "prediction"]
    assert event["gate"] == "not_gated" and event["executed"] is True
    assert event["prediction"]["counterfactual_gate"] == "skip" and event["prediction"]["rejected"] is True


def test_scripts_get_the_trial_seed(tmp_path, competition, servers):
    public, _ = competition
    script = good_script(0.5) + '\nprint("seed is", os.environ.get("MLE_SEED"), "hash", hash("mle-world"))\n'
    servers["coder"].push(coder_reply(script))
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=600, max_steps=1, min_step_s=0), seed=77
    )
    run(spec)
    # str hashes (set orders) follow the seed too: the same as any process's with PYTHONHASHSEED=77.
    probe = [sys.executable, "-c", 'print(hash("mle-world"))']
    expected = subprocess.run(probe, env={"PYTHONHASHSEED": "77"}, capture_output=True, text=True).stdout
    assert f"seed is 77 hash {expected.strip()}" in nodes_of(spec)[0].term_out
    assert "MLE_SEED" in prompt_text(servers["coder"].chat_requests[0])


# ---- deviation: the printed metric, also when the reviewer's reading agrees with it -----------


def rounding_reviewer(request: dict[str, Any]) -> Reply:
    """A sensible reviewer that reports the printed metric rounded to two decimals (as LLMs often do)."""
    reply = review_responder(request)
    assert reply.tool_call is not None
    name, answer = reply.tool_call
    metric = answer["metric"]
    return Reply(tool_call=(name, {**answer, "metric": None if metric is None else round(metric, 2)}))


def test_a_reviewer_that_rounds_never_hides_a_better_node(tmp_path, competition, servers):
    """0.8123, then 0.8149 printed; the reviewer says 0.81 twice (within its rounding: no mismatch).
    The second node is the better one: it is the best (and graded) node, and the world model's
    prediction about it is scored as an improvement."""
    public, _ = competition
    servers["coder"].default = metric_coder([0.8123, 0.8149])
    servers["feedback"].default = rounding_reviewer
    servers["world"].default = lambda r: world_reply(0.9, confidence=0.9)
    spec = make_spec(
        tmp_path,
        public,
        servers,
        world=WorldModelSettings(enabled=True),
        budget=BudgetSettings(time_limit_s=600, max_steps=2, min_step_s=0),
    )
    spec = spec.model_copy(update={"lower_is_better": False})
    result = run(spec)
    draft, improve = nodes_of(spec)
    assert (draft.reviewer_metric, improve.reviewer_metric) == (0.81, 0.81)
    assert (draft.metric, improve.metric) == (0.8123, 0.8149)
    assert result.metric_mismatches == 0 and result.best_node_id == improve.id
    assert "Validation metric: 0.8149" in (Path(spec.paths.trial_dir) / "best_solution.py").read_text()
    [event] = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "prediction"]
    assert event["node_id"] == improve.id and event["actual_improved"] is True


# ---- deviation: metric direction ---------------------------------------------------------------


def reviewer_saying(lower: list[bool]) -> Any:
    """A reviewer reading the metric correctly but stating the given directions, one per review."""
    answers = iter(lower)

    def respond(request: dict[str, Any]) -> Reply:
        reply = review_responder(request)
        assert reply.tool_call is not None
        name, answer = reply.tool_call
        return Reply(tool_call=(name, {**answer, "lower_is_better": next(answers, lower[-1])}))

    return respond


def metric_coder(metrics: list[float]) -> Any:
    values = iter(metrics)
    return lambda r: coder_reply(good_script(next(values), tag=f"m{len(metrics)}"))


def test_known_direction_beats_a_reversed_first_review(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = metric_coder([0.5, 0.7, 0.6])
    servers["feedback"].default = reviewer_saying([True, False, False])  # first review: "lower is better"
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=600, max_steps=3, min_step_s=0)
    )
    spec = spec.model_copy(update={"lower_is_better": False})  # the registry knows: higher is better
    result = run(spec)
    assert result.lower_is_better is False and result.direction_source == "task"
    assert result.best_metric == pytest.approx(0.7)
    assert result.direction_disagreements == 1
    assert "Validation metric: 0.7" in (Path(spec.paths.trial_dir) / "best_solution.py").read_text()


def test_unknown_direction_follows_the_majority_of_reviews(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = metric_coder([0.5, 0.7, 0.6])
    servers["feedback"].default = reviewer_saying([True, False, False])
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=600, max_steps=3, min_step_s=0)
    )
    result = run(spec)
    assert result.lower_is_better is False and result.direction_source == "reviews"
    assert result.best_metric == pytest.approx(0.7) and result.direction_disagreements == 1
    trial = Path(spec.paths.trial_dir)
    assert "Validation metric: 0.7" in (trial / "best_solution.py").read_text()


def test_a_flip_promotes_the_kept_submission_of_the_new_best(tmp_path, competition, servers):
    """Each run's CSV names its metric; the kept and graded copies never change with later runs. The
    0.6 node is the best in neither direction: its copy is removed at the step's checkpoint."""
    public, _ = competition
    metrics = iter([0.5, 0.7, 0.6])

    def coder(request: dict[str, Any]) -> Reply:
        metric = next(metrics)
        script = good_script(metric, tag=f"m{int(metric * 10)}").replace('",1\\n"', f'",{metric}\\n"')
        assert f",{metric}" in script
        return coder_reply(script)

    servers["coder"].default = coder
    servers["feedback"].default = reviewer_saying([True, False, False])  # flips at the third review
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=600, max_steps=3, min_step_s=0)
    )
    result = run(spec)
    assert result.lower_is_better is False and result.best_metric == pytest.approx(0.7)
    trial = Path(spec.paths.trial_dir)
    graded = (trial / "submission" / "submission.csv").read_text().splitlines()
    assert graded[1:] == [f"{i},0.7" for i in range(40, 50)]
    for node in nodes_of(spec):
        kept = trial / "logs" / "nodes" / f"{node.id}.submission.csv"
        if node.metric == pytest.approx(0.6):
            assert not kept.exists()
        else:
            assert kept.read_text().splitlines()[1] == f"40,{node.metric}", node.metric


# ---- deviation: seeds; identical choices across runs and across kill + resume ----------------


def _digest(*parts: object) -> int:
    return int(hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def deterministic_coder(request: dict[str, Any]) -> Reply:
    """A server whose reply is a function of the request's seed (as vLLM's is, given a seed)."""
    seed = request.get("seed")
    h = _digest(seed, stage_of_request(request))
    if h % 5 == 0:
        return coder_reply("raise SystemExit(3)\n", f"Plan {h}.")
    return coder_reply(good_script(round(0.3 + (h % 1000) / 2000, 4), tag=f"d{h % 97}"), f"Plan {h}.")


def deterministic_world(request: dict[str, Any]) -> Reply:
    h = _digest(request.get("seed"))
    if "Solution A" in prompt_text(request):
        return Reply(content=json.dumps({"better": "AB"[h % 2], "confidence": 0.5 + (h % 50) / 100}))
    return world_reply((h % 100) / 100, confidence=0.5 + (h % 50) / 100)


def choices(spec: TrialSpec) -> list[tuple[Any, ...]]:
    nodes = nodes_of(spec)
    where = {n.id: (n.group, n.candidate) for n in nodes}
    return [
        (n.group, n.candidate, n.stage, where.get(n.parent_id or ""), n.executed, n.gate, n.metric)
        for n in nodes
    ]


def deterministic_spec(
    tmp_path: Path, public: Path, servers: dict[str, FakeOpenAIServer], name: str
) -> TrialSpec:
    (tmp_path / name).mkdir()
    return make_spec(
        tmp_path / name,
        public,
        servers,
        regime="ungated",
        world=WorldModelSettings(enabled=True, candidates=3, applies_to=("debug", "improve")),
        budget=BudgetSettings(time_limit_s=36_000, max_steps=8, min_step_s=0),
        search=SearchSettings(num_drafts=2, debug_prob=0.5, max_debug_depth=3),
    )


@pytest.fixture
def deterministic(servers: dict[str, FakeOpenAIServer]) -> dict[str, FakeOpenAIServer]:
    servers["coder"].default = deterministic_coder
    servers["world"].default = deterministic_world
    return servers


def test_two_runs_make_identical_choices(tmp_path, competition, deterministic):
    public, _ = competition
    first = deterministic_spec(tmp_path, public, deterministic, "one")
    run(first)
    second = deterministic_spec(tmp_path, public, deterministic, "two")
    run(second)
    assert choices(first) == choices(second)
    seeds = [r.get("seed") for r in deterministic["coder"].chat_requests]
    assert all(isinstance(s, int) for s in seeds) and len(set(seeds)) > 1


def test_kill_and_resume_makes_the_same_choices(tmp_path, competition, deterministic):
    public, _ = competition
    reference = deterministic_spec(tmp_path, public, deterministic, "reference")
    run(reference)

    resumed = deterministic_spec(tmp_path, public, deterministic, "resumed")
    trial = Path(resumed.paths.trial_dir)
    command = [sys.executable, "-m", "mle_world.agent", "--spec", str(trial / "spec.json")]
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 60
    # Kill -9 in the middle of a step: once a later step is under way (its checkpoint is written
    # just before its execution), so the step is replayed from the checkpoint on resume.
    while time.monotonic() < deadline:
        ckpt = (
            checkpoint_of(trial)
            if (trial / "journal.json").exists() or (trial / "journal.jsonl").exists()
            else None
        )
        if ckpt is not None and ckpt.groups >= 4 and ckpt.execution_started_s is not None:
            break
        assert proc.poll() is None
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (trial / "result.json").exists()
    done = subprocess.run(command, capture_output=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert choices(reference) == choices(resumed)
    assert AgentResult.model_validate_json((trial / "result.json").read_text()).resumed == 1


class FullDiskOnRun:
    """The real runner until its `fail_at`-th run, which the shared file system's reserve refuses
    (`check_reserve`'s DiskShortage, raised before the script starts)."""

    def __init__(self, real: Any, fail_at: int) -> None:
        self.real, self.fail_at, self.runs = real, fail_at, 0

    def run(self, code: str, **kwargs: Any) -> Any:
        self.runs += 1
        if self.runs == self.fail_at:
            raise DiskShortage("disk: the file system holding the workspace has 0 MiB free")
        return self.real.run(code, **kwargs)

    def terminate(self) -> None:
        self.real.terminate()


def test_an_infra_failure_then_a_retry_makes_the_same_choices_and_charges_no_phantom_run(
    tmp_path, competition, deterministic, monkeypatch
):
    """A run refused by a full disk left the "run in progress" marks in the final checkpoint, and the
    step's RNG advanced: `--retry-failed` two hours later charged the run up to its limit (7,200 s of a
    32,400 s limit here) and chose differently from then on."""
    public, _ = competition
    reference = deterministic_spec(tmp_path, public, deterministic, "reference")
    run(reference)
    failed = deterministic_spec(tmp_path, public, deterministic, "failed")
    agent = build_agent(failed, backoff=FAST, kill_grace_s=1.0)
    agent.services = dataclasses.replace(agent.services, runner=FullDiskOnRun(agent.services.runner, 5))
    result = agent.run()
    assert result.status == "failed" and result.stop_reason.startswith("infra: disk: "), result.stop_reason
    trial = Path(failed.paths.trial_dir)
    before = checkpoint_of(trial)
    assert before.execution_started_s is None and 2 <= before.groups < 8, before
    later = time.time() + 7200  # the operator frees space and re-runs with --retry-failed
    monkeypatch.setattr("mle_world.agent.loop.time.time", lambda: later)
    retried = build_agent(failed, backoff=FAST, kill_grace_s=1.0)
    assert retried.ckpt.time_used_s == pytest.approx(before.time_used_s)
    assert retried.run().status == "completed"
    assert choices(failed) == choices(reference)


# ---- deviation: time is checkpointed before each execution -----------------------------------


def test_kill_during_an_execution_keeps_its_time(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder(sleep_s=60)
    spec = make_spec(
        tmp_path,
        public,
        servers,
        budget=BudgetSettings(time_limit_s=600, max_steps=1, exec_timeout_s=120, min_step_s=0),
    )
    trial = Path(spec.paths.trial_dir)
    command = [sys.executable, "-m", "mle_world.agent", "--spec", str(trial / "spec.json")]
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    marker = trial / "workspace" / "working" / "ran_c0_full"
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        assert proc.poll() is None
        time.sleep(0.02)
    started = time.monotonic()
    time.sleep(1.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_after = time.monotonic() - started
    ckpt = checkpoint_of(trial)
    assert ckpt is not None
    assert ckpt.execution_started_s is not None and ckpt.nodes == []
    agent = build_agent(spec, backoff=FAST)
    # The resumed trial is charged the cut run (at least the time it ran before the kill).
    assert agent.budget.used() >= ckpt.execution_started_s + killed_after - 0.5
    assert agent.ckpt.execution_started_s is None


class JumpClock:
    """The monotonic clock plus the seconds a test makes pass at once."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def now(self) -> float:
        return time.monotonic() + self.skipped


def test_a_candidate_the_budget_left_no_time_to_run_has_no_outcome(tmp_path, competition, servers):
    """The world model's answer uses up the budget: the candidate is recorded as not run for want of
    time, and its prediction event has no outcome (executed false), so calibration does not score the
    prediction against a run that never happened."""
    public, _ = competition
    servers["coder"].default = counter_coder()
    clock = JumpClock()

    def slow_world(request: dict[str, Any]) -> Reply:
        clock.skipped += 10_000.0  # the whole budget passes while the world model thinks
        return world_reply(0.9, p_bug=0.1)

    servers["world"].default = slow_world
    spec = make_spec(
        tmp_path,
        public,
        servers,
        world=WorldModelSettings(enabled=True),
        budget=BudgetSettings(time_limit_s=600, max_steps=5, min_step_s=0),
    )
    built = build_agent(spec, backoff=FAST, kill_grace_s=1.0)
    result = Agent(spec, built.layout, dataclasses.replace(built.services, clock=clock)).run()
    assert result.stop_reason == "time_limit"
    draft, improve = nodes_of(spec)
    assert improve.is_buggy and "no time left" in improve.term_out
    (event,) = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "prediction"]
    assert event["node_id"] == improve.id and event["gate"] == "not_gated"
    assert event["executed"] is False and event["actual_buggy"] is None and event["actual_improved"] is None


def test_ungated_pairwise_calibrates_the_executed_candidate(tmp_path, competition, servers):
    """The executed candidate is compared with the best on every step, not only the tournament winner."""
    public, _ = competition
    servers["coder"].default = lambda r: coder_reply(good_script(0.5 + candidate_index(r) / 10))
    servers["world"].default = lambda r: Reply(content=json.dumps({"better": "A", "confidence": 0.8}))
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="ungated",
        world=WorldModelSettings(enabled=True, candidates=3, selection="pairwise"),
        budget=BudgetSettings(time_limit_s=600, max_steps=6, min_step_s=0),
    )
    run(spec)
    events = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "prediction"]
    executed = [e for e in events if e["executed"]]
    assert len(executed) == 5 and all(e["prediction"]["p_improves"] is not None for e in executed)
    assert all(e["prediction"]["counterfactual_gate"] in ("execute", "skip", "not_selected") for e in events)
