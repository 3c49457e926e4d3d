"""smith.train."""
