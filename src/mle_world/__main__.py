"""`python -m mle_world`: the same CLI as run_paper.py.

Reads argv; writes what the chosen subcommand writes.
"""

import sys

from mle_world.cli import main

sys.exit(main())
