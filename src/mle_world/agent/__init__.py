"""The in-container agent: an AIDE-faithful loop with a world-model gate, time budget and resume.

Reads a `TrialSpec` (spec.json); writes the trial dir's journal, events, best submission and result.
"""

from mle_world.agent.loop import Agent as Agent
from mle_world.agent.loop import Preempted as Preempted
from mle_world.agent.loop import Services as Services

__all__ = ["Agent", "Preempted", "Services"]
