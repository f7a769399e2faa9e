"""How a generated script runs: the inner sandbox (jail, syscall filter), its workspace,
its process tree, disk and output limits. Reads and writes the trial's workspace only.
"""
