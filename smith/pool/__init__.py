"""smith.pool."""
