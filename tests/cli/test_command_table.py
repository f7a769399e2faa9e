"""The command table names a flags builder and a handler for every subcommand, imported when the command runs.

Reads nothing; writes nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from mle_world.cli.commands import COMMANDS


def test_every_command_loads_its_flags_and_handler() -> None:
    for name, command in COMMANDS.items():
        add_flags, run = command.load()
        parser = argparse.ArgumentParser(prog=name)
        add_flags(parser)
        assert callable(run), name


def test_the_audit_command_does_not_load_the_sweep_planner() -> None:
    code = (
        "import sys; from mle_world.cli.commands import COMMANDS; COMMANDS['audit'].load(); "
        "print(sorted(m for m in sys.modules if m.startswith(('mle_world.plan', 'mle_world.launch.launcher'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_flag_and_subcommand_says_what_it_does() -> None:
    # `--help` is the reference a user reads first: a bare `--backend {local,slurm}` hid its default.
    from mle_world.cli.options import Parser
    from mle_world.cli.sweep import build_run_parser

    parsers = {"run_paper.py": build_run_parser(tuple(COMMANDS))}
    for name, command in COMMANDS.items():
        add_flags, _ = command.load()
        parser = Parser(prog=name)
        add_flags(parser)
        assert parser.description, f"{name}: no description"
        parsers[name] = parser
    silent = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, parser in parsers.items()
        for action in parser._actions
        if not action.help
    ]
    assert silent == []
