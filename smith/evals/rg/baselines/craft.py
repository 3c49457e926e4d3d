"""CRAFT: Customizing LLMs by Creating and Retrieving from Specialized Toolsets (Yuan et al., ICLR 2024,
arXiv:2309.17428), section 2.1 "Tool creation" and section 2.2 "Tool retrieval", as in the released
tab_and_math/construct_toolset.py and retrieve_tools.py.

Offline, the creator (`suite.writer`, default the model) builds one toolset from `n_train` training problems
(easy items) of every evaluated category:
  generation    solve the problem with a specific function (smith's tool format);
  validation    the creator calls it on its problem in the sandbox; a wrong answer drops it;
  abstraction   rewrite the specific solution into a generic tool (general names, values as parameters,
                a description of the problem type), then validate it the same way (the released code's
                step 4, "Validate Abstract Tool");
  deduplication tools are grouped by function name (deduplicate_by_name, argument counts ignored as in the
                released code); identical signatures collapse into the first, and among different signatures
                the creator picks the most comprehensive one (deduplicate_by_chatgpt).
At inference the tool user first names the generic functions it would need and their docstring (the
released retrieval template), then multi-view matching votes for tools: the docstring against tool
descriptions (top k_view.explanation), each expected name against tool names (top k_view.name) and the
question against the problems the tools came from (top k_view.query); the `top_k` most voted tools with at
least `min_votes` votes are offered (smith's use episode) and the user answers.
Deviations: the retriever is smith's MiniLM scorer (or BM25) instead of SimCSE-RoBERTa; the toolset comes
from a few training problems per category, not 500 sampled by diversity over epochs; tools are offered
through the tool-calling interface rather than as code in the prompt.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Any

from smith.pool import PoolEntry

from . import Context, Spend, called, key_of, parse_tool, solved, tool_of, tool_row, use_episode

# braces doubled: FORMAT ends the str.format templates below
FORMAT = """Reply with exactly one ```python block (the function, with any imports and helpers) and exactly one \
```json block (its OpenAI function schema: {{"name": ..., "description": ..., "parameters": {{"type": "object", \
"properties": ..., "required": [...]}}}}). The schema's name must be the function's name and its parameters must \
match the function's signature."""
GENERATE = """Write a Python function that solves the following question and returns its answer as a string, \
formatted exactly as the question asks. Use only the Python standard library.

Question: {question}

""" + FORMAT
ABSTRACT = """Rewrite and abstract the code solution of this question into a general tool function that applies to \
similar questions.

- The tool should solve questions of the same type, based on their common reasoning steps, without mentioning \
specific objects or values.
- Name the function and write its description after the core reasoning pattern and the data it takes.
- Replace specific values with parameters, so one tool serves many questions.

Question: {question}

Specific code solution:
```python
{code}```

""" + FORMAT
DEDUPLICATE = """Here are several tools with the same name. Which one is the most comprehensive and general? Reply \
with its number only.

{tools}"""
RETRIEVE = """Given a question, infer the core skill its solution needs, then infer generic tool functions that \
perform that skill, and finally infer the docstring of the tool functions.

- Generic tool function names are at most eight words, joined by underscores.
- The docstring summarizes the task goal; it is general and abstract, not specific to the question.
- End your answer with the lines 'The useful functions are: [...]' and 'The final answer is: ...', where [...] is a \
list of useful function names and ... is the docstring.

Question: {question}
Let's think step by step:"""


def create(ctx: Context, cats: list[Any]) -> None:
    """Generation -> validation -> abstraction -> validation for every training problem (batched); one row per
    problem in toolsets.jsonl, with what it cost."""
    jobs = []  # per problem: its state through the steps
    for cat in cats:
        for item in ctx.train_items(cat.name, ctx.opts.n_train):
            if f"{cat.name}/{item.id}" not in ctx.store:
                jobs.append({"cat": cat, "item": item, "tool": None, "stage": "generate", "spend": Spend()})

    def room(j: dict[str, Any]) -> bool:
        total = Spend()
        for other in jobs:
            if other["cat"] is j["cat"]:
                total += other["spend"]
        return ctx.allows("build", total)

    for stage, prompt in (("generate", GENERATE), ("abstract", ABSTRACT)):
        live = [j for j in jobs if j["stage"] == stage and room(j)]
        texts = ctx.chat(ctx.writer, [[{"role": "user", "content": prompt.format(
            question=j["item"].question, code=j["tool"].tool.code if j["tool"] else "")}] for j in live],
            [j["spend"] for j in live])
        for j, text in zip(live, texts, strict=True):
            j["tool"], _ = parse_tool(text, j["cat"].name)
        checked = [j for j in live if j["tool"] is not None]
        episodes = [use_episode(key_of(j["cat"], j["item"]), j["item"].question, [j["tool"]]) for j in checked]
        ctx.play(ctx.writer, episodes, [j["spend"] for j in checked])
        for j, ep in zip(checked, episodes, strict=True):
            if solved(j["cat"], ep, j["item"]):
                j["stage"] = "abstract" if stage == "generate" else "verified"
        for j in live:
            if j["stage"] == stage:
                j["stage"] = f"{stage} failed"
    for j in jobs:
        ctx.store.add({"key": f"{j['cat'].name}/{j['item'].id}", "category": j["cat"].name, "stage": j["stage"],
                       "question": j["item"].question, "spend": vars(j["spend"]).copy(),
                       "tool": tool_row(j["tool"]) if j["stage"] == "verified" else None})


