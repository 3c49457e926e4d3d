"""The episode protocol: one `LomekwiEpisode` plays every world (vault, v1, Deep Lomekwi's workshop) turn by turn
and records what every metric needs.

LomekwiEpisode protocol: the first parseable line of a reply acts; four unparseable replies in a row end the
episode ("noop"), a failed model call counting as one; it also ends when all doors are open ("solved"),
when the budgeted actions reach the budget ("out_of_budget"), after 20 executed actions without state
progress ("no_progress", measured as the reference code does: see `env.progress_key`), or at the turn cap
("max_turns", 2B + 2n + 80 as in the released sweep). Differential checks against the released runner
(same reply streams, failed calls included) give identical transcripts, actions, observations and stops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from smith.evals.lomekwi.env import Rules, budget_for, make_vault, progressed
from smith.evals.lomekwi.parse import extract_action
from smith.evals.lomekwi.world import World

NOOP_LIMIT = 4
NO_PROGRESS_WINDOW = 20


@dataclass
class LomekwiEpisode:
    """One episode's turn protocol and its record; the agent is whatever produces `reply` texts.

    `messages` is the chat the agent sees (system prompt first); `feed(text, usage)` consumes one reply
    and returns False once the episode is over; `feed("", api_error=...)` records a failed model call,
    which is a no-op turn like any unparseable reply (as in the released runner). `record()` carries
    everything a metric needs. `no_progress_window=None` turns the no-progress guard off (the released deep
    sweep); `max_turns=None` takes the world's released turn cap.
    """

    world: World
    drop_seed: int
    budget: int | None
    hint: bool = True
    max_turns: int | None = None
    no_progress_window: int | None = NO_PROGRESS_WINDOW
    system_prompt: str | None = None
    rules: Rules = field(default_factory=Rules)
    messages: list[dict[str, str]] = field(default_factory=list)
    actions: list[list[str]] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    agent_texts: list[str] = field(default_factory=list)
    turn_usage: list[dict[str, int]] = field(default_factory=list)
    unparsed: list[dict[str, Any]] = field(default_factory=list)
    hold_turn: int | None = None
    build_turn: int | None = None
    nudge_turn: int | None = None
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        self.vault = make_vault(self.world, self.drop_seed, self.hint, self.rules)
        self._labels = self.vault.label_set()
        if self.max_turns is None:
            self.max_turns = self.vault.turn_cap(self.budget or budget_for(self.world.n))
        if self.system_prompt is None:
            self.system_prompt = system_prompt_for(self.world)
        self.turns = 0
        self.api_errors = 0
        self._noops = 0
        self._stale = 0
        self.messages = [{"role": "system", "content": self.system_prompt},
                         {"role": "user", "content": self.vault.initial_observation(self.budget)}]

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    def spent(self) -> int:
        """Budgeted actions so far: everything but pickup."""
        return sum(1 for a in self.actions if a[0] != "pickup")

    def feed(self, text: str, usage: dict[str, int] | None = None, api_error: str | None = None) -> bool:
        if self.done:
            raise RuntimeError("episode is over; start a new LomekwiEpisode")
        t = self.turns
        self.turns += 1
        self.turn_usage.append(dict(usage or {}))
        if api_error is not None:
            self.api_errors += 1
            text = ""
        act = extract_action(text, self._labels, self.rules.parser, self.vault.verbs())
        if act is None:
            self._noops += 1
            self.unparsed.append({"turn": t, "text": text, **({"api_error": api_error} if api_error else {})})
            if self._noops >= NOOP_LIMIT:
                self.stop_reason = "noop"
            elif self.turns >= self.max_turns:
                self.stop_reason = "max_turns"
            else:
                self.messages += [{"role": "assistant", "content": text},
                                  {"role": "user", "content": self.vault.noop_message}]
            return not self.done
        self._noops = 0
        before = self.vault.progress()
        obs = self.vault.step(act)
        self.actions.append(list(act))
        self.observations.append(obs)
        self.agent_texts.append(text)
        if self.hold_turn is None and self.vault.holds_recipe():
            self.hold_turn = len(self.actions) - 1
        if self.build_turn is None and self.vault.has_machine:
            self.build_turn = len(self.actions) - 1
        self._stale = 0 if progressed(before, self.vault.progress()) else self._stale + 1
        if self.rules.stop_on_build and self.vault.has_machine:
            self.stop_reason, tail = "built", ""
        elif self.vault.solved():
            self.stop_reason, tail = "solved", "\n\n" + self.vault.done_text()
        elif self.budget is not None and self.spent() >= self.budget:
            self.stop_reason, tail = "out_of_budget", f"\n\nBudget exhausted ({self.budget} actions). You fail."
        elif self.no_progress_window is not None and self._stale >= self.no_progress_window:
            self.stop_reason, tail = "no_progress", ""
        else:
            nudge = self._nudge(t)  # the released loop decides the nudge before its turn cap, so the last turn counts
            if self.turns >= self.max_turns:
                self.stop_reason, tail = "max_turns", ""
            else:
                tail = "\n\n" + self.vault.status_line(self.budget, self.spent()) + nudge
        self.messages += [{"role": "assistant", "content": text}, {"role": "user", "content": obs + tail}]
        return not self.done

    def _nudge(self, turn: int) -> str:
        """The commitment nudge, once, on the first turn after which the recipe is held unbuilt."""
        nudge = self.rules.commit_nudge
        if not nudge or self.nudge_turn is not None or self.vault.has_machine or not self.vault.holds_recipe():
            return ""
        self.nudge_turn = turn
        return "\n\n" + nudge

    def record(self) -> dict[str, Any]:
        """The JSONL row: enough to recompute every metric without replay."""
        usage: dict[str, int] = {}
        for u in self.turn_usage:
            for k, v in u.items():
                usage[k] = usage.get(k, 0) + int(v)
        usage["calls"] = len(self.turn_usage) - self.api_errors  # successful model calls, as the release counts
        return {
            "n": self.world.n, "n_types": self.world.n_types, "world": self.world.variant, "budget": self.budget,
            "hint": self.hint, "drop_seed": self.drop_seed, "labels": self.world.labels(),
            "actions": self.actions, "observations": self.observations, "agent_texts": self.agent_texts,
            "unparsed": self.unparsed, "api_errors": self.api_errors, "turn_usage": self.turn_usage, "usage": usage,
            "held": self.hold_turn is not None, "hold_turn": self.hold_turn,
            "built": self.build_turn is not None, "build_turn": self.build_turn,
            "dropped_both": set(self.world.recipe) <= self.vault.dropped_types,
            "won": self.vault.solved(), "opened": len(self.vault.opened),
            "total_actions": self.spent(), "pickups": len(self.actions) - self.spent(),
            "turns": self.turns, "nudge_turn": self.nudge_turn, "stop_reason": self.stop_reason,
            **self.vault.facts(),
        }



def system_prompt_for(world: World) -> str:
    """The released system prompt of the world's variant."""
    return world.vault_class().system_prompt
