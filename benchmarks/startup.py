"""A process's start: importing smith's trainer (torch, transformers, peft, trl) with the bytecode scripts/setup.sh
compiles into the venv, against the same import compiling every module from source, as it does where nothing has
written bytecode and nothing may (PYTHONDONTWRITEBYTECODE=1, common in containers, set where smith is developed): each
`train.py`, `eval.py` and test subprocess pays it. Rounds alternate the two; medians are compared. Last line:

    startup module=<m> compiled_s=<a> from_source_s=<b> speedup=<b/a>

    python benchmarks/startup.py [--module smith.train.run] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def seconds(module: str, env: dict[str, str]) -> float:
    """Wall seconds of a fresh interpreter importing `module`."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", default="smith.train.run")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    compiled = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryDirectory() as empty:
        # bytecode is looked up under the (empty) prefix only, and never written: every module compiles from source
        from_source = {**compiled, "PYTHONPYCACHEPREFIX": empty}
        compiled.pop("PYTHONPYCACHEPREFIX", None)
        times: dict[str, list[float]] = {"compiled": [], "from_source": []}
        for _ in range(a.rounds):
            times["compiled"].append(seconds(a.module, compiled))
            times["from_source"].append(seconds(a.module, from_source))
    c, s = (statistics.median(times[k]) for k in ("compiled", "from_source"))
    print(f"startup module={a.module} compiled_s={c:.2f} from_source_s={s:.2f} speedup={s / c:.2f}")


if __name__ == "__main__":
    main()
