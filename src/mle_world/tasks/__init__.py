"""Tasks: the competition registry, local competition folders and data preparation."""
