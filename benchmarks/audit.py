"""Benchmark: audit time and memory as the sweep grows (default 1,000, 10,000 and 100,000 grading reports).

Writes a synthetic two-regime output layout (launch.json, reports, cost CSVs, events) per size under a
temp dir (or --keep DIR, where a sweep already written for a size is reused) and prints, per size, a
table of whole-process runs (median wall, CPU and peak RSS of --repeats after a warm-up; each child's
own figures from `os.wait4`): `run_paper.py audit` (every table, summary.csv, report.md, plots and
index.html) into an emptied --out each run (a first audit: every file read, every PNG drawn; and with
--no-plots, nothing drawn), into the same --out each run (a re-audit: shown from the memo of the one
before, `audit/memo.py`) and into the same --out after one report was rewritten before each run (a
re-audit of a sweep that moved: the memo cannot serve, what the last audit parsed and the PNGs whose
numbers did not change are kept), against baselines measured in the same run: bare `python -c pass`, the imports alone (the
audit's modules and matplotlib's Agg figure), the stats alone (one `os.stat` of each input the first
audit's memo checks, its digest entries' files among them, read from a file: the check every audit makes that no input changed; with the
imports, the floor under a first audit), and, when MLE-bench is
installed (`MLEBENCH_VENV` set, its checkout in `MLEBENCH_DIR`, default ~/.local/share/mle-bench, as
scripts/install_mlebench.sh puts them), MLE-bench's own aggregator
(`experiments/aggregate_grading_reports.py`) over the same reports, run by the venv's python (its
report paths passed through a file: 100,000 of them exceed the kernel's argument limit). Then a
scaling table: each process's CPU per size and the ratio of each size to the one before. A ratio of two
processes that took turns run by run (the first audit and the aggregator; each audit and its --against
twin) is the median of their ratios round by round, the range of those ratios in brackets: a load that
drifts between rounds cancels out of each ratio, and the range shows how far one round can stray.

Sizes above 10,000 run max(1, repeats x 10,000 / size) times (one run of 100,000 per ten of 10,000).

--against CHECKOUT (repeatable) also runs the audits with another checkout's run_paper.py and src/ (e.g.
the commit before a change, as a git worktree), into audit dirs of their own, and prints a
before/after table per checkout: each audit's CPU from both, after / before, and both against the
aggregator. The checkouts take turns run by run (and the aggregator with the first audits, with plots and
without), so a load that drifts while they are measured (this machine is shared) falls on all of them alike.

Every child runs with bytecode, as a user's installed harness and the aggregator's site-packages do:
this machine sets PYTHONDONTWRITEBYTECODE=1 and a worktree has no __pycache__, so each audit process
would compile the harness again (0.07-0.1 s of CPU) while the aggregator's packages load theirs. The
children get PYTHONPYCACHEPREFIX in a temp dir of this run instead (bytecode written, for this checkout,
each --against and the aggregator alike), filled by each command's untimed warm-up run.

Each trial has the audit digest the harness writes beside its dir when it ends (`audit/digest.py`), and each
configuration the digests gathered when the launch ended (`runs/<configuration>/audit-digests.tsv`); with
--no-digests none does, as with trials of a harness before it (an --against checkout before it reads
the same sweep and ignores them). --steps K puts K agent steps (two LLM calls and an execution, three
lines) atop each events.jsonl, as real trials' hundreds of lines (the default, 0, has 5 predictions).
--journal-nodes N gives each trial what a real one leaves besides: status.json, result.json and a journal
of N nodes (script, plan, output and review: about 8 KB a node), so a trial page is drawn for each (the
default, 0, leaves trial dirs of events alone, and no page).

Usage: python benchmarks/audit.py [--sizes 1000,10000,100000] [--repeats 5] [--no-events] [--no-digests]
                                  [--steps K] [--journal-nodes N] [--keep DIR] [--against CHECKOUT ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests" / "support")]  # this checkout's, and the tests' helpers

from synthetic import TASKS, make_sweep  # noqa: E402

from mle_world.audit.digest import parsers_digest  # noqa: E402
from mle_world.audit.digest_lines import used_entry_files  # noqa: E402
from mle_world.grading.mlebench_version import describe  # noqa: E402

REPORT_SUFFIX = "_grading_report.json"
"""`layout.REPORT_SUFFIX` (this file runs the checkouts' code in child processes only)."""

MATPLOTLIB = "matplotlib.figure, matplotlib.backends.backend_agg"
"""What `audit.plots.new_figure` imports."""
FIRST = "run_paper.py audit into an empty --out (first audit: everything read and written, plots drawn)"
BARE = "run_paper.py audit --no-plots into an empty --out (first audit: no PNG drawn)"
AGAIN = "run_paper.py audit again (re-audit: unchanged inputs and plots kept)"
CHANGED = "run_paper.py audit again after one report was rewritten (re-audit of a sweep that moved)"
PASS = "python -c pass"
IMPORTS = "imports alone (the audit's modules and matplotlib's Agg figure; nothing read or drawn)"
STATS = "stats alone (one os.stat per input the audit checks, paths from a file; nothing else)"
STAT_EACH = (
    "import os, sys\n"
    "for path in open(sys.argv[1]).read().splitlines():\n"
    "    try:\n"
    "        os.stat(path)\n"
    "    except OSError:\n"
    "        pass"
)
"""The floor under any audit that checks each input for an edit: a stat a path, no more."""
RUN_WITH_LIST = (
    "import runpy, sys; script, listed, *rest = sys.argv[1:]; "
    "sys.argv = [script, '--grading-reports', *open(listed).read().splitlines(), *rest]; "
    "runpy.run_path(script, run_name='__main__')"
)
"""Runs the aggregator unchanged with its `--grading-reports` taken from a file, one path a line."""
AGGREGATOR = "=aggregator"
"""`audits`' key of the aggregator's runs by the process they took turns with (no checkout's tag)."""


@dataclass(frozen=True)
class Run:
    """Medians of one process's timed runs."""

    wall: float
    cpu: float
    rss_mb: float
    """Peak resident set size of the child (ru_maxrss), MB."""
    rounds: tuple[float, ...] = ()
    """CPU of each timed run, round by round (`interleaved`: the jobs of one call take turns, so run i of
    each ran in the same round, under about the same load)."""
    group: int = 0
    """Which `interleaved` call ran it: runs of one call share their rounds."""


def against(run: Run, reference: Run) -> str:
    """`run`'s CPU against `reference`'s: the median of their ratios round by round and the range of those
    ratios when both ran in the same rounds (the load that drifts between rounds cancels out of each
    ratio), else the ratio of their medians."""
    if not run.rounds or run.group != reference.group or len(run.rounds) != len(reference.rounds):
        return f"{run.cpu / reference.cpu:.2f}x"
    ratios = [a / b for a, b in zip(run.rounds, reference.rounds, strict=True)]
    middle = statistics.median(ratios)
    return f"{middle:.2f}x" if len(ratios) == 1 else f"{middle:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def sweep_of(
    root: Path, n_reports: int, events: bool, digests: bool, steps: int, journal_nodes: int = 0
) -> tuple[list[Path], float]:
    """The synthetic sweep of `n_reports` under `root` (reused when a complete one is there) and the
    seconds its generation took (0 when reused)."""
    done = root / "sweep.json"
    # Digests of other parsing code are ignored by the audit: a kept sweep's would measure none.
    made_by = parsers_digest() if digests else None
    want = {
        "reports": n_reports,
        "events": events,
        "digests": made_by,
        **({"gathered": True} if digests else {}),  # as the launch writes them when it ends
        **({"steps": steps} if steps else {}),
        **({"journal_nodes": journal_nodes} if journal_nodes else {}),
    }
    if done.is_file() and json.loads(done.read_text()).get("sweep") == want:
        return [Path(d) for d in json.loads(done.read_text())["dirs"]], 0.0
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    dirs = make_sweep(
        root, n_reports, events=events, digests=digests, steps=steps, journal_nodes=journal_nodes
    )
    done.write_text(json.dumps({"sweep": want, "dirs": [str(d) for d in dirs]}))
    return dirs, time.perf_counter() - t0


