"""MLE-World reproduction harness: plan, launch, run, grade and audit AIDE-style agent sweeps.

Reads nothing at import time; see `mle_world.cli` for the entry point.
"""

__version__ = "0.1.0"
