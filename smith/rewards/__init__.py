"""smith.rewards: one module per reward axis (SMITH paper section "Three reward axes"):
format (r_fmt), evaluation (r_eval), judge (r_judge), use (r_correct with the efficiency eta) and tool (r_tool, the
reference code's tool-execution reward of use episodes)."""

from smith.rewards.use import efficiency

# The reward axes, in the order TRL's reward_funcs and `rewards.weights` see them: each stays its own column
# from rollout to advantage (docs/architecture.md, "Rewards"); a new axis is a module here plus its weight.
AXES = ("format", "evaluation", "judge", "use", "tool")

__all__ = ["AXES", "efficiency"]
