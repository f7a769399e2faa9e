"""The local backend: a worker pool on the current allocation, and the orphans a killed launcher
left. Reads and writes status.json through launch.state.
"""
