"""Sandbox throughput: the same small tool N times, the reference way vs through Sandbox(isolation="strict").

(a) reference: one fresh `python -c` subprocess per call, no isolation (how the SMITH reference code grades a
    tool: one subprocess for each of the K=16 held-out questions);
(b) strict, as smith grades a build: the tool loaded once per `Sandbox.run`, then called on 16 questions;
(c) strict, one `Sandbox.run` per call (a use-episode tool call: a fresh, fully confined process each time).
All run sequentially from one thread. Also reported: p50/p99 latency of one call in (c).
Last line: `sandbox calls/s strict=<(b)> subprocess=<(a)> speedup=<(b)/(a)>`, with (c)'s ratio the line above.

    .venv/bin/python benchmarks/sandbox_throughput.py [--calls 1000] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from tqdm import tqdm

from sandbox import Limits, Sandbox

TOOL = '''
import math
def solve(question: str, k: int = 3) -> dict:
    """Count words, sum the digits, and take a small factorial: typical of a reasoning-gym helper."""
    digits = sum(int(c) for c in question if c.isdigit())
    return {"words": len(question.split()), "digits": digits, "fact": math.factorial(k), "ok": True}
'''
QUESTIONS = [{"question": f"What is {i} plus {i + 1} in words {i}?", "k": i % 7} for i in range(64)]


def reference_call(args: dict) -> dict:
    """One fresh interpreter per call, arguments as a JSON literal inside the source (json.loads keeps it valid)."""
    source = f"{TOOL}\nimport json\nprint(json.dumps(solve(**json.loads({json.dumps(args)!r}))))"
    out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=None, help="default: Sandbox's (two per CPU)")
    args = parser.parse_args()
    n = args.calls
    calls = [QUESTIONS[i % len(QUESTIONS)] for i in range(n)]

    t0 = time.perf_counter()
    expected = [reference_call(c) for c in tqdm(calls, desc="subprocess", unit="call")]
    subprocess_rate = n / (time.perf_counter() - t0)

    with Sandbox(isolation="strict", workers=args.workers) as sb:
        limits = Limits(timeout_s=5)
        workers = sb.size
        sb.run(TOOL, "solve", calls[:4], limits=limits)  # warm: the first fork of each worker pays page faults
        sb.quiesce()
        latencies = []
        got = []
        t0 = time.perf_counter()
        for c in tqdm(calls, desc="strict, one run per call", unit="call"):
            t = time.perf_counter()
            [res] = sb.run(TOOL, "solve", [c], limits=limits)
            latencies.append(time.perf_counter() - t)
            got.append(res.value)
        strict_rate = n / (time.perf_counter() - t0)
        assert got == expected, "the sandbox and the reference disagree"

        sb.quiesce()
        t0 = time.perf_counter()
        batched = []
        for i in tqdm(range(0, n, 16), desc="strict, runs of 16 calls", unit="run"):
            batched += [r.value for r in sb.run(TOOL, "solve", calls[i : i + 16], limits=limits)]
        batched_rate = n / (time.perf_counter() - t0)
        assert batched == expected

    ms = [x * 1000 for x in latencies]
    print(f"calls: {n}  workers: {workers}  cpus: {os.cpu_count()}  python: {sys.version.split()[0]}")
    print(f"subprocess (python -c per call, no isolation): {subprocess_rate:8.1f} calls/s")
    print(f"strict, one run per call:                      {strict_rate:8.1f} calls/s")
    print(f"strict, runs of 16 calls (build rollouts):     {batched_rate:8.1f} calls/s")
    print(f"latency of one call (strict, one run): p50={percentile(ms, 50):.2f} ms  p99={percentile(ms, 99):.2f} ms")
    print(f"one run per call: speedup={strict_rate / subprocess_rate:.1f}")
    print(
        f"sandbox calls/s strict={batched_rate:.1f} subprocess={subprocess_rate:.1f} "
        f"speedup={batched_rate / subprocess_rate:.1f}"
    )


if __name__ == "__main__":
    main()
