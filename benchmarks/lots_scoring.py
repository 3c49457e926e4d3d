"""LOTS scoring: shared-prefix KV reuse against m+1 independent full passes, in one run.

For each request, the full-menu context and its m = 15 leave-one-out contexts (TGB re-execute deletion)
score the same frozen answer on the tiny model. The naive path runs each of the m+1 sequences as its own
full forward pass; the shared path runs the full sequence once and every intervened sequence only from
where it departs from it, on the cropped KV cache, in padded batches. Both include rendering and
tokenisation. Single-threaded torch so the comparison is stable on a shared CPU.

    python benchmarks/lots_scoring.py [--requests 10] [--repeats 3]

Last line: `lots scoring speedup=<naive/shared> max_abs_diff=<largest |I_shared - I_naive|>`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from smith.evals.lots import scoring, tgb
from smith.evals.lots.serving import build_messages
from smith.models.tiny import build_tiny_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=5, help="requests scored (one per family, cycling)")
    ap.add_argument("--repeats", type=int, default=2, help="timed repeats per path; the fastest counts")
    ap.add_argument("--tiny-dir", default=str(Path(tempfile.gettempdir()) / "smith-bench-tiny"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    path, _ = build_tiny_model(args.tiny_dir)
    scorer = scoring.LikelihoodScorer.from_pretrained(str(path))
    reg = tgb.make_registry(15)
    cases = []
    for i in range(args.requests):
        req = tgb.make_request(tgb.FAMILIES[i % len(tgb.FAMILIES)], i)
        full = build_messages(req, reg, reg.names, tgb.execute(req, reg.names, reg))
        removed = {t: build_messages(req, reg, reg.names, tgb.intervene(req, reg.names, reg, t)) for t in reg.names}
        cases.append((full, removed, f"The answer is {tgb.fmt(req.gold)}."))
    print(f"requests={len(cases)} tools={len(reg)} sequences/request={len(reg) + 1} "
          f"tokens/sequence~{len(scorer.encode(cases[0][0], cases[0][2])[0])}")

    # Interleave the two paths request by request and keep each one's fastest repeat, so a load spike
    # on a shared machine hits both alike instead of one whole phase.
    scoring.loo_scores(scorer, *cases[0])  # warm-up
    naive_s = shared_s = diff = 0.0
    for full, removed, answer in cases:
        best = {True: float("inf"), False: float("inf")}
        out = {}
        for _ in range(args.repeats):
            for shared in (False, True):
                t = time.perf_counter()
                out[shared] = scoring.loo_scores(scorer, full, removed, answer, shared_prefix=shared)
                best[shared] = min(best[shared], time.perf_counter() - t)
        naive_s, shared_s = naive_s + best[False], shared_s + best[True]
        diff = max(diff, max(abs(out[True][t] - out[False][t]) for t in removed))
    print(f"naive m+1 independent passes: {naive_s:.2f} s   shared-prefix batched: {shared_s:.2f} s")
    print(f"lots scoring speedup={naive_s / shared_s:.2f} max_abs_diff={diff:.2e}")


if __name__ == "__main__":
    main()
