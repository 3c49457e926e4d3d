"""Every catalog category admits one reusable tool: a hand-written `solve(question)` (tests/reference_tools/)
scores 1.0 on 50 hard-band items, run through the real strict sandbox (one `run` call per category)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import Limits
from smith.tasks import items, load_catalog, score

REFERENCE = Path(__file__).parent / "reference_tools"
NAMES = load_catalog().names
N_HARD = 50


def test_every_category_has_a_reference_tool():
    assert sorted(p.stem for p in REFERENCE.glob("*.py") if p.stem != "__init__") == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_reference_tool_solves_50_hard_items_in_the_sandbox(name, rg_cache, sandbox):
    code = (REFERENCE / f"{name}.py").read_text()
    hard = items(name, "hard", N_HARD, 0, rg_cache)
    results = sandbox.run(
        code, "solve", [{"question": it.question} for it in hard], Limits(timeout_s=20, memory_mb=1024)
    )
    failures = [
        (it.id, r.status, r.error, str(r.value)[:80])
        for it, r in zip(hard, results, strict=True)
        if r.status != "ok" or score(name, r.value, it) != 1.0
    ]
    assert not failures, failures[:3]
