"""LOTS over a trained smith tool pool: one task-specific space per reasoning-gym category.

The LOTS paper (003, Appendix A) notes that tool-growing methods such as SMITH enlarge the pool, and that
LOTS "could rank the tools such methods create". Here the pool is the registry and a category is a task.
Serving follows the TGB format (B.2): every served pool tool runs once in the sandbox on the question,
and the context lists one `<tool>: <output>` line per tool in pool order. The tools are independent, so
removing one only deletes its line (evidence-only deletion is exact re-execution). The space is the top-K
of the mean leave-one-out scores, with K chosen on fitting accuracy (C.2); accuracy and serving prompt
tokens of the space are reported against serving the whole pool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from smith.evals.lots import spaces
from smith.evals.lots.scoring import LikelihoodScorer, loo_scores
from smith.evals.lots.tgb import LINE_CAP
from smith.models.base import Message

SYSTEM = "Answer the question. The tools below were run on it; their outputs follow it. Reply with the answer only."


@dataclass
class PoolServed:
    """What `ChatAgent.answer` reads: the chat context of one question under one menu."""

    messages: list[Message]


def pool_registry(entries: Sequence[Any]) -> dict[str, Any]:
    """Callable names for pool entries in pool order; a repeated function name gets a numeric suffix."""
    out: dict[str, Any] = {}
    for e in entries:
        name, k = e.tool.function_name, 2
        while name in out:
            name, k = f"{e.tool.function_name}_{k}", k + 1
        out[name] = e
    return out


def _arguments(entry: Any, question: str) -> dict[str, Any]:
    """The question goes to the tool's first string parameter (SMITH tools take the question text)."""
    props = entry.tool.schema.get("parameters", {}).get("properties", {}) or {"question": {"type": "string"}}
    name = next((k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string"), next(iter(props)))
    return {name: question}


def run_pool_tools(sandbox: Any, registry: dict[str, Any], question: str, limits: Any = None) -> dict[str, str]:
    """Each pool tool once, in the sandbox, on the question: {name: output text or error}."""
    out = {}
    for name, entry in registry.items():
        result = sandbox.run(entry.tool.code, entry.tool.function_name, [_arguments(entry, question)], limits=limits)[0]
        out[name] = str(result.value) if result.status == "ok" else f"{result.status}: {result.error}"
    return out


def pool_messages(question: str, registry: dict[str, Any], menu: Sequence[str],
                  outputs: dict[str, str]) -> list[Message]:
    docs = "\n".join(f"- {n}: {registry[n].tool.description}" for n in menu) or "(no tools)"
    lines = [f"{n}: {outputs[n]}"[:LINE_CAP] for n in menu if n in outputs]
    user = f"Question: {question}\n\nTool outputs:\n" + ("\n".join(lines) if lines else "(none)")
    return [{"role": "system", "content": f"{SYSTEM}\n\nTools:\n{docs}"}, {"role": "user", "content": user}]


def fit_pool_space(agent: Any, scorer: LikelihoodScorer, pool: Any, category: str, fit_items: Sequence[Any],
                   eval_items: Sequence[Any], sandbox: Any, grade: Callable[[str, Any], float],
                   k_grid: Sequence[int] | None = None, limits: Any = None) -> dict[str, Any]:
    """Algorithm 1 on the pool for one category, then its space against the whole pool on `eval_items`.

    `agent` answers `PoolServed` contexts (`serving.ChatAgent`); `grade(answer, item)` is 1.0 when correct.
    """
    registry = pool_registry(list(pool))
    names = list(registry)
    outputs = {it.id: run_pool_tools(sandbox, registry, it.question, limits)
               for it in tqdm([*fit_items, *eval_items], desc=f"pool {category}: run tools", leave=False)}
    cache: dict[tuple[str, tuple[str, ...]], tuple[str, int, bool]] = {}

    def serve(items: Sequence[Any], menu: Sequence[str]) -> list[tuple[str, int, bool]]:
        menu = tuple(n for n in names if n in menu)
        todo = [it for it in items if (it.id, menu) not in cache]
        if todo:
            ctx = [pool_messages(it.question, registry, menu, outputs[it.id]) for it in todo]
            for it, c, (text, ptok) in zip(todo, ctx, agent.answer([PoolServed(c) for c in ctx]), strict=True):
                cache[(it.id, menu)] = (text, ptok or scorer.count_tokens(c), grade(text, it) >= 1.0)
        return [cache[(it.id, menu)] for it in items]

    def accuracy(items: Sequence[Any], menu: Sequence[str]) -> float:
        return sum(ok for _, _, ok in serve(items, menu)) / max(1, len(items))

    scores = []
    for it, (answer, _, _) in zip(fit_items, serve(fit_items, names), strict=True):
        full = pool_messages(it.question, registry, names, outputs[it.id])
        removed = {n: pool_messages(it.question, registry, names, {k: v for k, v in outputs[it.id].items() if k != n})
                   for n in names}
        scores.append(loo_scores(scorer, full, removed, answer) if answer.strip() else {})
    agg = spaces.aggregate(scores)
    grid = sorted({min(k, len(names)) for k in (k_grid or range(1, len(names) + 1))})
    fit_acc = {k: accuracy(fit_items, spaces.top_k(agg, k)) for k in grid}
    k = spaces.select_budget(fit_acc)
    space = spaces.top_k(agg, k)
    result = {"category": category, "k": k, "space": space, "scores": agg, "fit_accuracy": fit_acc}
    for label, menu in (("whole_pool", names), ("lots", space)):
        rows = serve(eval_items, menu)
        result[label] = {"accuracy": sum(ok for _, _, ok in rows) / max(1, len(rows)),
                         "prompt_tokens": sum(t for _, t, _ in rows) / max(1, len(rows)), "tools": len(menu)}
    return result