def mlebench_reports(dirs: list[Path], root: Path) -> tuple[Path, Path]:
    """The same reports in MLE-bench's run-group shape ({"competition_reports": [...]}), a file listing
    their paths and a split file."""
    out, paths = root / "mlebench-reports", []
    out.mkdir(exist_ok=True)
    for directory in dirs:
        for report in sorted(directory.glob("runs/*/*_grading_report.json")):
            target = out / f"{directory.name}.{report.parent.name}.{report.name}"
            if not target.is_file():
                target.write_text(json.dumps({"competition_reports": [json.loads(report.read_text())]}))
            paths.append(str(target))
    listed = root / "mlebench-reports.txt"
    listed.write_text("\n".join(paths) + "\n")
    split = root / "split.txt"
    split.write_text("\n".join(TASKS) + "\n")
    return listed, split


def rewrite(path: Path) -> None:
    """Replace `path` by a copy of itself, as the harness rewrites a file (a new inode, renamed over it)."""
    tmp = path.with_name(f".{path.name}.bench")
    shutil.copyfile(path, tmp)
    os.replace(tmp, path)


@dataclass(frozen=True)
class Job:
    """One command to time: its cwd and src/, a dir removed and an input rewritten before each run."""

    cmd: list[str]
    checkout: Path = REPO
    """The source tree the command runs from (its cwd, and its src/ first on the import path)."""
    fresh: Path | None = None
    """A dir removed before each run (untimed), e.g. the audit's output dir, so that nothing from an
    earlier run (what it parsed, the PNGs it keeps when their inputs are unchanged) is reused."""
    changed: Path | None = None
    """An input rewritten (untimed) before each run."""


