"""smith.rewards: one module per reward axis (SMITH paper section "Three reward axes"):
format (r_fmt), evaluation (r_eval), judge (r_judge) and use (r_correct with the efficiency eta)."""

from smith.rewards.use import efficiency

__all__ = ["efficiency"]
