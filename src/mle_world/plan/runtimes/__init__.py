"""The runtimes a trial's agent can be started in, one class each, and their registry (registry.py).

Reads and writes nothing on import.
"""
