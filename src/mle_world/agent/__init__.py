"""The in-container agent: an AIDE-faithful loop with a world-model gate, time budget and resume.

Reads a `TrialSpec` (spec.json); writes the trial dir's journal, events, best submission and result.
The package imports nothing itself, so readers of its records (the audit reads `journal`) don't pay
for the loop's HTTP client: import `mle_world.agent.loop` for `Agent`.
"""
