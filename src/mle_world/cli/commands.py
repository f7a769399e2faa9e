"""Command-line entry point: `run_paper.py` / `mle-world` — the command table, dispatch and exit codes.

Reads argv; writes nothing itself (each command's module does). User errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console

from mle_world.cli import estimate, results, setup
from mle_world.cli.options import PROG, Parser
from mle_world.cli.sweep import build_run_parser, cmd_run
from mle_world.errors import UserError


@dataclass(frozen=True)
class Command:
    """A subcommand: its flags and its handler (returns the exit code)."""

    add_flags: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Console], int]


COMMANDS: dict[str, Command] = {
    "status": Command(results.add_status_flags, results.cmd_status),
    "audit": Command(results.add_audit_flags, results.cmd_audit),
    "show": Command(results.add_show_flags, results.cmd_show),
    "grade": Command(results.add_grade_flags, results.cmd_grade),
    "estimate": Command(estimate.add_estimate_flags, estimate.cmd_estimate),
    "prepare": Command(setup.add_prepare_flags, setup.cmd_prepare),
    "check-endpoints": Command(setup.add_check_endpoints_flags, setup.cmd_check_endpoints),
}


def dispatch(name: str, rest: list[str], console: Console) -> int:
    command = COMMANDS[name]
    parser = Parser(prog=f"{PROG} {name}")
    command.add_flags(parser)
    return command.run(parser.parse_args(rest), console)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: user errors print one line and return 2; Ctrl-C returns 130."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Piped output (CI logs, `| tee`) gets wide tables instead of rich's 80-column default.
    width = None if sys.stdout.isatty() else 160
    console = Console(highlight=False, width=width)
    err = Console(stderr=True, highlight=False, width=width)
    try:
        if argv and argv[0] in COMMANDS:
            return dispatch(argv[0], argv[1:], console)
        args = build_run_parser(tuple(COMMANDS)).parse_args(argv)
        return cmd_run(args, argv, console, err)
    except UserError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        # A path the user gave that the OS refuses (name too long, permission, read-only file
        # system) reaches us from deep inside; it is bad input, not a crash: one line, exit 2.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"{PROG}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
