"""Released Lomekwi episode logs -> smith's episode records, and back (for round-trip checks).

The released dense sweep (shared/data/lomekwi_release, format in shared/data/README.md) stores one row
per episode: labels, actions, agent texts, the observation after each action, solved, totals, usage.
It does not store whether the machine was built, when, whether the recipe was held, or why the episode
stopped. `derive_facts` reads them from the observations alone (no replay):

- built / build_turn: the first observation saying the shards "fuse into" the machine; build_turn is the
  0-based index of that action among the executed actions (pickups included, unparseable turns are not
  in the released rows).
- held / hold_turn: both recipe types picked up, read from the pickup texts ("You pick up K and 1 S(s)").
  `dropped_both` (both recipe types ever dropped) is kept too: the released plotting code replayed the
  actions through a world that puts drops straight into the inventory, so its "holding" is this one.
- won / opened: doors reported open ("it fits. D opens."); checked against the row's `solved`.
- stop_reason, in the order the released loop tests them: "solved"; "out_of_budget" when the budgeted
  actions reached the budget; "no_progress" when the last 20 actions made no progress (the reference
  measure, `env.progress_key`, recomputed from the texts); "max_turns" when the turns reach the turn cap,
  the turns being the row's model calls (`usage.calls`, which counts the unparseable turns the row does
  not list) or, lacking them, its actions; otherwise "noop" (four unparseable replies in a row: the only
  other way the loop ends). Two cases the row cannot tell apart: a fourth no-op in a row on the very last
  turn reads as "max_turns" (the released loop says "noop"), and failed model calls are not in `calls`,
  so an episode that reached the cap through them reads as "noop".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from smith.evals.lomekwi.env import max_turns_for, progressed
from smith.evals.lomekwi.episode import NO_PROGRESS_WINDOW
from smith.evals.lomekwi.observed import Observed

RELEASED_USAGE = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
                  "calls")


def derive_facts(labels: dict[str, Any], n: int, budget: int | None, actions: list[list[str]],
                 observations: list[str], no_progress_window: int = NO_PROGRESS_WINDOW,
                 max_turns: int | None = None, calls: int | None = None) -> dict[str, Any]:
    """LomekwiEpisode facts from the recorded observations (see the module docstring for each rule); `calls` is
    the number of model calls the episode made (the released `usage.calls`), None when unknown."""
    if len(actions) != len(observations):
        raise ValueError(f"{len(actions)} actions but {len(observations)} observations; the row is truncated")
    seen = Observed()
    recipe = [labels["byproduct"]] * 2 if "byproduct" in labels else list(labels["recipe"])  # v1: two shards
    hold_turn = build_turn = None
    stale = 0
    for i, (act, obs) in enumerate(zip(actions, observations, strict=True)):
        before = seen.progress()
        seen.feed(act, obs)
        stale = 0 if progressed(before, seen.progress()) else stale + 1
        if hold_turn is None and len(recipe) == 2 and seen.holds(recipe):
            hold_turn = i
        if build_turn is None and seen.fused is not None:
            build_turn = i
    spent = sum(1 for a in actions if a[0] != "pickup")
    won = len(seen.opened) == n
    if max_turns is None and budget is not None:
        max_turns = max_turns_for(n, budget)
    if won:
        stop = "solved"
    elif budget is not None and spent >= budget:
        stop = "out_of_budget"
    elif stale >= no_progress_window:
        stop = "no_progress"
    elif max_turns is not None and max(len(actions), calls or 0) >= max_turns:
        stop = "max_turns"
    else:
        stop = "noop"
    return {"held": hold_turn is not None, "hold_turn": hold_turn, "built": build_turn is not None,
            "build_turn": build_turn, "dropped_both": len(recipe) == 2 and set(recipe) <= seen.dropped_types,
            "won": won, "opened": len(seen.opened), "total_actions": spent, "pickups": len(actions) - spent,
            "stop_reason": stop}


def episode_key(model: str, n: int, n_types: int, seed: int) -> str:
    return f"{model}|n{n}|T{n_types}|seed{seed}"


def import_row(row: dict[str, Any], source: str = "") -> dict[str, Any]:
    """One released row -> a smith episode record (the fields smith's own runs write)."""
    if row.get("error"):
        raise ValueError(f"row {row.get('relabel_seed')} of {source or 'the log'} is a failed episode: {row['error']}")
    if "recipe_mode" in row:
        raise ValueError(f"row {row.get('relabel_seed')} of {source or 'the log'} is a Deep Lomekwi row; import it "
                         "with suite.world=deep")
    facts = derive_facts(row["labels"], row["n"], row.get("budget"), row["actions"], row["obs"],
                         calls=(row.get("usage") or {}).get("calls"))
    if facts["won"] != bool(row["solved"]):
        raise ValueError(f"row {row['relabel_seed']} of {source or 'the log'}: observations open {facts['opened']} of "
                         f"{row['n']} doors but solved={row['solved']}; the row is inconsistent")
    return {
        "key": episode_key(row["model"], row["n"], row["n_types"], row["relabel_seed"]),
        "model": row["model"], "n": row["n"], "n_types": row["n_types"], "seed": row["relabel_seed"],
        "drop_seed": row["drop_seed"], "budget": row.get("budget"), "hint": row.get("hint", True),
        "scheme": "letter" if all(len(x) == 1 for x in _label_strings(row["labels"])) else None,
        "labels": row["labels"], "actions": row["actions"], "observations": row["obs"],
        "agent_texts": row.get("agent_texts", []), "unparsed": [], "turn_usage": [],
        "usage": dict(row.get("usage") or {}), "elapsed_s": row.get("elapsed_s"), "source": source, **facts,
    }


def _label_strings(labels: dict[str, Any]) -> list[str]:
    kinds = [labels["byproduct"]] if "byproduct" in labels else labels["types"]
    return [labels["door_base"], labels["key_base"], labels["machine"], *kinds]


def read_log(path: str | Path, convert: Callable[[dict[str, Any], str], dict[str, Any]] | None = None
             ) -> tuple[list[dict[str, Any]], int]:
    """Records of one episodes.jsonl and the number of failed (`error`) rows skipped; `convert` reads one row
    (default: the Lomekwi world's `import_row`; the deep world passes its own)."""
    convert = convert or import_row
    records, errors = [], 0
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("error"):
            errors += 1
            continue
        records.append(convert(row, str(path)))
    return records, errors


def find_logs(root: str | Path) -> list[Path]:
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"import_logs={root} does not exist; point it at a folder holding episodes.jsonl files")
    logs = sorted(root.rglob("episodes.jsonl")) if root.is_dir() else [root]
    if not logs:
        raise FileNotFoundError(f"no episodes.jsonl under {root}; expected e.g. runs/lomekwi/<run>/episodes.jsonl")
    return logs


def export_row(record: dict[str, Any]) -> dict[str, Any]:
    """A smith record in the released row format (what the released analysis scripts read)."""
    usage = {k: int(record.get("usage", {}).get(k, 0)) for k in RELEASED_USAGE}
    return {
        "model": record["model"], "n": record["n"], "n_types": record["n_types"], "hint": record["hint"],
        "variant": "v1" if record.get("world") == "v1" else "v3_pickup", "budget": record["budget"],
        "relabel_seed": record["seed"],
        "drop_seed": record["drop_seed"], "labels": record["labels"], "actions": record["actions"],
        "agent_texts": record["agent_texts"], "obs": record["observations"], "solved": record["won"],
        "total_actions": record["total_actions"], "pickups": record["pickups"], "usage": usage,
        "elapsed_s": record.get("elapsed_s") or 0.0,
    }
