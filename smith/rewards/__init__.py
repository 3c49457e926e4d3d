"""smith.rewards."""
