"""`replay`: recorded candidates' world-model requests rebuilt from ungated trials and sent to a world model.

Reads the output dirs, the paper config's world endpoint settings, the key variable it names and the
endpoint; writes the --out dir (replies.jsonl, replay-report.md) and the --export file. Prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mle_world import layout
from mle_world.cli.checks import check_writable_dir, require_output_dir
from mle_world.cli.display import RichDisplay
from mle_world.cli.options import (
    PROG,
    EndpointFlags,
    csv_list,
    default_config_path,
    endpoint_overrides,
    non_empty,
    path_arg,
    positive_int,
)
from mle_world.errors import UserError
from mle_world.escapes import printable_line
from mle_world.records import LLMCallEvent, Role


def add_replay_flags(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Rebuild the world-model requests of an ungated sweep's recorded candidates (as the agent built them) "
        "and send them to a world model: its accuracy and calibration against what the executions gave."
    )
    p.add_argument(
        "output_dirs", nargs="+", type=path_arg, metavar="OUTPUT_DIR", help="ungated sweeps' --output-dir"
    )
    p.add_argument("--world-url", type=non_empty, required=True, help="the world endpoint to replay against")
    p.add_argument("--world-model", type=non_empty, help="served model id (default: discovered)")
    p.add_argument(
        "--config",
        type=path_arg,
        help="paper config with the world endpoint's settings (default configs/paper.yaml)",
    )
    p.add_argument("--configs", type=csv_list, help="comma-separated configurations to replay (default: all)")
    p.add_argument(
        "--mode",
        choices=("pointwise", "pairwise"),
        default="pointwise",
        help="pointwise: each consulted, executed candidate; pairwise: executed siblings (default pointwise)",
    )
    p.add_argument("--data-dir", type=path_arg, help="the sweeps' data dir (default: launch.json's)")
    p.add_argument(
        "--out", type=path_arg, help="where the replies and the report go (default OUTPUT_DIR/replay/MODEL)"
    )
    p.add_argument(
        "--export", type=path_arg, metavar="FILE", help="write the labelled sibling pairs as a JSONL corpus"
    )
    p.add_argument(
        "--concurrency", type=positive_int, help="requests in flight (default: the endpoint's max_concurrent)"
    )


def cmd_replay(args: argparse.Namespace, console: Console) -> int:
    from mle_world.agent import EndpointClient, MemorySink
    from mle_world.launch.endpoints import check_endpoints
    from mle_world.plan.config import load_paper_config
    from mle_world.replay import EndpointDown, load_sources, plan_replay, require_requests, run_plan
    from mle_world.tasks.registry import load_registry

    dirs = [require_output_dir(d.absolute(), "replay") for d in args.output_dirs]
    sources = load_sources(
        dirs, tuple(args.configs or ()), args.data_dir.absolute() if args.data_dir else None
    )
    require_requests(sources, args.mode)
    config = load_paper_config(args.config or default_config_path("paper.yaml"), load_registry().__contains__)
    models: dict[Role, str] = {"world": args.world_model} if args.world_model else {}
    flags = EndpointFlags(urls={"world": args.world_url}, models=models)
    settings = endpoint_overrides(config, flags)["world"]
    display = RichDisplay(console)
    probes = check_endpoints({"world": settings}, display, prefix="replay")
    model_id = settings.model or next(p.model for p in probes if p.ok and p.model)
    concurrency = args.concurrency or settings.max_concurrent
    # The client's own bound on requests in flight is the one --concurrency sets.
    settings = settings.model_copy(update={"model": model_id, "max_concurrent": concurrency})
    out = (
        layout.ReplayFiles(args.out.absolute()) if args.out else layout.OutputFiles(dirs[0]).replay(model_id)
    )
    check_writable_dir(out.dir, "--out" if args.out else "replay")
    if args.export is not None:
        export = args.export.absolute()
        if export.is_dir():
            raise UserError(f"--export {export}: is a directory (name the corpus file)")
        check_writable_dir(export.parent, "--export")
    calls = MemorySink()
    client = EndpointClient("world", settings, calls)
    try:
        plan = plan_replay(sources, client, model_id, settings.max_tokens, args.mode, args.export is not None)
        total = len(plan.points if args.mode == "pointwise" else plan.pairs)
        skipped = sources.gated + sources.without_world_model + sources.not_started
        display.say(
            f"replay: {total} {args.mode} request(s) from {len(sources.trials)} ungated trial(s) "
            f"({skipped} other trial(s) passed over) to {model_id} at {args.world_url}"
        )
        with Progress(
            TextColumn("[bold]replay"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,
        ) as bar:
            task = bar.add_task("replay", total=total)
            try:
                outcome = run_plan(
                    plan,
                    client,
                    out,
                    mode=args.mode,
                    concurrency=concurrency,
                    inputs=[str(d) for d in dirs],
                    export=args.export.absolute() if args.export else None,
                    progress=lambda done, _: bar.update(task, completed=done),
                )
            except EndpointDown as error:
                print(
                    printable_line(
                        f"{PROG}: error: replay: the world endpoint failed: {error}; the replies so far are in "
                        f"{out.replies}: rerun the same command to send the rest"
                    ),
                    file=sys.stderr,
                )
                return 1
    finally:
        client.close()
    from mle_world.replay.scoring import show_scores

    show_scores(outcome.scores, display)
    attempts = [e for e in calls.events if isinstance(e, LLMCallEvent) and e.model == model_id]
    prompt = sum(e.prompt_tokens or 0 for e in attempts)
    completion = sum(e.completion_tokens or 0 for e in attempts)
    retries = sum(e.outcome != "ok" for e in attempts)
    display.say(
        f"replay: {outcome.sent.sent} request(s) sent ({prompt} prompt and {completion} completion tokens, "
        f"{retries} failed attempt(s) retried), {outcome.sent.reused} answered by an earlier run; "
        + ", ".join(str(Path(p)) for p in outcome.written)
    )
    return 0
