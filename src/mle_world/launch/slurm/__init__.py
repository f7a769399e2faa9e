"""The Slurm backend: submitit job arrays, Slurm's own answers and limits, recorded intents and
the watchdog. Reads squeue/sacct/scontrol; writes status.json through launch.state.
"""
