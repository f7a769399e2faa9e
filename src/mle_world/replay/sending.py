"""Sending a replay's requests to the world endpoint: concurrent and bounded, resumable, with progress.

Reads the requests and the reply store; sends through the agent's `WorldModel` on the given `ChatModel`
(the `openai` client with the trials' retries and outage window) and appends each reply to the store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mle_world import agent
from mle_world.replay.replies import ReplayReply, ReplyStore
from mle_world.replay.requests import PairRequest, PointRequest, Request

Progress = Callable[[int, int], None]
"""Told (done, in flight) after each reply."""


class EndpointDown(Exception):
    """The world endpoint failed a request past its outage window; what was answered is kept."""


@dataclass(frozen=True)
class SendResult:
    sent: int
    """Requests answered in this run."""
    reused: int
    """Requests answered by an earlier run (found in replies.jsonl)."""


def answer(model: Any, model_id: str, request: Request) -> ReplayReply:
    """Ask the world model one request through the agent's `WorldModel` (its parsing, its fail-open)."""
    trial = request.trial
    world = agent.WorldModel(model, trial.spec.agent.world_model.temperature)
    now = datetime.now(UTC)
    if isinstance(request, PointRequest):
        prediction = world.predict(request.context, request.node, None, request.seed)
        return ReplayReply(
            request_id=request.request_id,
            trial_id=trial.trial_id,
            mode="pointwise",
            node_id=request.node.id,
            model=model_id,
            ts=now,
            prediction=prediction,
            valid=prediction.valid,
            error=prediction.error,
            rationale=prediction.rationale,
        )
    assert isinstance(request, PairRequest)
    comparison = world.compare(request.context, request.a, request.b, None, request.seed)
    return ReplayReply(
        request_id=request.request_id,
        trial_id=trial.trial_id,
        mode="pairwise",
        node_id=request.a.id,
        other_id=request.b.id,
        model=model_id,
        ts=now,
        better=comparison.better,
        confidence=comparison.confidence,
        valid=comparison.valid,
        error=comparison.error,
        rationale=comparison.rationale,
    )


def send_all(
    model: Any,
    model_id: str,
    requests: Sequence[Request],
    store: ReplyStore,
    *,
    concurrency: int,
    progress: Progress | None = None,
) -> SendResult:
    """Each request not in `store` sent once, at most `concurrency` at a time; each reply stored as it comes.

    An endpoint failure stops the sending (requests not yet started are not sent) and raises
    `EndpointDown` after the requests in flight have ended; their replies are kept.
    """
    todo = [r for r in requests if r.request_id not in store]
    # A request id twice (identical content) is asked once.
    unique = list({r.request_id: r for r in todo}.values())
    reused = len(requests) - len(todo)
    done = reused
    lock = threading.Lock()
    stop = threading.Event()

    def one(request: Request) -> None:
        nonlocal done
        if stop.is_set():
            return
        try:
            reply = answer(model, model_id, request)
        except agent.EndpointFailure as error:
            stop.set()
            raise EndpointDown(str(error)) from error
        store.append(reply)
        with lock:
            done += 1
            if progress is not None:
                progress(done, 0)

    agent.build_response_models()  # the SDK's response classes, built before threads parse replies
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures: list[Future[None]] = [pool.submit(one, r) for r in unique]
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = [f for f in finished if f.exception() is not None]
        if failed:
            stop.set()
            for future in futures:
                future.cancel()
            error = failed[0].exception()
            wait(futures)
            assert error is not None
            raise error
    return SendResult(sent=len(unique), reused=reused)
