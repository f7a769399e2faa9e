"""Command-line entry point: `run_paper.py` / `mle-world` — the command table, dispatch and exit codes.

Reads argv; writes nothing itself (each command's module does). User errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import select
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from rich.console import Console

from mle_world.cli.options import PROG, Parser
from mle_world.errors import UserError
from mle_world.escapes import printable_line


@dataclass(frozen=True)
class Command:
    """A subcommand: the module (under mle_world.cli) holding its flags and its handler (returns the exit
    code), imported when the command runs: `audit` does not load the sweep planner's configs."""

    module: str
    add_flags: str
    run: str

    def load(
        self,
    ) -> tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace, Console], int]]:
        module = importlib.import_module(f"mle_world.cli.{self.module}")
        return getattr(module, self.add_flags), getattr(module, self.run)


COMMANDS: dict[str, Command] = {
    "status": Command("results", "add_status_flags", "cmd_status"),
    "cancel": Command("results", "add_cancel_flags", "cmd_cancel"),
    "audit": Command("results", "add_audit_flags", "cmd_audit"),
    "show": Command("results", "add_show_flags", "cmd_show"),
    "replay": Command("replay", "add_replay_flags", "cmd_replay"),
    "grade": Command("results", "add_grade_flags", "cmd_grade"),
    "digest": Command("results", "add_digest_flags", "cmd_digest"),
    "estimate": Command("estimate", "add_estimate_flags", "cmd_estimate"),
    "prepare": Command("setup", "add_prepare_flags", "cmd_prepare"),
    "check-endpoints": Command("setup", "add_check_endpoints_flags", "cmd_check_endpoints"),
}


def dispatch(name: str, rest: list[str], console: Console) -> int:
    add_flags, run = COMMANDS[name].load()
    parser = Parser(prog=f"{PROG} {name}")
    add_flags(parser)
    args = parser.parse_args(rest)
    return run(args, console)


class _Console(Console):
    """rich's Console, but a reader that left the pipe ends the command as any filter ends (141, the
    SIGPIPE exit `main` returns) rather than with rich's SystemExit(1), which said "failed trials"
    to a `status | head` whose sweep had none."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone; if so, point stdout at /dev/null so the
    interpreter's final flush does not print a second BrokenPipeError."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        gone = any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False
    if gone:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return gone


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: user errors print one line and return 2; Ctrl-C returns 130."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Piped output (CI logs, `| tee`) gets wide tables instead of rich's 80-column default.
    width = None if sys.stdout.isatty() else 160
    console = _Console(highlight=False, width=width)
    err = _Console(stderr=True, highlight=False, width=width)
    try:
        if argv and argv[0] in COMMANDS:
            return dispatch(argv[0], argv[1:], console)
        if argv and not argv[0].startswith("-"):
            # The sweep takes no positional argument: a word first is a mistyped subcommand.
            raise UserError(
                f"unknown command '{argv[0]}' (choose from: {', '.join(COMMANDS)}; or sweep flags)"
            )
        from mle_world.cli.sweep import build_run_parser, cmd_run

        args = build_run_parser(tuple(COMMANDS)).parse_args(argv)
        return cmd_run(args, argv, console, err)
    except UserError as exc:
        # One line, inert: a message can quote a file name or text the trial's script chose.
        print(f"{PROG}: error: {printable_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        # `run_paper.py --dry-run | head`: the reader left; stop quietly like any filter (SIGPIPE's code).
        return 141
    except OSError as exc:
        # A path the user gave that the OS refuses (name too long, permission, read-only file
        # system) reaches us from deep inside; it is bad input, not a crash: one line, exit 2.
        where = f"{exc.filename}: " if exc.filename else ""
        print(printable_line(f"{PROG}: error: {where}{exc.strerror or exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


KEPT_TO_EXIT: list[object] = []
"""What a command built that only the process's exit needs to free (`run`): the audit's sweep and stamps
(freeing 100,000 trials' objects one by one was 0.5 s of CPU)."""


def run() -> NoReturn:
    """The process's entry point (run_paper.py, `python -m mle_world`, the mle-world script): `main`, exit.

    What the process built is frozen out of the cyclic GC before it exits: the interpreter's teardown
    otherwise collects and frees every object one by one (0.2 s of CPU after an audit of 10,000 trials,
    mostly matplotlib's, numpy's and pydantic's), memory the OS takes back at once. Teardown still
    flushes the streams, runs atexit handlers and joins threads; only objects left in reference cycles
    are not finalized, which Python never promises at exit. What a command put in `KEPT_TO_EXIT` is such
    an object: it is never freed one by one (the OS takes its memory back).
    """
    code = main()
    # A cycle: the teardown clears this module's names, but the frozen cycle keeps what the list holds.
    KEPT_TO_EXIT.append(KEPT_TO_EXIT)
    gc.freeze()
    sys.exit(code)
