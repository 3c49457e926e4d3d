"""Curiosity, recognition, efficiency (000_4c3492d641a25045.txt, section 3.1, equations 1-3).

C = P(hold), R = P(build | hold), E = P(win | build), S = P(win), G = P(win and not build); build rate
P(build) = C R. Because build implies hold, S = C R E + G holds exactly on any set of episodes (the
counts make it an identity in rationals: `identity_residual` is 0). Intervals are 95% Wilson intervals
over episodes (section 4.6). Every number is read from an episode record's `held`, `built` and `won`
fields, which the logs carry, so no replay is needed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from smith.evals.common import wilson

METRICS = ("C", "R", "E", "S", "G", "build_rate")


@dataclass(frozen=True)
class Counts:
    """LomekwiEpisode counts behind every metric of one model (or cell)."""

    n: int = 0
    hold: int = 0
    build: int = 0
    hold_build: int = 0
    win: int = 0
    win_build: int = 0
    win_no_build: int = 0

    def fractions(self) -> dict[str, tuple[int, int]]:
        """metric -> (successes, trials)."""
        return {"C": (self.hold, self.n), "R": (self.hold_build, self.hold), "E": (self.win_build, self.build),
                "S": (self.win, self.n), "G": (self.win_no_build, self.n), "build_rate": (self.build, self.n)}


def count(records: Iterable[dict[str, Any]], hold_field: str = "held") -> Counts:
    """Tally episodes. `hold_field` picks the hold event: "held" (both recipe types picked up, the
    paper's definition) or "dropped_both" (both recipe types ever dropped, what the released plotting
    code measured by replaying drops straight into the inventory)."""
    c = defaultdict(int)
    for r in records:
        hold, build, win = bool(r[hold_field]), bool(r["built"]), bool(r["won"])
        if build and not hold:
            raise ValueError(f"episode {r.get('key', '?')} built the machine without holding the recipe; "
                             "its record is inconsistent, re-import it")
        c["n"] += 1
        c["hold"] += hold
        c["build"] += build
        c["hold_build"] += hold and build
        c["win"] += win
        c["win_build"] += win and build
        c["win_no_build"] += win and not build
    return Counts(**c)


def _ratio(k: int, n: int) -> float:
    return k / n if n else float("nan")


def decompose(c: Counts) -> dict[str, Any]:
    """Flat summary: N, each metric's value, its Wilson interval `<m>_ci` and the raw counts."""
    out: dict[str, Any] = {"N": c.n}
    for name, (k, n) in c.fractions().items():
        out[name] = _ratio(k, n)
        out[f"{name}_ci"] = list(wilson(k, n))
    out["counts"] = asdict(c)
    return out


def cre_term(c: Counts) -> Fraction:
    """C R E as an exact rational; 0 when nothing was held or built (then P(win and build) = 0)."""
    if c.hold == 0 or c.build == 0:
        return Fraction(0)
    return Fraction(c.hold, c.n) * Fraction(c.hold_build, c.hold) * Fraction(c.win_build, c.build)


def identity_residual(c: Counts) -> Fraction:
    """S - (C R E + G), exactly; 0 on every consistent set of episodes (equation 3)."""
    if c.n == 0:
        return Fraction(0)
    return Fraction(c.win, c.n) - (cre_term(c) + Fraction(c.win_no_build, c.n))


def group(records: Iterable[dict[str, Any]], *fields: str) -> dict[tuple, list[dict[str, Any]]]:
    """Records grouped by the values of `fields` (e.g. "model", or "model", "n", "n_types")."""
    out: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[tuple(r[f] for f in fields)].append(r)
    return dict(out)


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per model and per (model, n, T) cell decompositions, plus the hold-on-drop variant per model."""
    models, cells = {}, {}
    for (model,), rows in sorted(group(records, "model").items()):
        c = count(rows)
        models[model] = decompose(c)
        models[model]["identity_residual"] = float(identity_residual(c))
        if all("dropped_both" in r for r in rows):
            d = count(rows, "dropped_both")
            models[model]["C_dropped"], models[model]["R_dropped"] = _ratio(d.hold, d.n), _ratio(d.hold_build, d.hold)
        cells[model] = {f"n{n}_T{t}": decompose(count(cell))
                        for (n, t), cell in sorted(group(rows, "n", "n_types").items())}
    return {"models": models, "cells": cells}
