"""Audit a retrieval log against blind-draw baselines: the reference's `audit()` (repantis-ai/bits-over-random).

Each logged query has its own pool size N, relevant count R, depth K and hit; the audit reports aggregate
P_obs, mean P_rand, BoR with its bootstrap interval, the mean BoR ceiling, mean lambda (K R / N) and the
share of queries in the collapse zone (P_rand >= 0.95, where a hit is mostly base rate), and one verdict,
checked in the reference's order:

1. COLLAPSE ZONE: half or more of the queries are in the zone, whatever BoR says;
2. UNDEFINED: BoR is NaN (no hits where chance is zero);
3. SELECTIVE (unbounded): BoR is +inf (hits where chance is zero);
4. AT/BELOW RANDOM: BoR <= 0;
5. WEAK: 0 < BoR < 1 (less than one doubling over chance);
6. SELECTIVE: BoR >= 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from smith.evals.bor.metric import bor_interval, log_ratio_bits
from smith.pool.retrieval.chance import as_count, collapse_lambda, random_success_at_least_m

COLLAPSE_P_RAND = 0.95  # a query whose blind draw succeeds this often is in the collapse zone
COLLAPSE_SHARE = 0.5  # the log is judged a collapse zone when this share of its queries are


@dataclass(frozen=True)
class QueryRecord:
    """One logged retrieval: N tools in the pool, R relevant, K shown, and whether >= m relevant were shown."""

    N: int
    R: int
    K: int
    hit: bool
    m: int = 1
    qid: str | None = None

    def __post_init__(self) -> None:
        for name in ("N", "R", "K", "m"):
            object.__setattr__(self, name, as_count(getattr(self, name), name))
        collapse_lambda(self.N, self.R, self.K)  # rejects impossible counts when the record is made

    @property
    def p_rand(self) -> float:
        """The chance of a hit for a blind draw of this query's K (at least m relevant)."""
        return random_success_at_least_m(self.N, self.R, self.K, self.m)

    @property
    def lam(self) -> float:
        """K R / N, the expected relevant tools in a blind draw (the reference's collapse dial)."""
        return collapse_lambda(self.N, self.R, self.K)


@dataclass(frozen=True)
class AuditResult:
    """The audit of a log: aggregate rates, BoR with its 95% interval, and the verdict with its reason."""

    n_queries: int
    p_obs: float
    p_rand_mean: float
    bor: float
    bor_ci: tuple[float, float]
    bor_ceiling_mean: float
    lambda_mean: float
    frac_collapse_zone: float
    verdict: str
    reason: str
    per_query: list[QueryRecord] = field(default_factory=list, repr=False)

    def summary(self) -> str:
        """The report the CLI prints."""
        lo, hi = self.bor_ci
        rows = [
            ("queries", f"{self.n_queries}"),
            ("observed success P_obs", f"{self.p_obs:.4f}"),
            ("random baseline P_rand", f"{self.p_rand_mean:.4f}"),
            ("Bits-over-Random", f"{self.bor:+.4f}  [95% CI {lo:+.4f}, {hi:+.4f}]"),
            ("BoR ceiling (mean)", f"{self.bor_ceiling_mean:.4f}"),
            ("lambda (mean)", f"{self.lambda_mean:.4f}"),
            ("collapse-zone queries", f"{self.frac_collapse_zone:.0%}"),
        ]
        return "\n".join([*(f"{k:<24}{v}" for k, v in rows), f"{self.verdict}: {self.reason}"])


def verdict(bor: float, p_obs: float, p_rand: float, frac_zone: float) -> tuple[str, str]:
    """(label, reason) for an audited log; the order of the checks is the module docstring's."""
    if frac_zone >= COLLAPSE_SHARE:
        return "COLLAPSE ZONE", (
            f"{frac_zone:.0%} of the queries have a blind-draw success of {COLLAPSE_P_RAND:.0%} or more; the observed "
            f"{p_obs:.0%} is mostly base rate (a blind draw scores {p_rand:.0%}). Show fewer tools."
        )
    if math.isnan(bor):
        return "UNDEFINED", f"observed {p_obs:.0%} against a chance of {p_rand:.0%}: the ratio says nothing."
    if bor == math.inf:
        return "SELECTIVE", f"observed {p_obs:.0%} where a blind draw cannot succeed: the bits are unbounded."
    if bor <= 0:
        return "AT/BELOW RANDOM", f"observed {p_obs:.0%} against a blind draw's {p_rand:.0%}: no selectivity."
    if bor < 1:
        return "WEAK", f"{bor:.2f} bits over random, less than one doubling over a blind draw."
    return "SELECTIVE", f"{bor:.2f} bits over random, {2**bor:.1f}x a blind draw at these depths."


def audit(records: Iterable[QueryRecord], n_bootstrap: int = 2000, seed: int = 0) -> AuditResult:
    """Audit logged retrievals: aggregate BoR (mean hit over mean P_rand) with a bootstrap over queries.

    The mean ceiling skips queries whose P_rand is 0 (their ceiling is +inf); it is +inf when all are.
    """
    recs = list(records)
    if not recs:
        raise ValueError("no query records to audit")
    hits = [float(r.hit) for r in recs]
    p_rands = [r.p_rand for r in recs]
    ci = bor_interval(hits, p_rands, n_resamples=n_bootstrap, seed=seed)
    p_obs, p_mean = sum(hits) / len(recs), sum(p_rands) / len(recs)
    ceilings = [c for c in (log_ratio_bits(1.0, p) for p in p_rands) if math.isfinite(c)]
    zone = sum(p >= COLLAPSE_P_RAND for p in p_rands) / len(recs)
    label, reason = verdict(ci["value"], p_obs, p_mean, zone)
    return AuditResult(
        n_queries=len(recs),
        p_obs=p_obs,
        p_rand_mean=p_mean,
        bor=ci["value"],
        bor_ci=(ci["lo"], ci["hi"]),
        bor_ceiling_mean=sum(ceilings) / len(ceilings) if ceilings else math.inf,
        lambda_mean=sum(r.lam for r in recs) / len(recs),
        frac_collapse_zone=zone,
        verdict=label,
        reason=reason,
        per_query=recs,
    )
