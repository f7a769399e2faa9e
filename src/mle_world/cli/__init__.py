"""The command line: the only place that builds real implementations and prints.

`commands` holds the command table, `main` and the process's entry point `run`; `sweep`, `results` and
`setup` one command group each.
"""

from mle_world.cli.commands import main as main
from mle_world.cli.commands import run as run
