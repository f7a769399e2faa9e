"""`python -m mle_world`: the same CLI as run_paper.py.

Reads argv; writes what the chosen subcommand writes.
"""

from mle_world.cli import run

run()
