"""KTCE: Knowledge-grounded Tool Creation with Evolution, from "Automated Creation of Reusable and Diverse
Toolsets for Enhancing LLM Reasoning" (Ma et al., AAAI 2025), its two stages -- Knowledge-based Tool
Creation and Tool Evolutionary Search -- as in the released 1_tool_creation_toolset_initial.py and
2_tool_creation_toolset_optimize.py (zhymma/KTCE).

Per category (KTCE's field), with the creator (`suite.writer`, default the model):
Stage 1, knowledge-based tool creation: from `n_train` training problems (easy items) the creator abstracts a
  three-layer knowledge tree (topic -> concepts -> key points), then induces one atomic tool per key point
  (at most `max_tools`; smith's tool format; tools that do not parse or repeat another's code are dropped).
Stage 2, tool evolutionary search, for up to `max_iter` iterations:
  evaluate  on the training problems, the creator picks useful tools by number (<answer>[...]</answer>) and
            solves with them; each called tool counts a use (Freq) and, when the answer is right, a success
            (TSR); coverage TSC, accuracy TA and the released loss
            alpha*sum(1 - TSR/Freq, padded to 10 tools) + 1.25*(uncovered + 15*(1 - TA)*|P|) + gamma*max(0, n - 10)
            with alpha = max(1, |P|/n), gamma = |P|/n;
  rollback  a loss above the previous iteration's restores the previous toolset (stop after `max_rollbacks`
            in a row), and the next actions are told which actions went wrong;
  select    the creator removes tools given their usage statistics (at most `max_delete`);
  mutate    every tool used at least `mutate_min_freq` times with success rate <= `mutate_max_success` is
            shown with its failed calls and rewritten (refined) by the creator, with an experience note for its
            users; a rewrite that parses replaces it (Freq and TSR halved, floor 1, as released).
At inference the tool user picks tools from the final toolset by number and answers with them (and their
experience notes). Deviations: the released main loop runs select and mutate only (its crossover/add step is
defined but not called), and so does this module; a tool's validity is smith's schema/code agreement instead of
an LLM-written example call; knowledge points are not clustered across a field's problems.
"""

from __future__ import annotations

import json
import re
from typing import Any

from smith.pool.pool import normalise_code

from . import Context, Spend, called, key_of, parse_tool, tool_of, tool_row, use_episode

FORMAT = ("Reply with exactly one ```python block (the function, with any imports and helpers) and exactly one "
          "```json block (its OpenAI function schema: name, description, parameters). The schema's name must be "
          "the function's name and its parameters must match the function's signature.")
KNOWLEDGE = """Here are problems of one field, with their answers:

{problems}

Abstract the knowledge these problems need as a three-layer knowledge tree: one topic, its concepts, and the key \
points of each concept. Reply in this form:
Topic: <topic>
Concept: <concept>
- <key point>
- <key point>"""
TOOL = """Topic: {topic}
Key point: {point}

Example problems:
{problems}

Write one atomic, reusable Python tool that implements this key point, general enough for any problem of this \
field that needs it. It returns its result as a string. Use only the Python standard library.

""" + FORMAT
SELECT = """Given a question and some tools, decide which tools can be used to solve it. Do not solve the question.

Question: {question}

Tools:
{tools}

Reply with the numbers of the useful tools as <answer>[N1, N2]</answer>, or <answer>[]</answer> if none helps."""
DELETE = """You are given a set of tools and their usage statistics on the field's problems (coverage {tsc:.2f}, \
accuracy {ta:.2f}). Decide whether any tool should be removed because it will not be needed in future tasks; \
consider usage frequency, generality and versatility. Remove at most {max_delete} tools.{wrong}

{tools}

Reply with the numbers of the tools to remove as <answer>[N1, N2]</answer>, or <answer>[]</answer>."""
MODIFY = """This tool is used {freq} times with success rate {rate:.0f}%. Evolve it to improve its accuracy, \
flexibility and ease of use: pay attention to the failed calls below; keep its name and purpose.

Tool:
```python
{code}```

Failed calls:
{failures}

Reply with the evolved tool. """ + FORMAT + """ Then give advice for its users as \
<experience_list>...</experience_list>."""
EXPERIENCE = "Usage experience of the tools:\n{notes}"


def _problems(items: list[Any]) -> str:
    return "\n\n".join(f"Question: {it.question}\nAnswer: {it.answer}" for it in items)


def _listing(tools: list[dict[str, Any]], stats: bool = False) -> str:
    lines = []
    for n, t in enumerate(tools):
        line = f"No. {n}: {t['function_name']}: {t['schema'].get('description', '')}"
        if stats:
            rate = f"{100 * t['TSR'] / t['Freq']:.0f}%" if t["Freq"] else "no data"
            line += f"\nUsage frequency: {t['Freq']:g}, success rate: {rate}\n```python\n{t['code']}```"
        lines.append(line)
    return "\n\n".join(lines)


