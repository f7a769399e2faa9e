#!/usr/bin/env python3
"""Thin shim: `python run_paper.py ...` runs the mle-world CLI (see README.md).

Reads argv; writes what the CLI writes.
"""

from mle_world.cli import run

if __name__ == "__main__":
    run()
