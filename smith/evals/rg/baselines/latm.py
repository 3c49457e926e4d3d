"""LATM: Large Language Models as Tool Makers (Cai et al. 2023, arXiv:2305.17126), section 3.1 "Making new
tools and reuse them", as in the released toolmaker.ipynb / tooluser.ipynb.

Tool making, once per category, by the tool maker (`suite.writer`, default the model; a bigger writer is the
paper's LATM* - Qwen3-30B-A3B row):
  (i) tool proposing: from k = n_demos demonstrations (easy items) the maker writes a generic function (here
      smith's tool format: the build prompt, a ```python function + its ```json schema); a reply that does not
      parse is reported back ("Failed to ... Please fix it and try again") and the maker tries again;
 (ii) tool verification: the maker converts each of n_valid validation questions into a call of its tool
      (a use episode in the sandbox) and the answer is checked against the validation answer (the unit
      test's assert); failures go back to the maker with question, expected and produced answers, and the
      maker fixes the tool; at most max_attempts proposals;
(iii) tool wrapping: a verified tool is kept with its passing question -> call demonstrations.
Tool using: the tool user (the model) sees the wrapped tool (schema + up to wrap_examples demonstrations) and
answers each held-out question by calling it; a category whose tool never verified is answered without one.
Deviations: no dispatcher (section 3.2) -- rg names each question's category; the tool user calls the tool
through the tool-calling interface rather than writing Python that calls it.
"""

from __future__ import annotations

import json
from typing import Any

from smith.rollout.prompts import build_messages

from . import Context, Spend, called, key_of, parse_tool, solved, tool_of, tool_row, use_episode

PARSE_FAILED = ("Failed to read the tool: {error}. Please fix it and reply again with one ```python and one ```json "
                "block.")
VERIFY_FAILED = (
    "Failed to verify the tool: it answered {wrong} of {n} validation questions wrongly.\n\n{report}\n\n"
    "Please fix the tool and reply again with one ```python and one ```json block."
)
WRAPPED = "Here is how this tool was called on solved questions of this task:\n\n{cases}"


def _report(cases: list[tuple[Any, Any]]) -> str:
    lines = []
    for item, ep in cases:
        calls = "; ".join(f"{c.get('name')}({json.dumps(c.get('arguments'))}) -> "
                          f"{c.get('output', c.get('error', c.get('status')))}" for c in ep.calls) or "no tool call"
        lines.append(f"Question: {item.question}\nExpected answer: {item.answer}\nTool calls: {calls}\n"
                     f"Answer given: {ep.answer or ''}")
    return "\n\n".join(lines)


def _use_cases(cases: list[tuple[Any, Any]], limit: int) -> list[dict[str, Any]]:
    out = []
    for item, ep in cases:
        call = next(c for c in ep.calls if c.get("status") == "ok")
        out.append({"question": item.question, "call": {"name": call["name"], "arguments": call["arguments"]}})
    return out[:limit]


def make_tools(ctx: Context, cats: list[Any]) -> None:
    """Propose -> verify (-> fix) per category, all categories batched per step; rows go to toolsets.jsonl."""
    o = ctx.opts
    k, v = o.n_demos, o.n_valid
    state: dict[str, dict[str, Any]] = {}
    for cat in cats:
        examples = ctx.train_items(cat.name, k + v)
        state[cat.name] = {"cat": cat, "demos": examples[:k], "valid": examples[k:], "attempts": [],
                           "messages": build_messages(examples[:k]), "tool": None, "cases": []}
        ctx.build_spend[cat.name] = Spend()
    for _ in range(o.max_attempts):
        open_ = [st for st in state.values()
                 if st["tool"] is None and ctx.allows("build", ctx.build_spend[st["cat"].name])]
        if not open_:
            break
        texts = ctx.chat(ctx.writer, [st["messages"] for st in open_],
                         [ctx.build_spend[st["cat"].name] for st in open_])
        proposals = []
        for st, text in zip(open_, texts, strict=True):
            st["messages"] = [*st["messages"], {"role": "assistant", "content": text}]
            tool, error = parse_tool(text, st["cat"].name)
            if tool is None:
                st["attempts"].append({"stage": "propose", "error": error})
                st["messages"].append({"role": "user", "content": PARSE_FAILED.format(error=error)})
            else:
                proposals.append((st, tool))
        episodes, owners = [], []
        for st, tool in proposals:  # verification: the maker calls its tool on every validation question
            for item in st["valid"]:
                episodes.append(use_episode(key_of(st["cat"], item), item.question, [tool]))
                owners.append((st, item))
        ctx.play(ctx.writer, episodes, [ctx.build_spend[st["cat"].name] for st, _ in owners])
        for st, tool in proposals:
            runs = [(item, ep) for (owner, item), ep in zip(owners, episodes, strict=True) if owner is st]
            good = [(item, ep) for item, ep in runs if solved(st["cat"], ep, item)]
            bad = [(item, ep) for item, ep in runs if not solved(st["cat"], ep, item)]
            passed = len(good) >= o.verify_threshold * len(runs) and bool(runs)
            st["attempts"].append({"stage": "verify", "function_name": tool.tool.function_name, "passed": len(good),
                                   "of": len(runs), "verified": passed})
            if passed:
                st["tool"], st["cases"] = tool, good
            else:
                st["messages"].append({"role": "user", "content": VERIFY_FAILED.format(
                    wrong=len(bad), n=len(runs), report=_report(bad))})
    for name, st in state.items():
        tool = st["tool"]
        ctx.store.add({"key": name, "category": name, "verified": tool is not None, "attempts": st["attempts"],
                       "tool": tool_row(tool, use_cases=_use_cases(st["cases"], o.wrap_examples))
                       if tool is not None else None, "spend": vars(ctx.build_spend[name]).copy()})


def run(ctx: Context) -> dict[str, Any]:
    missing = [c for c in ctx.cats if c.name not in ctx.store]
    make_tools(ctx, missing)
    for c in ctx.cats:
        if c.name not in missing:  # resumed: what was spent when it was made
            ctx.build_spend[c.name] = Spend(**ctx.store.rows[c.name]["spend"])
    episodes, spends, owners = [], [], []
    for cat in ctx.cats:
        row = ctx.store.rows[cat.name]
        tools, note = [], ""
        if row["tool"] is not None:
            tools = [tool_of(row["tool"], cat.name)]
            note = WRAPPED.format(cases="\n\n".join(
                f"Question: {u['question']}\nCall: {json.dumps(u['call'])}" for u in row["tool"]["use_cases"]))
        for item in ctx.questions[cat.name]:
            if key_of(cat, item) in ctx.pending:
                episodes.append(use_episode(key_of(cat, item), item.question, tools, note))
                spends.append(Spend())
                owners.append((cat, item))
    ctx.play(ctx.user, episodes, spends)
    for (cat, item), ep, sp in zip(owners, episodes, spends, strict=True):
        ctx.record(cat, item, ep, sp, used_tool=bool(called(ep)))
    rows = {c.name: ctx.store.rows[c.name] for c in ctx.cats}
    return {"tools": {n: [r["tool"]["function_name"]] if r["tool"] else [] for n, r in rows.items()},
            "verified": sorted(n for n, r in rows.items() if r["verified"]),
            "rejected": sorted(n for n, r in rows.items() if not r["verified"]),
            "attempts": {n: len(r["attempts"]) for n, r in rows.items()}}
