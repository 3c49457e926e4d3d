"""smith.rollout."""
