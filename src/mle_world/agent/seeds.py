"""Seeds derived from the trial seed: one per LLM request and one RNG per step and purpose.

Reads nothing and writes nothing; every value is a pure function of its arguments, so a rerun or a
resumed trial derives the same seeds (no RNG state has to survive a kill).
"""

from __future__ import annotations

import hashlib
import random


def request_seed(trial_seed: int, step: int, candidate: int, attempt: int, purpose: str) -> int:
    """The `seed` sent with one chat request (vLLM samples deterministically given it)."""
    text = f"{trial_seed}:{step}:{candidate}:{attempt}:{purpose}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF


def step_rng(trial_seed: int, step: int, purpose: str) -> random.Random:
    """A fresh RNG for one decision of one step (ungated choice, pairwise positions)."""
    return random.Random(f"{trial_seed}:{step}:{purpose}")
