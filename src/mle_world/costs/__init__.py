"""Costs: the price table, each trial's priced usage, and the per-sweep summary."""