def _numbers(text: str, n: int) -> list[int]:
    """The tool numbers in a reply's <answer>[...]</answer>, valid and distinct, in order."""
    found = re.search(r"<answer>\s*\[(.*?)\]\s*</answer>", text, re.S)
    nums = [int(x) for x in re.findall(r"\d+", found.group(1))] if found else []
    return list(dict.fromkeys(i for i in nums if 0 <= i < n))


def _note(tools: list[dict[str, Any]]) -> str:
    notes = [f"{t['function_name']}: {t['experience']}" for t in tools if t.get("experience")]
    return EXPERIENCE.format(notes="\n".join(notes)) if notes else ""


def solve(ctx: Context, backend: Any, jobs: list[tuple[Any, Any, Spend]], toolsets: list[list[dict[str, Any]]],
          scope: str = "question") -> list[tuple[list[int], Any]]:
    """Pick tools by number, then answer with them (the released process_problem); per job: (picked, episode).
    `scope` names the budget the jobs' spends count against."""
    asking = [j for j, ts in enumerate(toolsets) if ts and ctx.allows(scope, jobs[j][2])]
    texts = ctx.chat(backend, [[{"role": "user", "content": SELECT.format(question=jobs[j][1].question, tools=_listing(
        toolsets[j]))}] for j in asking], [jobs[j][2] for j in asking], kind="use")
    picks = {j: _numbers(t, len(toolsets[j])) for j, t in zip(asking, texts, strict=True)}
    episodes = []
    for j, (cat, item, _) in enumerate(jobs):
        chosen = [toolsets[j][i] for i in picks.get(j, [])]
        episodes.append(use_episode(key_of(cat, item), item.question, [tool_of(t, cat.name) for t in chosen],
                                    _note(chosen)))
    ctx.play(backend, episodes, [sp for _, _, sp in jobs])
    return [(picks.get(j, []), ep) for j, ep in enumerate(episodes)]


def evaluate(ctx: Context, st: dict[str, Any]) -> dict[str, Any]:
    """One evaluation of a toolset on the training problems: usage statistics (accumulated, as released),
    coverage, accuracy and loss."""
    cat, tools, problems = st["cat"], st["tools"], st["train"]
    results = solve(ctx, ctx.writer, [(cat, it, st["spend"]) for it in problems], [tools] * len(problems), "build")
    uncovered, right = 0, 0
    for it, (picked, ep) in zip(problems, results, strict=True):
        ok = cat.score(ep.answer or "", it) >= 1.0
        right += ok
        used = {t.tool.code for t in called(ep)}
        hit = [tools[i] for i in picked if tools[i]["code"] in used]
        uncovered += not hit
        for t in hit:
            t["Freq"] += 1
            t["TSR"] += int(ok)
            if not ok:
                t.setdefault("failures", []).append({"question": it.question, "expected": it.answer,
                                                     "calls": ep.calls, "answer": ep.answer or ""})
    n, p = len(tools), len(problems)
    ta, tsc = right / p, (p - uncovered) / p
    q_tool = sum(1 - t["TSR"] / t["Freq"] if t["Freq"] else 1 for t in tools) + max(0, 10 - n)
    q_set = uncovered + 15 * (1 - ta) * p
    loss = max(1, p / max(1, n)) * q_tool + 1.25 * q_set + p / max(1, n) * max(0, n - 10)
    return {"TA": ta, "TSC": tsc, "loss": loss, "n": n}


def create(ctx: Context, st: dict[str, Any]) -> None:
    """Stage 1: knowledge tree, then one tool per key point."""
    text = ctx.chat(ctx.writer, [[{"role": "user", "content": KNOWLEDGE.format(problems=_problems(st["train"]))}]],
                    [st["spend"]])[0]
    topic = re.search(r"Topic:\s*(.+)", text)
    points = [p.strip() for p in re.findall(r"^\s*-\s*(.+)$", text, re.M)][: ctx.opts.max_tools]
    st["knowledge"] = {"topic": topic.group(1).strip() if topic else "", "key_points": points}
    texts = ctx.chat(ctx.writer, [[{"role": "user", "content": TOOL.format(
        topic=st["knowledge"]["topic"], point=p, problems=_problems(st["train"]))}] for p in points],
        [st["spend"]] * len(points))
    seen: set[str] = set()
    for text in texts:
        tool, _ = parse_tool(text, st["cat"].name)
        if tool is not None and normalise_code(tool.tool.code) not in seen:
            seen.add(normalise_code(tool.tool.code))
            st["tools"].append(tool_row(tool, Freq=0, TSR=0))


