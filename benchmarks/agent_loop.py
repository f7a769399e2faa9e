"""Benchmarks of the agent loop: per-step overhead against a zero-latency server, and concurrent vs
sequential generation of 4 candidates against a server with fixed latency.

Reads nothing; writes a scratch trial dir in a temp directory and prints tables. The per-step table
splits the run into quarters (the journal grows along it) and compares each with the baseline measured
in the same run: the bare HTTP round trips a step needs (coder + feedback) through the same client.
Nodes carry --code-kb of code each, like real solutions, so a journal rewrite grows with the trial.
The instant-runner trial runs --repeat times; each figure is the median over the repeats (the machine
is shared: compare the CPU rows, which waiting for a core does not inflate).
Run: python benchmarks/agent_loop.py [--steps 100] [--code-kb 8] [--latency 0.5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))  # the tests' helpers

from agent_helpers import coder_reply, good_script, make_competition, make_spec, review_responder  # noqa: E402
from fakeserver import FakeOpenAIServer  # noqa: E402

from mle_world.agent.budget import MonotonicClock  # noqa: E402
from mle_world.agent.events import EventLog  # noqa: E402
from mle_world.agent.llm.client import EndpointClient  # noqa: E402
from mle_world.agent.llm.fanout import fan_out  # noqa: E402
from mle_world.agent.loop import Agent, Services  # noqa: E402
from mle_world.agent.sandbox.interpreter import ExecResult, ProcessRunner  # noqa: E402
from mle_world.agent.sandbox.workspace import TrialLayout  # noqa: E402
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


@dataclass
class LoopTimes:
    """Wall seconds of each step and of each checkpoint write, CPU, journal files' bytes."""

    steps: list[float] = field(default_factory=list)
    checkpoints: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    """The whole process: the agent and the in-process servers."""
    agent_cpu_s: float = 0.0
    """The agent's thread only (one candidate per step: its calls are made inline)."""
    journal_bytes: int = 0
    round_trip_s: float = 0.0


def _timed(times: list[float], method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            times.append(time.perf_counter() - t0)

    return wrapper


def padded_script(code_kb: int) -> str:
    padding = "".join(f"# feature note {i:05d}: " + "x" * 40 + "\n" for i in range(code_kb * 1024 // 62))
    return good_script(0.5) + padding


def loop_overhead(steps: int, real_runner: bool, code_kb: int = 0) -> LoopTimes:
    times = LoopTimes()
    script = padded_script(code_kb)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        public, _ = make_competition(root / "competition")
        servers = {
            "coder": FakeOpenAIServer(default=lambda r: coder_reply(script)).start(),
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
            agent.step = _timed(times.steps, agent.step)  # type: ignore[method-assign]
            agent.checkpoint = _timed(times.checkpoints, agent.checkpoint)  # type: ignore[method-assign]
            cpu0, thread0 = time.process_time(), time.thread_time()
            result = agent.run()
            times.cpu_s = time.process_time() - cpu0
            times.agent_cpu_s = time.thread_time() - thread0
            assert result.steps == steps, result
            times.journal_bytes = sum(
                p.stat().st_size for p in Path(spec.paths.trial_dir).glob("journal*") if p.is_file()
            )
            # The floor: the two round trips of a step (coder, feedback) with the same client and servers.
            messages = [{"role": "user", "content": "write code"}]
            t0 = time.perf_counter()
            for _ in range(20):
                clients["coder"].chat(messages, purpose="draft")
                clients["feedback"].chat(messages, purpose="review")
            times.round_trip_s = (time.perf_counter() - t0) / 20
        finally:
            for server in servers.values():
                server.stop()
    return times


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
            fan_out(one, list(range(k)))
            concurrent = time.perf_counter() - start
    return sequential, concurrent


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--code-kb", type=int, default=8, help="code size of each node (KiB)")
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3, help="instant-runner trials (medians reported)")
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    runs = [loop_overhead(args.steps, real_runner=False, code_kb=args.code_kb) for _ in range(args.repeat)]
    real = loop_overhead(max(5, args.steps // 10), real_runner=True)
    sequential, concurrent = generation(args.latency)
    n = len(runs[0].steps)
    floor = statistics.median(r.round_trip_s for r in runs)

    def median_of(figure: Callable[[LoopTimes], float]) -> float:
        return statistics.median(figure(r) for r in runs)

    def span(times: Callable[[LoopTimes], list[float]], lo: int, hi: int) -> float:
        """Median over the trials of the mean of steps lo..hi."""
        return statistics.median(statistics.mean(times(r)[lo:hi]) for r in runs)

    print(f"agent loop, {n} steps, {args.code_kb} KiB of code per node, instant runner, zero-latency servers")
    print(
        f"load average before: {load} (2 cores); medians of {len(runs)} trials; "
        f"baseline = coder + feedback round trip: {ms(floor)} ms"
    )
    print()
    print(
        "| steps | step ms (mean) | checkpoint ms (mean) | overhead beyond round trips ms | step vs baseline |"
    )
    print("|---|---:|---:|---:|---:|")
    quarters = [(i * n // 4, (i + 1) * n // 4) for i in range(4)]
    for lo, hi in [*quarters, (0, n)]:
        step = span(lambda r: r.steps, lo, hi)
        ckpt = span(lambda r: r.checkpoints, lo, hi)
        label = f"{lo + 1}-{hi}" if (lo, hi) != (0, n) else f"all {n}"
        print(f"| {label} | {ms(step)} | {ms(ckpt)} | {ms(step - floor)} | {step / floor:.2f}x |")
    first, last = (span(lambda r: r.steps, lo, hi) for lo, hi in (quarters[0], quarters[-1]))
    print()
    print("| measurement | value |")
    print("|---|---|")
    print(f"| last quarter / first quarter step time | {last / first:.2f}x |")
    print(f"| agent thread CPU per step | {ms(median_of(lambda r: r.agent_cpu_s) / n)} ms |")
    print(
        f"| process CPU per step (agent + in-process servers) | {ms(median_of(lambda r: r.cpu_s) / n)} ms |"
    )
    print(f"| journal files at the end | {runs[0].journal_bytes / 1024:.0f} KiB |")
    print(
        f"| step with real `python` runs (--debug + full, trivial script) | {ms(statistics.mean(real.steps))} ms |"
    )
    print(f"| 4 candidates sequentially ({args.latency:.2f} s latency) | {sequential:.2f} s |")
    print(f"| 4 candidates concurrently ({args.latency:.2f} s latency) | {concurrent:.2f} s |")
    print(f"| sequential / concurrent ratio | {sequential / concurrent:.2f}x |")


if __name__ == "__main__":
    main()
