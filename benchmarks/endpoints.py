"""Benchmark of spreading requests over replicas: N concurrent trials against R replicas of a role.

Reads nothing; starts scripted OpenAI-compatible servers on loopback with a fixed latency per request
and a fixed capacity (requests answered at once, like a GPU server's batch), and prints a table of
throughput per (trials, replicas) with its ratio to one replica measured in the same run, beside the
ideal min(trials, replicas x capacity) / latency.
Each trial is a thread with its own client (as each trial process has its own), issuing requests
one after another. Run: python benchmarks/endpoints.py [--latency 0.2] [--capacity 2] [--requests 12]
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))  # the tests' helpers

from fakeserver import FakeOpenAIServer  # noqa: E402

from mle_world.agent.events import MemorySink  # noqa: E402
from mle_world.agent.llm.client import EndpointClient  # noqa: E402
from mle_world.records import EndpointSettings  # noqa: E402

MSG = [{"role": "user", "content": "hi"}]


def throughput(
    trials: int, replicas: int, latency: float, capacity: int, requests: int
) -> tuple[float, list[int]]:
    """Requests per second over the whole run, and the requests each replica answered."""
    with ExitStack() as stack:
        servers = [
            stack.enter_context(FakeOpenAIServer("m", default="ok", latency_s=latency, capacity=capacity))
            for _ in range(replicas)
        ]
        settings = EndpointSettings(
            url=tuple(s.url for s in servers) if replicas > 1 else servers[0].url, model="m"
        )
        clients = [
            EndpointClient("coder", settings, MemorySink(), rng=random.Random(i)) for i in range(trials)
        ]
        start_gate = threading.Barrier(trials + 1)

        def trial(client: EndpointClient) -> None:
            start_gate.wait()
            for _ in range(requests):
                client.chat(MSG, purpose="draft")

        threads = [threading.Thread(target=trial, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        start_gate.wait()
        began = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - began
        for c in clients:
            c.close()
        return trials * requests / elapsed, [len(s.chat_requests) for s in servers]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--capacity", type=int, default=2)
    parser.add_argument("--requests", type=int, default=12, help="requests per trial")
    parser.add_argument("--trials", default="4,8,16")
    parser.add_argument("--replicas", default="1,2,4")
    args = parser.parse_args()
    print(
        f"fixed latency {args.latency * 1000:.0f} ms, capacity {args.capacity} requests at once per replica, "
        f"{args.requests} requests per trial"
    )
    header = f"{'trials':>6} {'replicas':>8} {'req/s':>8} {'vs 1 replica':>12} {'ideal req/s':>11} {'of ideal':>8}  per replica"
    print(header)
    print("-" * len(header))
    for trials in (int(t) for t in args.trials.split(",")):
        base: float | None = None
        for replicas in (int(r) for r in args.replicas.split(",")):
            rate, counts = throughput(trials, replicas, args.latency, args.capacity, args.requests)
            base = base or rate
            ideal = min(trials, replicas * args.capacity) / args.latency
            print(
                f"{trials:>6} {replicas:>8} {rate:>8.1f} {rate / base:>11.2f}x {ideal:>11.1f} "
                f"{rate / ideal:>7.0%}  {counts}"
            )


if __name__ == "__main__":
    main()
