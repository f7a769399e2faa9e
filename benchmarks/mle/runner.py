"""Kapso's entry point, kept for its commands: `PYTHONPATH=. python -m benchmarks.mle.runner -c ID -i N ...` is
`python run_paper.py -c ID -i N ...` (README: "Coming from Kapso's MLE-bench runner"). Not a benchmark.

Reads argv; writes what the CLI writes.
"""

from mle_world.cli import run

if __name__ == "__main__":
    run()
