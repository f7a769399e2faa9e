"""Benchmarks of the agent loop: per-step overhead against a zero-latency server, and concurrent vs
sequential generation of 4 candidates against a server with fixed latency.

Reads nothing; writes a scratch trial dir in a temp directory and prints a table.
Run: python benchmarks/agent_loop.py [--steps 30] [--latency 0.5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "agent"))

from agent_helpers import coder_reply, good_script, make_competition, make_spec, review_responder  # noqa: E402
from fakeserver import FakeOpenAIServer  # noqa: E402

from mle_world.agent.budget import MonotonicClock  # noqa: E402
from mle_world.agent.events import EventLog  # noqa: E402
from mle_world.agent.interpreter import ExecResult, ProcessRunner  # noqa: E402
from mle_world.agent.llm import EndpointClient  # noqa: E402
from mle_world.agent.loop import Agent, Services, _concurrently  # noqa: E402
from mle_world.agent.workspace import TrialLayout  # noqa: E402
from mle_world.records import BudgetSettings, EndpointSettings  # noqa: E402


class InstantRunner:
    """A CodeRunner that 'runs' instantly and leaves a submission, to isolate the loop's own cost."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace

    def run(self, code: str, *, args: Sequence[str], timeout_s: float, log_path: Path) -> ExecResult:
        (self.workspace / "submission").mkdir(exist_ok=True)
        (self.workspace / "submission" / "submission.csv").write_text("id,target\n1,0\n")
        log_path.write_text("Validation metric: 0.5\n")
        return ExecResult("Validation metric: 0.5\n", 0.0, 0, False, None, None, log_path)

    def terminate(self) -> None:
        pass


def loop_overhead(steps: int, real_runner: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        public, _ = make_competition(root / "competition")
        servers = {
            "coder": FakeOpenAIServer(default=lambda r: coder_reply(good_script(0.5))).start(),
            "feedback": FakeOpenAIServer(default=review_responder).start(),
        }
        try:
            spec = make_spec(
                root, public, servers, budget=BudgetSettings(time_limit_s=3600, max_steps=steps, min_step_s=0)
            )
            layout = TrialLayout(Path(spec.paths.trial_dir), public)
            events = EventLog(layout.events)
            clients = {r: EndpointClient(r, s, events) for r, s in spec.agent.endpoints.items()}
            runner = ProcessRunner(layout.workspace) if real_runner else InstantRunner(layout.workspace)
            services = Services(
                coder=clients["coder"],
                feedback=clients["feedback"],
                world=None,
                runner=runner,
                clock=MonotonicClock(),
                events=events,
            )
            agent = Agent(spec, layout, services)
            start = time.perf_counter()
            result = agent.run()
            elapsed = time.perf_counter() - start
            assert result.steps == steps, result
        finally:
            for server in servers.values():
                server.stop()
    return elapsed / steps


def generation(latency: float, k: int = 4) -> tuple[float, float]:
    with FakeOpenAIServer(latency_s=latency, default="plan\n```python\nprint(1)\n```") as server:
        with tempfile.TemporaryDirectory() as tmp:
            events = EventLog(Path(tmp) / "events.jsonl")
            client = EndpointClient("coder", EndpointSettings(url=server.url, model="m"), events)
            messages = [{"role": "user", "content": "write code"}]

            def one(_: int) -> str:
                return client.chat(messages, purpose="improve").content

            start = time.perf_counter()
            for i in range(k):
                one(i)
            sequential = time.perf_counter() - start
            start = time.perf_counter()
            _concurrently(one, list(range(k)))
            concurrent = time.perf_counter() - start
    return sequential, concurrent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--latency", type=float, default=0.5)
    args = parser.parse_args()
    instant = loop_overhead(args.steps, real_runner=False)
    real = loop_overhead(max(5, args.steps // 3), real_runner=True)
    sequential, concurrent = generation(args.latency)
    print("| measurement | value |")
    print("|---|---|")
    print(f"| loop overhead per step (zero-latency server, instant runner) | {instant * 1000:.1f} ms |")
    print(f"| step with real `python` runs (--debug + full, trivial script) | {real * 1000:.1f} ms |")
    print(f"| 4 candidates sequentially ({args.latency:.2f} s latency) | {sequential:.2f} s |")
    print(f"| 4 candidates concurrently ({args.latency:.2f} s latency) | {concurrent:.2f} s |")
    print(f"| sequential / concurrent ratio | {sequential / concurrent:.2f}x |")


if __name__ == "__main__":
    main()