def run_once(job: Job) -> tuple[float, float, float]:
    """Wall, CPU (user + sys of the child) and peak RSS (MB) of one run of `job`."""
    env = dict(os.environ)
    # This checkout's src/ too, not the installed package: run from a worktree, the benchmark would
    # otherwise time the code an editable install points at.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(job.checkout / "src"), env.get("PYTHONPATH")]))
    if job.fresh is not None:
        shutil.rmtree(job.fresh, ignore_errors=True)
    if job.changed is not None:
        rewrite(job.changed)
    t0 = time.perf_counter()
    child = subprocess.Popen(job.cmd, stdout=subprocess.DEVNULL, cwd=job.checkout, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        code = os.waitstatus_to_exitcode(status)
        raise SystemExit(f"benchmark: {' '.join(job.cmd[:4])} ... exited {code}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # KiB on Linux


def interleaved(jobs: dict[str, Job], repeats: int) -> dict[str, Run]:
    """Medians of `repeats` runs of each job after one warm-up each, the jobs taking turns run by run in
    a rotating order (a load that drifts during the measurement falls on all of them alike): name → Run."""
    for job in jobs.values():
        run_once(job)
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in jobs}
    names = list(jobs)
    for i in range(repeats):
        # Rotated each round: no job always follows the same one (whose written files and freed
        # memory the kernel may still be dealing with when the next starts).
        for name in names[i % len(names) :] + names[: i % len(names)]:
            figures[name].append(run_once(jobs[name]))
    group = next(GROUPS)
    return {
        name: Run(
            *(statistics.median(f[i] for f in runs) for i in range(3)), tuple(f[1] for f in runs), group
        )
        for name, runs in figures.items()
    }


GROUPS = itertools.count(1)
"""Numbers the `interleaved` calls (`Run.group`)."""


def whole_process(cmd: list[str], repeats: int) -> Run:
    """Medians of `repeats` runs of `cmd` (from this checkout) after one warm-up."""
    return interleaved({"": Job(cmd)}, repeats)[""]


def aggregator_command(dirs: list[Path], root: Path) -> tuple[str, list[str]] | None:
    """(table label, command) of MLE-bench's installed aggregator over the same reports, or None."""
    venv = os.environ.get("MLEBENCH_VENV")
    checkout = Path(os.environ.get("MLEBENCH_DIR") or Path.home() / ".local/share/mle-bench")
    script = checkout / "experiments" / "aggregate_grading_reports.py"
    if not venv or not script.is_file():
        return None
    # What the grading reports say of the installed MLE-bench: a checkout's commit, or the archive's from
    # the .git_archival.txt scripts/install_mlebench.sh writes (that checkout has no .git).
    source = describe({"file": str(checkout / "mlebench" / "__init__.py")})
    label = f"MLE-bench aggregate_grading_reports.py, {source} (MLEBENCH_VENV)"
    python = str(Path(venv) / "bin" / "python")
    listed, split = mlebench_reports(dirs, root)
    command = [python, "-c", RUN_WITH_LIST, str(script), str(listed), "--split", str(split)]
    return label, [*command, "--pad-missing"]


def versus(run: Run, aggregators: Sequence[Run]) -> str:
    """`against` the aggregator's run that took turns with `run` when one did, else the first."""
    same = [a for a in aggregators if a.group == run.group]
    return against(run, same[0] if same else aggregators[0])


def table(results: dict[str, Run], aggregators: Sequence[Run]) -> list[str]:
    """One size's rows: wall, CPU, peak RSS and CPU against python -c pass and the aggregator."""
    base = results[PASS].cpu
    lines = [
        "| process | wall s | CPU s | peak RSS MB | CPU vs python -c pass | CPU vs MLE-bench aggregator |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, run in results.items():
        ratio = versus(run, aggregators) if aggregators else "n/a (MLEBENCH_VENV not set)"
        lines.append(
            f"| {name} | {run.wall:.2f} | {run.cpu:.2f} | {run.rss_mb:.0f} | {run.cpu / base:.1f}x | {ratio} |"
        )
    return lines


def scaling(by_size: dict[int, dict[str, Run]]) -> list[str]:
    """Each process's CPU per size and each size's ratio to the one before (x size ratio)."""
    sizes = sorted(by_size)
    names = [n for n in by_size[sizes[0]] if n not in (PASS, IMPORTS) and all(n in by_size[s] for s in sizes)]
    head = [f"{n:,} CPU s" for n in sizes]
    ratios = [f"{b:,}/{a:,} (x{b / a:g} reports)" for a, b in zip(sizes, sizes[1:], strict=False)]
    lines = [
        f"| process | {' | '.join(head + ratios)} | peak RSS MB at {sizes[-1]:,} |",
        "|---|" + "---:|" * (len(head) + len(ratios) + 1),
    ]
    for name in names:
        cpus = [by_size[n][name].cpu for n in sizes]
        steps = [f"{b / a:.2f}x" for a, b in zip(cpus, cpus[1:], strict=False)]
        cells = [f"{c:.2f}" for c in cpus] + steps + [f"{by_size[sizes[-1]][name].rss_mb:.0f}"]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return lines


def commit_of(checkout: Path) -> str:
    """The short commit a checkout is at ('?' when git cannot tell)."""
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "?"


def before_after(
    after: dict[str, Run], before: dict[str, Run], checkout: Path, aggregators: Sequence[Run]
) -> list[str]:
    """Each audit's CPU and peak RSS from `checkout` (before) and this one (after), after / before, and
    both against the aggregator (`aggregators`: its runs, `versus`) when it ran."""
    label = f"{checkout} @{commit_of(checkout)}"
    lines = [
        f"| process | before CPU s ({label}) | after CPU s (@{commit_of(REPO)}) | after / before "
        "| before vs aggregator | after vs aggregator | before peak RSS MB | after peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, new in after.items():
        old = before.get(name)
        if old is None and name not in (FIRST, BARE, AGAIN, CHANGED):
            continue
        ratios = [versus(r, aggregators) if r and aggregators else "n/a" for r in (old, new)]
        if old is None:
            cells = [
                "n/a (no such flag)",
                f"{new.cpu:.2f}",
                "n/a",
                ratios[0],
                ratios[1],
                "n/a",
                f"{new.rss_mb:.0f}",
            ]
            lines.append(f"| {name} | {' | '.join(cells)} |")
            continue
        lines.append(
            f"| {name} | {old.cpu:.2f} | {new.cpu:.2f} | {against(new, old)} | {ratios[0]} | {ratios[1]} "
            f"| {old.rss_mb:.0f} | {new.rss_mb:.0f} |"
        )
    return lines


def has_no_plots(py: str, checkout: Path) -> bool:
    """Whether the checkout's `audit` has --no-plots."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    cmd = [py, str(checkout / "run_paper.py"), "audit", "--help"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=checkout, env=env)
    return "--no-plots" in done.stdout


def audits(
    py: str,
    dirs: list[Path],
    here: Path,
    repeats: int,
    checkouts: dict[str, Path],
    baseline: tuple[str, list[str]] | None,
) -> dict[str, dict[str, Run]]:
    """The four audits (first, first --no-plots, again, again after a change) of `dirs`, each run from
    every checkout (tag → checkout; each into dirs of `here` named after its tag), the checkouts taking
    turns run by run, and the aggregator (`baseline`: label, command) taking turns with the first audits
    with plots and without: tag → process → Run (the aggregator of the first audits' rounds under tag ""
    and its label, that of the --no-plots rounds under tag AGGREGATOR)."""
    runs: dict[str, dict[str, Run]] = {tag: {} for tag in checkouts}
    runs[AGGREGATOR] = {}
    report = min(dirs[0].glob(f"runs/*/*{REPORT_SUFFIX}"))
    for name in (FIRST, BARE, AGAIN, CHANGED):
        jobs: dict[str, Job] = {}
        for tag, checkout in checkouts.items():
            if name == BARE and not has_no_plots(py, checkout):
                continue  # a checkout from before `audit --no-plots`
            script = str(checkout / "run_paper.py")
            again = name in (AGAIN, CHANGED)
            out = here / f"{tag}{'audit' if again else 'fresh'}"
            cmd = [py, script, "audit", *map(str, dirs), "--out", str(out)]
            if name == BARE:
                cmd.append("--no-plots")
            changed = report if name == CHANGED else None
            jobs[tag] = Job(cmd, checkout, None if again else out, changed)
        if name in (FIRST, BARE) and baseline is not None:
            jobs[baseline[0]] = Job(baseline[1])
        for tag, run in interleaved(jobs, repeats).items():
            if baseline is not None and tag == baseline[0]:
                if name == FIRST:
                    runs[""][tag] = run  # the table's row of the aggregator
                runs[AGGREGATOR][name] = run
            else:
                runs[tag][name] = run
    return runs


def stat_paths(here: Path) -> Path | None:
    """A file of the inputs the last first audit (into `here`/fresh) stamped, a path a line (from its memo,
    `audit/memo.py`, and the digest entries it used): what any audit stats to check that nothing changed.
    None without a memo."""
    try:
        memo = json.loads((here / "fresh" / ".audit-memo.json").read_bytes())
    except (OSError, ValueError):
        return None
    paths = [*memo["heads"], *memo["inputs"]]
    for source, used in memo["digests"].items():  # the files of the digest entries it used
        paths += (f"{file[0]}/{file[1]}" for file in used_entry_files(source, used) if file is not None)
    listed = here / "inputs.txt"
    listed.write_text("".join(f"{path}\n" for path in paths))
    return listed


def main() -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000", help="report counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-events", action="store_true")
    parser.add_argument("--no-digests", action="store_true", help="trial dirs without audit digests")
    parser.add_argument("--steps", type=int, default=0, help="agent steps (3 lines) atop each events.jsonl")
    parser.add_argument(
        "--journal-nodes",
        type=int,
        default=0,
        help="status.json, result.json and a journal of N nodes a trial",
    )
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--against", type=Path, action="append", default=[], metavar="CHECKOUT")
    args = parser.parse_args()
    for against in args.against:
        if not (against / "run_paper.py").is_file():
            raise SystemExit(f"--against {against}: no run_paper.py there")
    sizes = sorted(int(s) for s in args.sizes.split(","))
    root = args.keep or Path(tempfile.mkdtemp(prefix="audit-bench-"))
    pycache = Path(tempfile.mkdtemp(prefix="audit-bench-pycache-"))
    os.environ["PYTHONPYCACHEPREFIX"] = str(pycache)  # the children's bytecode (see the docstring)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    py = sys.executable
    try:
        imports = "import mle_world.cli, mle_world.audit, mle_world.audit.pages, " + MATPLOTLIB
        fixed = {
            PASS: whole_process([py, "-c", "pass"], args.repeats),
            IMPORTS: whole_process([py, "-c", imports], args.repeats),
        }
        by_size: dict[int, dict[str, Run]] = {}
        for n in sizes:
            repeats = args.repeats if n <= 10_000 else max(1, args.repeats * 10_000 // n)
            here = root / f"n{n}"
            dirs, took = sweep_of(
                here, n, not args.no_events, not args.no_digests, args.steps, args.journal_nodes
            )
            made = f"generated in {took:.1f} s" if took else "reused"
            print(f"\n### {n:,} reports in {len(dirs)} output dirs ({made}); "
                  f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores); "
                  f"medians of {repeats} whole-process runs\n")  # fmt: skip
            checkouts = {"": REPO}
            for i, other in enumerate(args.against):
                checkouts[f"before{i or ''}-"] = other.resolve()
            baseline = aggregator_command(dirs, here)
            runs = audits(py, dirs, here, repeats, checkouts, baseline)
            mine = runs[""]
            results = dict(fixed)
            listed = stat_paths(here)
            if listed is not None:
                results[STATS] = whole_process([py, "-c", STAT_EACH, str(listed)], repeats)
            results.update((k, v) for k, v in mine.items() if not baseline or k != baseline[0])
            if baseline is not None:
                results[baseline[0]] = mine[baseline[0]]
            by_size[n] = results
            aggregators = list(runs[AGGREGATOR].values())  # the first audits' rounds' one first
            print("\n".join(table(results, aggregators)), flush=True)
            for tag, checkout in checkouts.items():
                if tag:
                    print(f"\n#### before ({checkout}) / after at {n:,} reports\n")
                    print("\n".join(before_after(results, runs[tag], checkout, aggregators)), flush=True)
        if len(sizes) > 1:
            print("\n### scaling: CPU s per size, and each size against the one before\n")
            print("\n".join(scaling(by_size)))
    finally:
        shutil.rmtree(pycache, ignore_errors=True)
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
