"""Recognition in two steps: R1 and R2 with their intervals.

Decomposition: C = P(held r0 and r1 at once), R1 = P(part | held), R2 = P(axe | part), R = P(axe | held)
= R1 R2 (part implies held, axe implies part), E = P(win | axe), S = P(win).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from smith.evals.common import wilson

STEP_METRICS = ("R1", "R2")


def step_counts(records: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """R1 = (part among holders, holders), R2 = (axe among part makers, part makers); refuses records where a
    step was reached without the one before (R = R1 R2 rests on part => held and axe => part)."""
    for r in records:
        if (r["built_part"] and not r["held"]) or (r["built"] and not r["built_part"]):
            raise ValueError(f"episode {r.get('key', '?')} skipped a build step; its record is inconsistent")
    held = [r for r in records if r["held"]]
    part = [r for r in records if r["built_part"]]
    return {"R1": (sum(r["built_part"] for r in held), len(held)), "R2": (sum(r["built"] for r in part), len(part))}


def steps(records: list[dict[str, Any]]) -> dict[str, Any]:
    """R1 and R2 with 95% Wilson intervals and counts, and R - R1 R2 in rationals (0 by construction)."""
    out: dict[str, Any] = {}
    counts = step_counts(records)
    for name, (k, n) in counts.items():
        out[name] = k / n if n else float("nan")
        out[f"{name}_ci"] = list(wilson(k, n))
    (part, held), (axe, made) = counts["R1"], counts["R2"]
    r1r2 = Fraction(part, held) * Fraction(axe, made) if held and made else Fraction(0)
    out["step_residual"] = float(Fraction(axe, held) - r1r2) if held else 0.0
    out["step_counts"] = {k: list(v) for k, v in counts.items()}
    return out
