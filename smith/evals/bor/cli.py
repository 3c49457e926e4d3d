"""`python -m smith.evals.bor`: the reference's `bor` command line (repantis-ai/bits-over-random, `bor/cli.py`).

Two subcommands, as there: `calc` prices one (N, R, K, observed) against a blind draw, and is also what runs
when the first argument is an option (`python -m smith.evals.bor --N ...`, the reference's `bor --N ...`);
`audit LOG` audits a JSONL or CSV retrieval log. Bad input is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from smith.evals.bor.auditing import COLLAPSE_P_RAND, audit
from smith.evals.bor.logs import from_csv, from_jsonl
from smith.evals.bor.metric import log_ratio_bits
from smith.pool.retrieval.chance import collapse_lambda, random_success_at_least_m

COLLAPSE_LAMBDA = 3.0  # lambda at which a blind draw's P_rand is about 1 - e^-3 = 0.95 (the reference's warning)


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (prog: error: ...), exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _calc(a: argparse.Namespace) -> None:
    if not 0 <= a.observed <= 1:
        raise ValueError(f"--observed is a success rate in [0, 1]; got {a.observed}")
    p = random_success_at_least_m(a.N, a.R, a.K, a.m)
    lam = collapse_lambda(a.N, a.R, a.K)
    print(f"N: {a.N}\nR: {a.R}\nK: {a.K}")
    print(f"Observed success: {a.observed:.4f}")
    print(f"Random baseline: {p:.4f}")
    print(f"Bits-over-Random: {log_ratio_bits(a.observed, p):.4f}")
    print(f"BoR ceiling: {log_ratio_bits(1.0, p):.4f}")
    print(f"lambda: {lam:.4f}")
    if p >= COLLAPSE_P_RAND:
        print("warning: random baseline is already near 1.0")
    if lam >= COLLAPSE_LAMBDA:
        print("warning: lambda is in the collapse zone")


def _mapping(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    pairs = [p.split("=", 1) for p in text.split(",")]
    if any(len(p) != 2 or not all(s.strip() for s in p) for p in pairs):
        raise ValueError(f"--map takes FIELD=COLUMN pairs separated by commas (N=pool_size,K=top_k); got {text!r}")
    return {k.strip(): v.strip() for k, v in pairs}


def _audit(a: argparse.Namespace) -> None:
    load = from_csv if a.csv else from_jsonl
    recs = load(a.log, mapping=_mapping(a.map), default_R=a.default_R, R_frac=a.R_frac, strict=a.strict)
    print(audit(recs, n_bootstrap=a.bootstrap, seed=a.seed).summary())
    if a.default_R is not None or a.R_frac is not None:
        print("note: rows without an R field used the --default-R / --R-frac estimate; treat BoR as an estimate.")


def build_parser() -> argparse.ArgumentParser:
    """The parser of both subcommands (the options and their names are the reference's)."""
    p = _Parser(prog="python -m smith.evals.bor", description="Bits-over-Random: success priced against a blind draw.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("calc", help="BoR of one observed success rate at pool size N, R relevant, depth K")
    s.add_argument("--N", type=int, required=True, help="pool (corpus) size")
    s.add_argument("--R", type=int, required=True, help="relevant items in the pool")
    s.add_argument("--K", type=int, required=True, help="items shown (depth)")
    s.add_argument("--observed", type=float, required=True, help="observed success rate, e.g. 0.82")
    s.add_argument("--m", type=int, default=1, help="success = at least m relevant items shown (default 1)")
    s.set_defaults(func=_calc)

    s = sub.add_parser("audit", help="audit a retrieval log (JSONL, or CSV with --csv) against blind draws")
    s.add_argument("log", help="the log file")
    s.add_argument("--csv", action="store_true", help="read the log as CSV with a header row")
    s.add_argument("--map", default=None, help="explicit columns, e.g. N=pool_size,K=top_k,hit=found,R=num_relevant")
    s.add_argument("--default-R", type=int, default=None, help="R for every row without an R field (an estimate)")
    s.add_argument("--R-frac", type=float, default=None, help="R = round(frac * N) for rows without R (an estimate)")
    s.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples for the 95%% interval")
    s.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    s.add_argument("--strict", action="store_true", help="fail on rows missing N, K or hit instead of skipping them")
    s.set_defaults(func=_audit)
    return p


def main(argv: list[str] | None = None) -> None:
    """Parse and run; a bad value, file or log row exits 2 with one line on stderr."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0].startswith("--") and argv[0] != "--help":
        argv = ["calc", *argv]  # the reference's calculator takes no subcommand name
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (OSError, ValueError) as e:
        parser.error(str(e))