def act(ctx: Context, st: dict[str, Any], stats: dict[str, Any], wrong: str) -> dict[str, Any]:
    """Select (delete) then mutate (refine failing tools); returns what was done."""
    o, tools = ctx.opts, st["tools"]
    removed: list[str] = []
    if tools and ctx.allows("build", st["spend"]):
        reply = ctx.chat(ctx.writer, [[{"role": "user", "content": DELETE.format(
            tsc=stats["TSC"], ta=stats["TA"], max_delete=o.max_delete, wrong=wrong,
            tools=_listing(tools, stats=True))}]], [st["spend"]])[0]
        drop = _numbers(reply, len(tools))[: o.max_delete]
        removed = [tools[i]["function_name"] for i in drop]
        st["tools"] = tools = [t for i, t in enumerate(tools) if i not in drop]
    weak = [i for i, t in enumerate(tools) if t["Freq"] >= o.mutate_min_freq
            and t["TSR"] / t["Freq"] <= o.mutate_max_success and ctx.allows("build", st["spend"])]
    texts = ctx.chat(ctx.writer, [[{"role": "user", "content": MODIFY.format(
        freq=tools[i]["Freq"], rate=100 * tools[i]["TSR"] / tools[i]["Freq"], code=tools[i]["code"],
        failures="\n\n".join(f"Question: {f['question']}\nExpected answer: {f['expected']}\nCalls: "
                             f"{json.dumps(f['calls'])}\nAnswer given: {f['answer']}"
                             for f in tools[i].get("failures", [])[-10:]))}] for i in weak], [st["spend"]] * len(weak))
    mutated = []
    for i, text in zip(weak, texts, strict=True):
        tool, _ = parse_tool(text, st["cat"].name)
        exp = re.search(r"<experience_list>(.*?)</experience_list>", text, re.S)
        old = tools[i]
        if tool is not None:
            tools[i] = tool_row(tool, Freq=max(1, old["Freq"] / 2), TSR=max(1, old["TSR"] / 2))
            mutated.append(tool.tool.function_name)
        if exp:
            tools[i]["experience"] = exp.group(1).strip()
    return {"removed": removed, "mutated": mutated}


def evolve(ctx: Context, st: dict[str, Any]) -> None:
    """Stage 2: evaluate -> (rollback) -> select and mutate, up to max_iter iterations."""
    import copy

    o = ctx.opts
    rollbacks, wrong, previous = 0, "", None
    for it in range(o.max_iter + 1):
        stats = evaluate(ctx, st)
        step = {"iter": it, **stats}
        st["iterations"].append(step)
        if previous is not None and stats["loss"] > previous[1]["loss"]:
            rollbacks += 1
            step["rollback"] = True
            wrong = (f"\n\nPreviously removing {st['iterations'][-2]['actions']['removed']} and rewriting "
                     f"{st['iterations'][-2]['actions']['mutated']} lowered coverage or accuracy; avoid such actions.")
            st["tools"], stats = copy.deepcopy(previous[0]), previous[1]
            if rollbacks >= o.max_rollbacks:
                break
        else:
            rollbacks, wrong = 0, ""
        if it == o.max_iter or not ctx.allows("build", st["spend"]):
            break
        previous = (copy.deepcopy(st["tools"]), stats)
        step["actions"] = act(ctx, st, stats, wrong)


def run(ctx: Context) -> dict[str, Any]:
    for cat in ctx.cats:
        if cat.name in ctx.store:
            ctx.build_spend[cat.name] = Spend(**ctx.store.rows[cat.name]["spend"])
            continue
        st = {"cat": cat, "train": ctx.train_items(cat.name, ctx.opts.n_train), "tools": [], "iterations": [],
              "spend": ctx.build_spend.setdefault(cat.name, Spend())}
        create(ctx, st)
        evolve(ctx, st)
        ctx.store.add({"key": cat.name, "category": cat.name, "knowledge": st["knowledge"],
                       "iterations": st["iterations"], "spend": vars(st["spend"]).copy(),
                       "tools": [{k: v for k, v in t.items() if k != "failures"} for t in st["tools"]]})
    jobs, toolsets = [], []
    for cat in ctx.cats:
        for item in ctx.questions[cat.name]:
            if key_of(cat, item) in ctx.pending:
                jobs.append((cat, item, Spend()))
                toolsets.append(ctx.store.rows[cat.name]["tools"])
    for (cat, item, sp), ts, (picked, ep) in zip(jobs, toolsets, solve(ctx, ctx.user, jobs, toolsets), strict=True):
        ctx.record(cat, item, ep, sp, selected=[ts[i]["function_name"] for i in picked])
    stored = {c.name: ctx.store.rows[c.name] for c in ctx.cats}
    return {"tools": {n: [t["function_name"] for t in r["tools"]] for n, r in stored.items()},
            "evolution": {n: r["iterations"] for n, r in stored.items()},
            "knowledge": {n: r["knowledge"] for n, r in stored.items()}}
