"""AIDE's search policy: pick the parent of the next node (None means draft).

Reads the journal and the search settings; draws only from the seeded RNG passed in.
"""

from __future__ import annotations

import random

from mle_world.agent.journal import Journal, Node
from mle_world.records import SearchSettings, Stage


def select_parent(journal: Journal, search: SearchSettings, rng: random.Random) -> Node | None:
    """AIDE A2: draft until num_drafts drafts exist; then debug a random buggy leaf with
    probability debug_prob (depth <= max_debug_depth, as AIDE's `<=`); else improve the best
    good node, or draft if there is none.
    """
    if len(journal.draft_nodes) < search.num_drafts:
        return None
    if rng.random() < search.debug_prob:
        candidates = [
            n for n in journal.buggy_nodes if journal.is_leaf(n) and n.debug_depth <= search.max_debug_depth
        ]
        if candidates:
            return rng.choice(candidates)
    if not journal.good_nodes:
        return None
    return journal.best_node()


def stage_of(parent: Node | None) -> Stage:
    if parent is None:
        return "draft"
    return "debug" if parent.is_buggy else "improve"
