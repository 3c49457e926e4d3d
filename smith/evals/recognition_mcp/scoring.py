"""Counterfactual oracle scoring of all-decoy rollouts (paper section 4.5;
docs/architecture.md, "Facts from released code").

No oracle exists at run time. Afterwards each rollout is scored T times, candidate i in turn the
oracle: its first call at meter m_i would have returned the answer, at a cost of m_i plus a flat
surcharge per call made so far, m_i + s (order_i + 1). A correct manual submission at meter S wins
instead when S <= that cost (no surcharge on the manual path). Either wins only within the budget.

Per model: manual success, oracle discovery (recognition) and overall success are means over all
scored (rollout, oracle) rows, so overall = manual + discovery exactly. Their standard errors come
from a rollout-level bootstrap: whole rollouts are resampled, never the T correlated rows of one
rollout independently (section 4.6).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from smith.evals.common import bootstrap

INF = math.inf
METRICS = ("manual_success", "oracle_discovery", "overall_success")


@dataclass(frozen=True)
class Counterfactual:
    """One rollout scored with candidate `oracle` as the oracle."""

    oracle: int
    tool_cost: float  # m_i + surcharge (order_i + 1); inf when i was never called
    manual_cost: float  # meter at a correct submission; inf otherwise
    budget: int

    @property
    def cost(self) -> float:
        return min(self.tool_cost, self.manual_cost)

    @property
    def win(self) -> bool:
        return self.cost <= self.budget

    @property
    def via(self) -> str:
        """'manual' when the correct submission came first (ties go to it), 'tool', or 'none'."""
        if self.cost == INF:
            return "none"
        return "manual" if self.manual_cost <= self.tool_cost else "tool"


def first_calls(record: dict) -> dict[int, tuple[int, int]]:
    """Candidate index -> (meter, call order) of its first call; calls to unknown names are skipped
    (they still count in the order, since they cost a turn)."""
    index = {name: int(i) for i, name in record["labels"].items()}
    first: dict[int, tuple[int, int]] = {}
    for call in record["tool_calls"]:
        i = index.get(call["tool"])
        if i is not None and i not in first:
            first[i] = (call["meter_raw"], call["order"])
    return first


def score_rollout(record: dict, budget: int | None = None, surcharge: int | None = None) -> list[Counterfactual]:
    """The T counterfactual episodes of one rollout; budget and surcharge default to the logged ones."""
    budget = record["budget"] if budget is None else budget
    surcharge = record.get("surcharge", 0) if surcharge is None else surcharge
    sub = record.get("submit")
    manual = sub["meter_raw"] if sub and sub.get("correct") else INF
    first = first_calls(record)
    out = []
    for i in range(record["n"]):
        meter, order = first.get(i, (INF, -1))
        tool = meter + surcharge * (order + 1) if meter != INF else INF
        out.append(Counterfactual(i, tool, manual, budget))
    return out


def rollout_counts(record: dict, budget: int | None = None, surcharge: int | None = None) -> np.ndarray:
    """[manual wins, oracle wins, wins, T] of one rollout: the unit the bootstrap resamples."""
    rows = score_rollout(record, budget, surcharge)
    manual = sum(r.win and r.via == "manual" for r in rows)
    tool = sum(r.win and r.via == "tool" for r in rows)
    return np.array([manual, tool, manual + tool, len(rows)], dtype=float)


def _ratio(column: int):
    def statistic(a: np.ndarray) -> float:
        return float(a[:, column].sum() / a[:, 3].sum())

    return statistic


def summarize(records: Iterable[dict], budget: int | None = None, surcharge: int | None = None,
              n_boot: int = 2000, seed: int = 0) -> dict:
    """Metrics of one model (and condition) with rollout-level bootstrap standard errors."""
    records = list(records)
    if not records:
        raise ValueError("no rollouts to score; check the log directory or the sweep's cells")
    counts = np.stack([rollout_counts(r, budget, surcharge) for r in records])
    out: dict = {}
    for j, name in enumerate(METRICS):
        b = bootstrap(counts, statistic=_ratio(j), n_resamples=n_boot, seed=seed)
        out[name] = {"value": b["value"], "se": b["se"], "lo": b["lo"], "hi": b["hi"]}
    calls = [len(r["tool_calls"]) for r in records]
    out.update({
        "rollouts": len(records),
        "scored": int(counts[:, 3].sum()),
        "tool_calls_per_rollout": float(np.mean(calls)),
        "no_tool_rollouts": sum(c == 0 for c in calls),
        "manual_solves": sum(bool(r.get("submit") and r["submit"].get("correct")) for r in records),
        "stopped": dict(Counter(r["stopped_reason"] for r in records)),
    })
    return out


def scored_rows(record: dict, budget: int | None = None, surcharge: int | None = None) -> list[dict]:
    """The counterfactual rows of one rollout, flattened for scored.jsonl."""
    def finite(x: float) -> float | None:
        return None if x == INF else x

    return [{"key": record["key"], "model": record["model"], "condition": record["condition"], "n": record["n"],
             "difficulty": record["difficulty"], "oracle_i": r.oracle, "tool_cost": finite(r.tool_cost),
             "manual_cost": finite(r.manual_cost), "budget": r.budget, "win": r.win, "via": r.via}
            for r in score_rollout(record, budget, surcharge)]
