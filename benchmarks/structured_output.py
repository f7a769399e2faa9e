"""Invalid world-model and review replies with and without constrained decoding, against a real server.

Reads the candidates of recorded trials (journal.json of each trial under the OUTPUT_DIRs given, e.g.
the demo's) and the task's prepared public data; sends each request once per setting to an
OpenAI-compatible server (the demo's llama.cpp by default), built exactly as the agent builds it
(`WorldModel.predict`, the reviewer's JSON fallback, with demo.yaml's world and feedback endpoint
settings), and prints a table: per kind and setting, the replies the agent could not use (a world
prediction that is invalid, as the audit's `invalid` column counts; a review that could not be parsed,
which makes the node buggy), their share and its ratio to `none`, and the mean latency.
Requests alternate between the settings with the same seed, so load and sampling fall on both alike.

Run: python benchmarks/structured_output.py [--url http://127.0.0.1:8011/v1] [--requests 20]
     [--setting json_object] [--data-dir DIR] OUTPUT_DIR...
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mle_world.agent.events import MemorySink
from mle_world.agent.journal import Node, load_checkpoint
from mle_world.agent.llm.client import EndpointClient
from mle_world.agent.preview import data_preview, task_description
from mle_world.agent.prompts import WorldContext
from mle_world.agent.review import Reviewer
from mle_world.agent.world import WorldModel
from mle_world.layout import TrialFiles
from mle_world.plan.config import load_paper_config, packaged_config
from mle_world.records import ROLES, EndpointSettings, Role, StructuredOutput, TrialSpec
from mle_world.storage import read_record


@dataclass(frozen=True)
class Candidate:
    """A recorded node with what the agent's world prompt showed beside it."""

    task: str
    public_dir: Path
    node: Node
    parent: Node | None
    best_metric: float | None
    lower_is_better: bool | None


@dataclass
class Tally:
    requests: int = 0
    invalid: int = 0
    latencies: list[float] = field(default_factory=list)


def candidates(output_dirs: list[Path], data_dir: Path) -> list[Candidate]:
    """Every node with code of the trials under the output dirs (generation order)."""
    found = []
    for output_dir in output_dirs:
        for journal in sorted(output_dir.glob("runs/*/*/journal.json")):
            files = TrialFiles(journal.parent)
            spec = read_record(files.spec, TrialSpec, "trial spec")
            checkpoint = load_checkpoint(journal)
            if checkpoint is None:
                continue
            by_id = {n.id: n for n in checkpoint.nodes}
            public = data_dir / spec.task / "prepared" / "public"
            for i, node in enumerate(checkpoint.nodes):
                if not node.code.strip():
                    continue
                good = [n for n in checkpoint.nodes[:i] if n.metric is not None and not n.is_buggy]
                lower = checkpoint.lower_is_better
                best = (min if lower else max)(good, key=lambda n: n.metric or 0.0) if good else None
                parent = by_id.get(node.parent_id) if node.parent_id else None
                found.append(Candidate(spec.task, public, node, parent, best.metric if best else None, lower))
    return found


