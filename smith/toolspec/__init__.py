"""smith.toolspec."""