def _head(tool: PoolEntry) -> str:
    """The function's signature line (extract_function_head)."""
    for node in ast.parse(tool.tool.code).body:
        if getattr(node, "name", None) == tool.tool.function_name:
            return ast.unparse(node).split("\n", 1)[0]
    return tool.tool.function_name


def deduplicate(ctx: Context, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """deduplicate_by_name: one tool per function name; the creator picks among different signatures."""
    if "dedup" in ctx.store:
        done = ctx.store.rows["dedup"]
        return [rows[i] for i in done["kept"]], done
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(r["tool"]["function_name"], []).append(i)
    kept, picks, spend = [], {}, Spend()
    for name, ix in groups.items():
        heads: dict[str, int] = {}
        for i in ix:  # identical signatures: the first stays
            heads.setdefault(_head(tool_of(rows[i]["tool"], rows[i]["category"])), i)
        distinct = list(heads.values())
        choice = 0
        if len(distinct) > 1 and ctx.allows("build", spend):
            listing = "\n\n".join(f"No. {n}:\n{rows[i]['tool']['code']}" for n, i in enumerate(distinct))
            reply = ctx.chat(ctx.writer, [[{"role": "user", "content": DEDUPLICATE.format(tools=listing)}]], [spend])[0]
            digits = re.findall(r"\d+", reply)
            choice = int(digits[0]) if digits and int(digits[0]) < len(distinct) else 0  # else the first
        kept.append(distinct[choice])
        picks[name] = {"candidates": len(ix), "signatures": len(distinct), "kept": rows[distinct[choice]]["key"]}
    done = {"key": "dedup", "kept": sorted(kept), "groups": picks, "spend": vars(spend).copy()}
    ctx.store.add(done)
    return [rows[i] for i in done["kept"]], done


def _plan(text: str) -> tuple[list[str], str]:
    """(expected function names, docstring) from a retrieval reply; empty when the reply has neither."""
    names = re.search(r"The useful functions? (?:are|is): \[(.*?)\]", text, re.S)
    doc = re.search(r"The final answer is: (.*)", text)
    listed = [n.strip().strip("'\"") for n in names.group(1).split(",")] if names else []
    return [n for n in listed if n], (doc.group(1).strip().strip("'\"") if doc else "")


def retrieve(ctx: Context, scorer: Any, toolset: list[dict[str, Any]], question: str, plan: tuple[list[str], str]
             ) -> list[int]:
    """Multi-view matching (retrieve_tool): each view votes for its top tools; the most voted ones win."""
    import numpy as np

    if not toolset:
        return []
    k = ctx.opts.k_view
    names, doc = plan
    views = [([doc] if doc else [], [r["tool"]["schema"].get("description", "") for r in toolset], k.explanation),
             ([n.replace("_", " ") for n in names], [r["tool"]["function_name"].replace("_", " ") for r in toolset],
              k.name),
             ([question], [r["question"] for r in toolset], k.query)]
    votes: Counter[int] = Counter()
    for queries, docs, top in views:
        if queries:
            for row in scorer.score(queries, docs):
                votes.update(int(i) for i in np.argsort(-row, kind="stable")[:top])
    return [i for i, n in votes.most_common(ctx.opts.top_k) if n >= ctx.opts.min_votes]


def run(ctx: Context) -> dict[str, Any]:
    from smith.pool.retrieval.scorers import make_scorer

    create(ctx, ctx.cats)
    problems = [r for r in ctx.store if r["key"] != "dedup" and r["category"] in {c.name for c in ctx.cats}]
    for r in problems:
        ctx.build_spend.setdefault(r["category"], Spend())
        ctx.build_spend[r["category"]] += Spend(**r["spend"])
    toolset, dedup = deduplicate(ctx, [r for r in problems if r["tool"] is not None])
    ctx.build_spend["craft:deduplication"] = Spend(**dedup["spend"])
    jobs = [(cat, item, Spend()) for cat in ctx.cats for item in ctx.questions[cat.name]
            if key_of(cat, item) in ctx.pending]
    asked = [j for j in jobs if ctx.allows("question", j[2])]
    texts = ctx.chat(ctx.user, [[{"role": "user", "content": RETRIEVE.format(question=it.question)}]
                                for _, it, _ in asked], [sp for _, _, sp in asked], kind="use")
    plans = {key_of(c, it): _plan(t) for (c, it, _), t in zip(asked, texts, strict=True)}
    scorer = make_scorer(ctx.opts.scorer)
    episodes, picked = [], []
    for cat, item, _ in jobs:
        idx = retrieve(ctx, scorer, toolset, item.question, plans.get(key_of(cat, item), ([], "")))
        picked.append([toolset[i]["tool"]["function_name"] for i in idx])
        episodes.append(use_episode(key_of(cat, item), item.question,
                                    [tool_of(toolset[i]["tool"], toolset[i]["category"]) for i in idx]))
    ctx.play(ctx.user, episodes, [sp for _, _, sp in jobs])
    for (cat, item, sp), ep, names in zip(jobs, episodes, picked, strict=True):
        ctx.record(cat, item, ep, sp, retrieved=names, used=[t.tool.function_name for t in called(ep)])
    stages = Counter(r["stage"] for r in problems)
    return {"tools": {c.name: [r["tool"]["function_name"] for r in toolset if r["category"] == c.name]
                      for c in ctx.cats},
            "toolset": [r["tool"]["function_name"] for r in toolset], "problems": dict(stages),
            "deduplication": {"before": sum(r["tool"] is not None for r in problems), "after": len(toolset),
                              "groups": dedup["groups"], "spend": dedup["spend"]}}