def endpoint(url: str, role: Role, setting: StructuredOutput) -> EndpointSettings:
    """demo.yaml's settings of a role, at `url`, with `setting`."""
    demo = load_paper_config(packaged_config("demo.yaml"), lambda _task: True)
    return demo.endpoints[role].model_copy(update={"url": url, "structured_output": setting})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dirs", nargs="+", type=Path, metavar="OUTPUT_DIR")
    parser.add_argument("--url", default="http://127.0.0.1:8011/v1")
    parser.add_argument("--requests", type=int, default=20, help="requests per kind and setting")
    parser.add_argument("--setting", default="json_object", choices=["json_object", "json_schema"])
    parser.add_argument("--data-dir", type=Path, default=Path.home() / ".cache" / "mle-world" / "demo-data")
    parser.add_argument("--kinds", default="predict,review")
    args = parser.parse_args()
    pool = candidates(args.output_dirs, args.data_dir)
    if not pool:
        sys.exit(f"structured_output.py: no recorded node with code under {args.output_dirs}")
    executed = [c for c in pool if c.node.executed and c.node.term_out]
    settings: tuple[StructuredOutput, ...] = ("none", args.setting)
    clients = {
        (role, s): EndpointClient(role, endpoint(args.url, role, s), MemorySink())
        for role in ROLES
        if role != "coder"
        for s in settings
    }
    texts: dict[Path, tuple[str, str]] = {}

    def facts(c: Candidate) -> tuple[str, str]:
        if c.public_dir not in texts:
            texts[c.public_dir] = (task_description(c.public_dir), data_preview(c.public_dir))
        return texts[c.public_dir]

    def predict(c: Candidate, s: StructuredOutput, seed: int) -> bool:
        task, preview = facts(c)
        ctx = WorldContext(
            task=task,
            blind=False,
            data_preview=preview,
            reference=c.parent,
            best_metric=c.best_metric,
            lower_is_better=c.lower_is_better,
            has_best=c.best_metric is not None,
            debug_timeout_s=20.0,
            exec_timeout_s=60.0,
        )
        world = WorldModel(clients["world", s], temperature=1.0)
        return world.predict(ctx, c.node, timeout_s=600.0, seed=seed).valid

    def review(c: Candidate, s: StructuredOutput, seed: int) -> bool:
        reviewer = Reviewer(clients["feedback", s], facts(c)[0], use_tools=False)
        return reviewer.review(c.node, bool(c.node.has_submission), timeout_s=600.0, seed=seed).parsed

    kinds: dict[str, tuple[Callable[[Candidate, StructuredOutput, int], bool], list[Candidate]]] = {
        "predict": (predict, pool),
        "review": (review, executed),
    }
    tallies: dict[tuple[str, str], Tally] = {}
    print(
        f"{args.url}: {len(pool)} recorded candidates ({len(executed)} executed) from "
        f"{', '.join(map(str, args.output_dirs))}; {args.requests} requests per kind and setting",
        file=sys.stderr,
    )
    for kind in args.kinds.split(","):
        ask, source = kinds[kind]
        if not source:
            print(f"{kind}: no candidates", file=sys.stderr)
            continue
        for i in range(args.requests):
            c = source[i % len(source)]
            for s in settings if i % 2 == 0 else reversed(settings):
                tally = tallies.setdefault((kind, s), Tally())
                start = time.perf_counter()
                ok = ask(c, s, 1000 + i)
                tally.latencies.append(time.perf_counter() - start)
                tally.requests += 1
                tally.invalid += not ok
                # One line per request as it ends: a run cut short still says what it measured.
                state = "ok" if ok else "invalid"
                print(
                    f"{kind} {i + 1}/{args.requests} {s}: {state} {tally.latencies[-1]:.1f} s",
                    file=sys.stderr,
                )
    header = f"{'kind':<8} {'structured_output':<17} {'requests':>8} {'invalid':>7} {'share':>6} {'vs none':>7} {'mean s':>7} {'vs none':>7}"
    print(header)
    print("-" * len(header))
    for kind in args.kinds.split(","):
        base = tallies.get((kind, "none"))
        for s in settings:
            t = tallies.get((kind, s))
            if t is None or base is None:
                continue
            share, base_share = t.invalid / t.requests, base.invalid / base.requests
            mean, base_mean = statistics.fmean(t.latencies), statistics.fmean(base.latencies)
            ratio = f"{share / base_share:.2f}x" if base_share else "-"
            print(
                f"{kind:<8} {s:<17} {t.requests:>8} {t.invalid:>7} {share:>6.0%} {ratio:>7} "
                f"{mean:>7.1f} {mean / base_mean:>6.2f}x"
            )
    for client in clients.values():
        client.close()


if __name__ == "__main__":
    main()
