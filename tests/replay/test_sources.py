"""When each step's world context was built, read back from events.jsonl's order and times.

Reads and writes nothing (events built in memory).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mle_world.records import ExecutionEvent, LLMCallEvent, Prediction, PredictionEvent
from mle_world.replay.sources import consult_times

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def call(role: str, end_s: float, latency_s: float) -> LLMCallEvent:
    return LLMCallEvent(
        ts=T0 + timedelta(seconds=end_s),
        role=role,  # type: ignore[arg-type]
        model="m",
        purpose="predict" if role == "world" else "draft",
        prompt_tokens=1,
        completion_tokens=1,
        latency_s=latency_s,
        outcome="ok",
    )


def run(end_s: float) -> ExecutionEvent:
    return ExecutionEvent(
        ts=T0 + timedelta(seconds=end_s),
        node_id="n",
        kind="full",
        exec_time_s=1,
        timeout_s=9,
        timed_out=False,
        exit_code=0,
    )


def predicted(step: int, end_s: float, budget_s: float) -> PredictionEvent:
    return PredictionEvent(
        ts=T0 + timedelta(seconds=end_s),
        node_id=f"n{step}",
        stage="improve",
        step=step,
        prediction=Prediction(mode="pointwise", valid=True),
        gate="not_gated",
        executed=True,
        budget_time_s=budget_s,
    )


def test_the_context_time_is_the_budget_at_the_steps_last_run_of_world_calls() -> None:
    events = [
        # step 0: coder, one world call started at 6 s, the run, the prediction at 20 s (budget 20 s)
        call("coder", 5, 5),
        call("world", 8, 2),
        run(15),
        predicted(0, 20, 20.0),
        # step 1: two concurrent world calls, the earlier started at 27 s
        call("coder", 25, 4),
        call("world", 30, 3),
        call("world", 29, 1),
        predicted(1, 40, 40.0),
        # step 2: no world call recorded: the end of the step before
        call("coder", 45, 4),
        predicted(2, 50, 50.0),
        # step 3: an estimate before the previous step's end (the budget paused for an outage since) is
        # clamped to that end
        call("world", 52, 1),
        predicted(3, 80, 55.0),
        # step 4, resumed: a first session's world calls, then the new session's coder and world calls
        call("world", 55, 1),
        call("coder", 60, 2),
        call("world", 63, 1),
        run(70),
        predicted(4, 72, 70.0),
        predicted(4, 72, 70.0),  # a second candidate of the step changes nothing
    ]
    assert consult_times(events) == {0: 6.0, 1: 40.0 - 13.0, 2: 40.0, 3: 50.0, 4: 70.0 - 10.0}
