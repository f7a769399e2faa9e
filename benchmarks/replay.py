"""Benchmark of `replay`: requests per second against a zero-latency world server, by concurrency.

Reads nothing; writes a scripted ungated sweep (tests/support/replaykit.py: trials of drafts and improves,
every candidate consulted and executed) and each run's replies in a temp directory, and prints a table.
Each concurrency replays the same requests into a fresh --out dir through the code `run_paper.py replay`
runs (sources, request building, the agent's WorldModel and EndpointClient, the fsynced reply store); the
ratio is against concurrency 1 measured in the same process. A last row replays into a finished --out dir:
every request found done (the resume path), nothing sent. The fake server runs in this process, so its
threads share the interpreter with the client's: the figures are the harness's floor, not a server's.
Run: python benchmarks/replay.py [--trials 10] [--steps 40] [--concurrency 1,2,4,8] [--latency 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))  # the tests' helpers

from fakeserver import FakeOpenAIServer  # noqa: E402
from replaykit import KnownAccuracyWorld, scripted_sweep  # noqa: E402

from mle_world import layout  # noqa: E402
from mle_world.agent import EndpointClient, MemorySink  # noqa: E402
from mle_world.records import EndpointSettings  # noqa: E402
from mle_world.replay import load_sources, plan_replay, run_plan  # noqa: E402


def replay_once(out: Path, url: str, concurrency: int, replay_dir: Path) -> tuple[float, float, int]:
    """(seconds building the requests, seconds sending and storing them, requests sent)."""
    settings = EndpointSettings(url=url, model="bench-world", max_concurrent=concurrency, timeout_s=60)
    client = EndpointClient("world", settings, MemorySink())
    try:
        started = time.perf_counter()
        sources = load_sources([out])
        plan = plan_replay(sources, client, "bench-world", settings.max_tokens, "pointwise", False)
        built = time.perf_counter()
        outcome = run_plan(
            plan,
            client,
            layout.ReplayFiles(replay_dir),
            mode="pointwise",
            concurrency=concurrency,
            inputs=[str(out)],
        )
        return built - started, time.perf_counter() - built, outcome.sent.sent
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=10, help="trials in the scripted sweep")
    parser.add_argument("--steps", type=int, default=40, help="candidates per trial (one request each)")
    parser.add_argument(
        "--concurrency", default="1,2,4,8", help="comma-separated concurrencies (first: baseline)"
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, help="server seconds per reply (0: zero-latency)"
    )
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        truth = scripted_sweep(root / "ungated", root / "data", trials=args.trials, steps=args.steps)
        with FakeOpenAIServer(
            "bench-world", default=KnownAccuracyWorld(truth, 0.7), latency_s=args.latency
        ) as server:
            rows = []
            for level in levels:
                rows.append(
                    (
                        f"concurrency {level}",
                        level,
                        *replay_once(root / "ungated", server.url, level, root / f"r{level}"),
                    )
                )
            done_dir = root / f"r{levels[0]}"
            rows.append(
                (
                    f"resume, all {len(truth)} done",
                    levels[0],
                    *replay_once(root / "ungated", server.url, levels[0], done_dir),
                )
            )
    n = len(truth)
    print(
        f"replay of {n} pointwise requests ({args.trials} trials x {args.steps} candidates), server latency {args.latency} s"
    )
    print()
    print("| run | concurrency | build requests s | send + store s | sent | requests/s | vs baseline |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    base = rows[0][4] / rows[0][3]
    for label, level, build_s, send_s, sent in rows:
        rate = sent / send_s if sent else 0.0
        ratio = f"{rate / base:.2f}x" if sent else "-"
        print(f"| {label} | {level} | {build_s:.3f} | {send_s:.3f} | {sent} | {rate:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
