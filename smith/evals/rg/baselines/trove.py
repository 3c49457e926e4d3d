"""TroVE: Inducing Verifiable and Efficient Toolboxes for Solving Programmatic Tasks (Wang, Fried & Neubig,
ICML 2024, arXiv:2401.12869), section 3 "TroVE" -- using and growing the toolbox, selection by execution
agreement, periodic toolbox trimming -- as in the released run_trove.py and utils/select.py.

Online, one stream per category (the paper keeps one toolbox per dataset), starting from an empty toolbox;
for each question in turn the model answers in every mode of `modes`, `n_samples` responses each:
  import  use the toolbox's functions (offered as tools);
  create  write a new function for the question (smith's tool format) and use it;
  skip    solve without any tool.
Selection (select_best_solution): among responses that executed (a non-empty answer, every tool call ran,
and a create response called its new function), the majority answer wins, then the shortest response
(fewest completion tokens, the released code's AST depth); first the best of each mode, then the best
across modes. The toolbox grows with the function of a selected create response (a name already in the
toolbox is not replaced) and counts one use of each toolbox function a selected import response called.
Every `trim_every` questions and at the end of the stream, functions used fewer than log_base(n) times
(n questions so far; released code: log(n, 20)) are dropped, and (regenerate) the questions whose
selected response created or used a dropped function are solved again with import and skip.
A question's I/O tokens are everything generated for it (all modes and samples, and any regeneration).
Deviations: skip answers in prose (the CoT prompt) rather than with a primitive-only program; functions are
called through the tool-calling interface rather than from a generated program.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from smith.episodes import Episode
from smith.pool import PoolEntry

from . import Context, Spend, called, cot_episode, key_of, parse_tool, tool_row, use_episode

CREATE = """Write Python functions that solve questions of this kind and can be reused for other questions like it.

Question: {question}

Write ONE new function that solves it; give it a specific, descriptive name{avoid}. It takes the question text and \
returns the answer as a string, formatted exactly as the question asks. Use only the Python standard library.

Reply with exactly one ```python block (the function, with any imports and helpers) and exactly one ```json block \
(its OpenAI function schema: {{"name": ..., "description": ..., "parameters": {{"type": "object", \
"properties": ..., "required": [...]}}}}). The schema's name must be the function's name and its parameters must \
match the function's signature."""
IMPORT_NOTE = ("The tools are functions written while solving earlier questions of this task; call the one that "
               "solves this question.")


@dataclass
class Candidate:
    mode: str
    episode: Episode | None
    tool: PoolEntry | None = None  # a create response's new function

    @property
    def success(self) -> bool:
        e = self.episode
        if e is None or not (e.answer or "").strip() or any(c.get("status") != "ok" for c in e.calls):
            return False
        return self.tool is None or any(t.tool.code == self.tool.tool.code for t in called(e))

    @property
    def length(self) -> int:
        return self.episode.completion_tokens if self.episode is not None else 0


def select(cands: list[Candidate]) -> Candidate:
    """select_best_solution: executed responses first, majority answer, then the shortest; else the first."""
    ok = [c for c in cands if c.success]
    if not ok:
        return cands[0]
    votes: dict[str, list[Candidate]] = {}
    for c in ok:
        votes.setdefault((c.episode.answer or "").strip(), []).append(c)
    majority = max(votes.values(), key=len)  # the first answer to reach the top count, as in the released code
    return min(majority, key=lambda c: c.length)


def solve(ctx: Context, jobs: list[tuple[dict[str, Any], Any, Spend]], modes: list[str]) -> list[Candidate]:
    """Every mode's responses for a batch of (stream, question, spend), mode after mode (a question whose budget
    is spent gets no further mode), and the selected response of each question."""
    n = ctx.opts.n_samples
    cands: list[list[Candidate]] = [[] for _ in jobs]
    for mode in modes:
        live = [j for j, (_, _, sp) in enumerate(jobs) if ctx.allows("question", sp) for _ in range(n)]
        made: list[tuple[int, Candidate]] = []
        if mode == "create":
            texts = ctx.chat(ctx.user, [[{"role": "user", "content": CREATE.format(
                question=jobs[j][1].question, avoid=f" (not one of: {', '.join(jobs[j][0]['box'])})"
                if jobs[j][0]["box"] else "")}] for j in live], [jobs[j][2] for j in live])
            for j, text in zip(live, texts, strict=True):
                st, item, _ = jobs[j]
                tool, _ = parse_tool(text, st["cat"].name)
                ep = use_episode(key_of(st["cat"], item), item.question, [tool]) if tool is not None else None
                made.append((j, Candidate("create", ep, tool)))
        else:
            for j in live:
                st, item, _ = jobs[j]
                key = key_of(st["cat"], item)
                made.append((j, Candidate(mode, use_episode(key, item.question, [b["tool"] for b in st["box"].values()],
                                                            IMPORT_NOTE) if mode == "import"
                                          else cot_episode(key, item.question))))
        playing = [(j, c) for j, c in made if c.episode is not None]
        ctx.play(ctx.user, [c.episode for _, c in playing], [jobs[j][2] for j, _ in playing],
                 "cot" if mode == "skip" else "use")
        for j, c in made:
            cands[j].append(c)
    best = []
    for cs in cands:
        per_mode = [select([c for c in cs if c.mode == m]) for m in modes if any(c.mode == m for c in cs)]
        best.append(select(per_mode) if per_mode else Candidate("none", None))
    return best


