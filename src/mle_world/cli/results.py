"""Output-dir commands: `status`, `cancel` (a Slurm sweep's jobs), `grade` (re-grade and re-cost),
`audit` and `show`.

Reads an output dir; `cancel` runs squeue/scancel, `grade` writes grading reports and cost CSVs, `audit`
writes audit/, `show` a trial's HTML page. Prints.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from mle_world import layout
from mle_world.cli.checks import check_writable_dir, require_output_dir
from mle_world.cli.options import (
    default_config_path,
    default_data_dir,
    interval_seconds,
    path_arg,
    positive_int,
)
from mle_world.errors import UserError, not_a_dir
from mle_world.escapes import printable_line

if TYPE_CHECKING:
    from mle_world.records import LaunchRecord


def add_status_flags(p: argparse.ArgumentParser) -> None:
    p.description = "A sweep's progress: trials per state, running trials, failures with causes, ETA."
    p.add_argument("output_dir", type=path_arg, metavar="OUTPUT_DIR", help="a sweep's --output-dir")
    p.add_argument(
        "--watch", action="store_true", help="redraw in place until every trial finished (Ctrl-C leaves)"
    )
    p.add_argument("--interval", type=interval_seconds, help="with --watch: seconds between redraws (5)")
    p.add_argument(
        "--json", action="store_true", help="print the summary as one JSON object (every failed trial too)"
    )
    p.add_argument(
        "--costs",
        action="store_true",
        help="add the spend so far per role (tokens, GPU-hours, $) from every finished trial's cost CSV",
    )
    p.add_argument(
        "--trial",
        metavar="ID",
        help="one trial (its id, e.g. gated/aide/iris-species/seed34, or its dir): state, cause, logs' last lines",
    )
    p.add_argument("--lines", type=positive_int, help="with --trial: lines of each log (20)")


def add_cancel_flags(p: argparse.ArgumentParser) -> None:
    p.description = (
        "scancel every pending or running Slurm job of a sweep (and nothing else of yours); "
        "re-run the sweep's command with --retry-failed to resume them"
    )
    p.add_argument("output_dir", type=path_arg, metavar="OUTPUT_DIR", help="a sweep's --output-dir")


def cmd_cancel(args: argparse.Namespace, console: Console) -> int:
    from mle_world.launch.slurm.backend import SubmititSubmitter
    from mle_world.launch.slurm.intents import cancel_sweep
    from mle_world.launch.slurm.queries import check_sbatch_available

    output_dir = require_output_dir(args.output_dir, "cancel")
    check_sbatch_available()
    tasks = cancel_sweep(output_dir, SubmititSubmitter(layout.OutputFiles(output_dir).slurm))
    if not tasks:
        console.print(f"{output_dir}: no pending or running Slurm job", markup=False, soft_wrap=True)
        return 0
    arrays = sorted({t.job_id.split("_")[0] for t in tasks}, key=int)
    running = sum(t.state == "RUNNING" for t in tasks)
    console.print(
        f"cancelled {len(tasks)} task(s) ({running} running) of job(s) {', '.join(arrays)}; the running "
        "agents checkpoint on Slurm's SIGTERM. Resume with the sweep's own command plus --retry-failed",
        soft_wrap=True,
    )
    from mle_world.launch.next_command import rerun_command

    if command := rerun_command(output_dir):
        console.print(f"next: {printable_line(command)}", markup=False, highlight=False, soft_wrap=True)
    return 0


def add_audit_flags(p: argparse.ArgumentParser) -> None:
    p.description = "The paper's tables and plots over sweeps: audit/index.html, report.md, summary.csv and a page per trial."
    p.add_argument("output_dirs", type=path_arg, nargs="+", metavar="OUTPUT_DIR", help="sweeps' --output-dir")
    p.add_argument("--strict", action="store_true", help="exit 1 if anything is missing or invalid")
    p.add_argument(
        "--pad-missing",
        action="store_true",
        help="use every seed with a result for some task, its missing reports counted as failures",
    )
    p.add_argument(
        "--out",
        type=path_arg,
        help="the directory to write the audit into (default: the first OUTPUT_DIR/audit)",
    )
    p.add_argument("--no-trial-pages", action="store_true", help="write index.html without a page per trial")
    p.add_argument(
        "--no-plots",
        action="store_true",
        help="draw no PNG (matplotlib is not even imported); those drawn before from the same numbers are kept and shown",
    )


def add_show_flags(p: argparse.ArgumentParser) -> None:
    p.description = "One trial as an HTML page: search tree, code, outputs, predictions, budget timeline."
    p.add_argument(
        "trial_dir",
        type=path_arg,
        metavar="TRIAL_DIR",
        help="OUTPUT_DIR/runs/<configuration>/<task>_seed<seed>",
    )
    p.add_argument("--out", type=path_arg, help="where the page goes (default: TRIAL_DIR/trial.html)")


def add_grade_flags(p: argparse.ArgumentParser) -> None:
    p.description = "Re-grade a sweep's trials (grading reports) and rewrite its cost CSVs."
    p.add_argument("output_dir", type=path_arg, metavar="OUTPUT_DIR", help="a sweep's --output-dir")
    p.add_argument(
        "--data-dir",
        type=path_arg,
        help="prepared data with the answers (default: the sweep's, from launch.json; else ~/.cache/mle-bench/data)",
    )
    p.add_argument(
        "--competitions-dir",
        type=path_arg,
        action="append",
        default=[],
        help="extra local competitions (default: the sweep's, from launch.json)",
    )
    p.add_argument("--missing-only", action="store_true", help="keep existing reports")
    p.add_argument("--prices", type=path_arg, help="price table (default configs/prices.yaml)")


def cmd_status(args: argparse.Namespace, console: Console) -> int:
    from mle_world.cli.status_view import show_status, watch_status

    if not args.output_dir.is_dir():
        raise UserError(f"status: {args.output_dir}: {not_a_dir(args.output_dir)}")
    if sum((args.watch, args.json, args.trial is not None)) > 1:
        raise UserError("status: --watch, --json and --trial exclude each other")
    # A flag the chosen view ignores was most likely meant for another: said, not dropped.
    for flag, given, view, chosen in (
        ("--lines", args.lines is not None, "--trial", args.trial is not None),
        ("--interval", args.interval is not None, "--watch", args.watch),
    ):
        if given and not chosen:
            raise UserError(f"status: {flag} applies with {view} only")
    if args.costs and args.trial is not None:
        raise UserError("status: --costs is the sweep's spend: not with --trial")
    if args.trial is not None:
        from mle_world.cli.status_view import show_trial

        output_dir = require_output_dir(args.output_dir.absolute(), "status")
        return show_trial(output_dir, args.trial, args.lines or 20, console)
    if args.watch:
        interval = args.interval if args.interval is not None else 5.0
        return watch_status(args.output_dir.absolute(), console, interval, costs=args.costs)
    return show_status(args.output_dir.absolute(), console, as_json=args.json, costs=args.costs)


def recorded_launch(output_dir: Path) -> LaunchRecord | None:
    """The sweep's launch.json (None if unreadable): a regrade compares with the answers the trials
    were prepared from (--data-dir) and knows their local competitions (--competitions-dir)."""
    from mle_world.records import LaunchRecord
    from mle_world.storage import Unreadable, load_record

    record = load_record(layout.OutputFiles(output_dir).launch, LaunchRecord)
    return None if isinstance(record, Unreadable) else record


def cmd_grade(args: argparse.Namespace, console: Console) -> int:
    from mle_world.audit.digest_files import write_digests
    from mle_world.costs.prices import load_prices
    from mle_world.costs.summary import cost_output_dir
    from mle_world.grading.grader import grade_output_dir
    from mle_world.tasks.registry import load_registry

    require_output_dir(args.output_dir.absolute(), "grade")
    prices = load_prices(args.prices or default_config_path("prices.yaml"))
    launch = recorded_launch(args.output_dir)
    comps = args.competitions_dir or [Path(d) for d in (launch.competitions_dirs if launch else ())]
    registry = load_registry(comps)
    recorded = None if args.data_dir or launch is None else Path(launch.data_dir)
    data_dir = (args.data_dir or recorded or default_data_dir()).absolute()
    if not data_dir.is_dir():
        origin = (
            "--data-dir"
            if args.data_dir
            else "launch.json's data_dir"
            if recorded
            else "the default data dir"
        )
        hint = "" if args.data_dir else " (pass --data-dir)"
        raise UserError(f"grade: {origin} {data_dir}: {not_a_dir(data_dir)}{hint}")
    result = grade_output_dir(args.output_dir, data_dir, registry.local, force=not args.missing_only)
    for report in result.graded:
        score = "invalid" if not report.valid_submission else f"{report.score}"
        medal = (
            "gold"
            if report.gold_medal
            else "silver"
            if report.silver_medal
            else ("bronze" if report.bronze_medal else "-")
        )
        print(printable_line(f"{report.trial_id}\tscore={score}\tmedal={medal}"))
    for line in result.errors:
        print(f"error: {printable_line(line)}", file=sys.stderr)  # quotes grader errors
    cost_output_dir(args.output_dir, prices)
    # The regrade rewrote reports and cost CSVs, which the trials' digests no longer stand for.
    write_digests(args.output_dir)
    if result.unfinished:
        print(f"not graded, still running: {', '.join(result.unfinished)}", file=sys.stderr)
    print(
        f"graded {len(result.graded)}, kept {len(result.skipped)}, unfinished {len(result.unfinished)}, "
        f"errors {len(result.errors)}"
    )
    return 1 if result.errors else 0


def add_digest_flags(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Write every ended trial's audit digest again with this harness, and gather them per configuration: "
        "after an upgrade that changed how the audit parses (or for a sweep from before digests), a first "
        "audit otherwise reads every trial's files. Trials not ended are left as they are."
    )
    p.add_argument("output_dirs", type=path_arg, nargs="+", metavar="OUTPUT_DIR", help="sweeps' --output-dir")


def cmd_digest(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import Progress, TextColumn, TimeElapsedColumn

    from mle_world.audit.digest_files import write_digests

    dirs = [require_output_dir(d.absolute(), "digest") for d in args.output_dirs]
    for output_dir in dirs:
        # About 1 ms a trial (each trial's files read, its digest renamed into a big dir): a count, not silence.
        with Progress(
            TextColumn("[bold]digest"),
            TextColumn("{task.completed} trial(s)"),
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,
            transient=True,
        ) as bar:
            task = bar.add_task("digest", total=None)
            done = write_digests(output_dir, partial(bar.advance, task))
        line = (
            f"digest: {output_dir}: {done.written} trial digest(s) written, {done.current} current kept, "
            f"{done.not_ended} trial(s) not ended left as they were, {done.unreadable} unreadable; "
            f"{len(done.gathered)} configuration(s) gathered"
        )
        print(printable_line(line))
    return 0


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""What numpy's BLAS (OpenBLAS in numpy's wheels, MKL in some builds) reads its thread count from."""


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS started with one thread when numpy is first imported inside (a user's own setting stands,
    and the environment is as it was after): the audit's few small matrix products gain nothing from a
    thread per core, and OpenBLAS starting one per core cost 0.17 s of CPU at 10,000 reports on 2 cores
    (a login node has dozens). A numpy already imported keeps its threads."""
    unset = [] if "numpy" in sys.modules else [name for name in BLAS_THREADS if name not in os.environ]
    for name in unset:
        os.environ[name] = "1"
    try:
        yield
    finally:
        for name in unset:
            os.environ.pop(name, None)


def cmd_audit(args: argparse.Namespace, console: Console) -> int:
    from mle_world.audit import run_audit
    from mle_world.cli.commands import KEPT_TO_EXIT
    from mle_world.cli.display import RichDisplay

    dirs = [require_output_dir(d.absolute(), "audit") for d in args.output_dirs]
    out = args.out.absolute() if args.out else layout.OutputFiles(dirs[0]).audit
    flag = "--out" if args.out else "audit"
    try:
        check_writable_dir(out, flag)
    except UserError as exc:
        # Someone else's sweep (read-only to you) is audited into a dir of your own.
        raise UserError(
            f"{exc} (write the audit elsewhere with --out DIR)" if not args.out else str(exc)
        ) from None
    try:
        with one_blas_thread():
            return run_audit(
                dirs,
                strict=args.strict,
                pad_missing=args.pad_missing,
                display=RichDisplay(console),
                out_dir=args.out,
                keep=KEPT_TO_EXIT,
                trial_pages=not args.no_trial_pages,
                draw_plots=not args.no_plots,
            )
    except OSError as exc:
        # Where the OS refuses to let us write (a read-only or pseudo file system): name the flag.
        if exc.filename is None or not Path(exc.filename).absolute().is_relative_to(out):
            raise
        raise UserError(f"{flag} {out}: cannot write {exc.filename} ({exc.strerror or exc})") from None


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    from mle_world.audit.pages import sweep_index_href, write_trial_page
    from mle_world.audit.trialview import load_trial_view

    trial_dir = args.trial_dir.absolute()
    if not trial_dir.is_dir():
        raise UserError(f"show: {args.trial_dir}: {not_a_dir(args.trial_dir)}")
    if not any((trial_dir / name).is_file() for name in layout.TRIAL_RECORDS if name != layout.RESULT):
        raise UserError(
            f"show: {args.trial_dir}: not a trial dir (no journal.json, events.jsonl, status.json or spec.json)"
        )
    out = (args.out or trial_dir / "trial.html").absolute()
    if args.out:
        check_writable_dir(out.parent, "--out")
        if out.is_dir():
            raise UserError(f"--out {out}: is a directory (name the page's file)")
    try:
        write_trial_page(load_trial_view(trial_dir), out, index_href=sweep_index_href(trial_dir, out))
    except OSError as exc:
        hint = "" if args.out else " (write the page elsewhere with --out FILE)"
        raise UserError(f"show: cannot write {out}: {exc.strerror or exc}{hint}") from None
    console.print(out.as_uri(), markup=False, highlight=False, soft_wrap=True)
    return 0
