"""smith.tasks."""