def update(st: dict[str, Any], index: int, best: Candidate) -> None:
    """update_library: a selected import counts its functions' uses; a selected create adds its function."""
    if best.mode == "import" and best.episode is not None:
        for tool in called(best.episode):
            entry = st["box"][tool.tool.function_name]
            entry["frequency"] += 1
            entry["indices"].append(index)
    elif best.mode == "create" and best.success and best.tool.tool.function_name not in st["box"]:
        name = best.tool.tool.function_name
        st["box"][name] = {"tool": best.tool, "frequency": 1, "indices": [index]}
        st["events"].append({"step": index + 1, "added": name})


def trim(st: dict[str, Any], n: int, base: float) -> None:
    """trim_library: drop the functions used fewer than log_base(n) times; remember whose answers used them."""
    threshold = math.log(n, base) if n > 1 else 0.0
    dropped = sorted(name for name, b in st["box"].items() if b["frequency"] < threshold)
    for name in dropped:
        st["trimmed"].update(st["box"].pop(name)["indices"])
    st["events"].append({"step": n, "threshold": threshold, "trimmed": dropped, "size": len(st["box"])})


def run(ctx: Context) -> dict[str, Any]:
    o = ctx.opts
    modes = [str(m) for m in o.modes]
    streams = [{"cat": c, "box": {}, "events": [], "sizes": [], "trimmed": set(), "solutions": {}}
               for c in ctx.cats if c.name not in ctx.store]  # a finished stream is kept; an unfinished one reruns
    for c in ctx.cats:
        ctx.build_spend[c.name] = Spend()
    length = max((len(ctx.questions[st["cat"].name]) for st in streams), default=0)
    for i in range(length):
        jobs = [(st, ctx.questions[st["cat"].name][i], Spend()) for st in streams
                if i < len(ctx.questions[st["cat"].name])]
        for (st, item, sp), best in zip(jobs, solve(ctx, jobs, modes), strict=True):
            update(st, i, best)
            st["solutions"][i] = (item, sp, best, False)
            if (i + 1) % o.trim_every == 0:
                trim(st, i + 1, float(o.trim_base))
            st["sizes"].append(len(st["box"]))
    for st in streams:
        n = len(ctx.questions[st["cat"].name])
        if n % o.trim_every:
            trim(st, n, float(o.trim_base))
        redo = sorted(st["trimmed"]) if o.regenerate else []
        jobs = [(st, st["solutions"][i][0], st["solutions"][i][1]) for i in redo]
        for i, (_, item, sp), best in zip(redo, jobs, solve(ctx, jobs, ["import", "skip"]), strict=True):
            update(st, i, best)
            st["solutions"][i] = (item, sp, best, True)
        for i in range(n):
            item, sp, best, again = st["solutions"][i]
            ctx.record(st["cat"], item, best.episode, sp, mode=best.mode, regenerated=again,
                       toolbox_size=st["sizes"][i])
        ctx.store.add({"key": st["cat"].name, "category": st["cat"].name, "sizes": st["sizes"], "events": st["events"],
                       "regenerated": redo, "toolbox": [tool_row(b["tool"], frequency=b["frequency"])
                                                        for b in st["box"].values()]})
    stored = {c.name: ctx.store.rows[c.name] for c in ctx.cats}
    modes_used: dict[str, int] = {}
    for r in ctx.log:
        if r.get("mode") and r["key"].split("/")[0] in stored:
            modes_used[r["mode"]] = modes_used.get(r["mode"], 0) + 1
    return {"tools": {n: [t["function_name"] for t in r["toolbox"]] for n, r in stored.items()},
            "toolbox": {n: {"sizes": r["sizes"], "events": r["events"], "regenerated": r["regenerated"]}
                        for n, r in stored.items()},
            "selected_modes": modes_used}
