"""The flags of Kapso's MLE-bench runner that `run_paper.py` takes beside its own: config modes, coding agents,
the knowledge graph. Reads the parsed flags; writes nothing (the listing of agents is printed by the caller).

Kapso's `-m MLE_CONFIGS|MINIMAL` names a config mode; here a mode is a config file and `-m` otherwise names
one of that file's configurations. The harness has one coding agent and no knowledge graph, so `-d aide` and
`--no-kg` say what is always true here, and any other agent is refused.
"""

from __future__ import annotations

import argparse

from mle_world.errors import UserError

# Kapso's config modes → the packaged config that plays that part (its first configuration is the default).
MODES = {"MLE_CONFIGS": "paper.yaml", "MINIMAL": "demo.yaml"}
CODING_AGENTS = {
    "aide": "the AIDE-style agent (drafts, debugs and improves one script per step; its model is the coder endpoint's)"
}


def add_kapso_flags(group: argparse.ArgumentParser) -> None:
    group.add_argument(
        "-d",
        "--coding-agent",
        type=coding_agent,
        help="coding agent: aide, the only one (see --list-agents)",
    )
    group.add_argument(
        "--no-kg",
        action="store_true",
        help="no knowledge graph (Kapso's knowledge search): always so here, accepted for Kapso's commands",
    )


def coding_agent(name: str) -> str:
    if name not in CODING_AGENTS:
        # Kapso's examples use `-d aider` (Aider, another tool): say what runs here rather than "invalid choice".
        raise UserError(
            f"-d/--coding-agent: {name!r} is not available here; the one coding agent is "
            f"{', '.join(CODING_AGENTS)}, the AIDE-style agent (see --list-agents)"
        )
    return name


def agent_lines() -> list[str]:
    return [f"{name}\t{text}" for name, text in CODING_AGENTS.items()]
