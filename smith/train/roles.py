"""Per-role protocol check of a policy: does it play every role SMITH gives it (builder, user, self evaluator, judge)?

The self evaluator and the judge are copies of the policy, so a policy that was never taught their protocols
makes every r_eval 0 (no parseable call of the tool) and every r_judge NaN (no parseable verdict), and RL has
nothing to learn from. This measures each role on the rollout's own code paths and sampling: builds at the
policy's temperature (parsed, then graded by calling the tool directly, the ground truth); use episodes at that
temperature (a correct demonstration tool among distractors of other categories, `smith.episodes.play`, up to
`UseConfig.max_turns` turns, scored as the rollout scores them); the evaluator
(`evaluate_many`, greedy as in the rollout) and the judge (`judge_prompt` / `parse_judge_reply`, greedy) on the
warm start's demonstration tools, correct and wrong, on fresh hard-band questions (their own seed, never the
demonstrations'). `benchmarks/roles.py` prints it as a table.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from smith.config import JudgeConfig, UseConfig
from smith.episodes import Episode, menu_executor, play
from smith.models.base import ChatBackend, SamplingParams
from smith.pool import PoolEntry, menu_names
from smith.rewards.evaluation import evaluate_direct, evaluate_many
from smith.rewards.judge import judge_prompt, parse_judge_reply
from smith.rollout.prompts import build_messages, use_messages
from smith.tasks import items, load_catalog, score
from smith.toolspec import parse_response
from smith.train.warm import demo_tool

ROLE_SEED = 104729  # the questions and tools of this check: a stream of their own


@dataclass
class RoleTable:
    """Each role's rates (shares in [0, 1]) and the counts behind them."""

    builds: int
    build_parsed: float  # build replies that parse into a (code, schema) pair
    build_right: float  # ... whose tool answers every held-out question right (direct grading)
    use_episodes: int
    use_right: float  # use episodes whose final answer is right
    use_no_call: float  # use episodes that answered without calling any tool
    evaluator_questions: int
    evaluator_called: float  # evaluator episodes with a call of the tool that ran
    evaluator_agrees: float  # questions the evaluator grades as direct grading does (right / not right)
    judge_tools: int
    judge_parsed: float  # judge replies with all three scores
    judge_overall_right: float  # mean `overall` on correct tools (parsed replies)
    judge_overall_wrong: float  # ... and on wrong ones
    judge_auc: float  # P(overall of a correct tool > a wrong one's), ties count half; NaN without both kinds

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("build replies that parse", f"{self.build_parsed:.2f} of {self.builds}"),
            ("builds right on every held-out question", f"{self.build_right:.2f} of {self.builds}"),
            ("use answers right", f"{self.use_right:.2f} of {self.use_episodes}"),
            ("use answers without a tool call", f"{self.use_no_call:.2f} of {self.use_episodes}"),
            ("evaluator questions ending in a call of the tool", f"{self.evaluator_called:.2f} of "
                                                                 f"{self.evaluator_questions}"),
            ("evaluator grades as direct grading does", f"{self.evaluator_agrees:.2f} of {self.evaluator_questions}"),
            ("judge verdicts that parse", f"{self.judge_parsed:.2f} of {self.judge_tools}"),
            ("judge overall, correct / wrong tools",
             f"{self.judge_overall_right:.2f} / {self.judge_overall_wrong:.2f}"),
            ("judge AUC (correct above wrong)", f"{self.judge_auc:.2f}"),
        ]


def auc(high: list[float], low: list[float]) -> float:
    """P(a draw from `high` exceeds one from `low`), ties half (the Mann-Whitney U over n_high * n_low)."""
    if not high or not low:
        return float("nan")
    return sum((h > lo) + 0.5 * (h == lo) for h in high for lo in low) / (len(high) * len(low))


def _tools(categories: tuple[str, ...], n: int, rng: random.Random) -> list[tuple[str, Any, bool]]:
    """`n` demonstration tools per category (well-formed): (category, spec, correct)."""
    out = []
    for c in categories:
        for _ in range(n):
            _, entry, correct = demo_tool(c, rng)
            out.append((c, entry.tool, correct))
    return out


def role_table(policy: ChatBackend, sandbox: Any, categories: tuple[str, ...], cache_dir: str | None = None,
               tools_per_category: int = 8, questions: int = 8, temperature: float = 0.7,
               max_new_tokens: int = 512) -> RoleTable:
    """Measure every role of `policy` (see the module docstring); the sandbox runs every tool."""
    rng = random.Random(ROLE_SEED)
    easy = {c: items(c, "easy", 64, seed=ROLE_SEED, cache_dir=cache_dir) for c in categories}
    hard = {c: items(c, "hard", 256, seed=ROLE_SEED, cache_dir=cache_dir) for c in categories}
    # builds: the rollout's prompt, sampled at the policy's temperature
    prompts = [(c, build_messages(rng.sample(easy[c], 4)), rng.sample(hard[c], questions))
               for c in categories for _ in range(tools_per_category)]
    replies = policy.chat([p for _, p, _ in prompts],
                          params=SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature,
                                                seed=ROLE_SEED))
    parsed = [parse_response(g.text) for g in replies]
    right = [p.ok and evaluate_direct(p.spec, heldout, sandbox).r_eval == 1.0
             for p, (_, _, heldout) in zip(parsed, prompts, strict=True)]
    # the evaluator and the judge on demonstration tools, greedy as in the rollout
    tools = _tools(categories, tools_per_category, rng)
    jobs = [(spec, rng.sample(hard[c], questions)) for c, spec, _ in tools]
    graded = evaluate_many(jobs, policy, sandbox)
    called = agrees = total = 0
    for (spec, its), result in zip(jobs, graded, strict=True):
        truth = evaluate_direct(spec, its, sandbox).traces
        for trace, true in zip(result.traces, truth, strict=True):
            total += 1
            called += any(c.get("name") == spec.function_name and c.get("status") == "ok" for c in trace.calls)
            agrees += (trace.status == "correct") == (true.status == "correct")
    verdicts = [parse_judge_reply(g.text) for g in policy.chat([judge_prompt(spec) for _, spec, _ in tools],
                                                                params=SamplingParams(max_new_tokens=JudgeConfig.max_new_tokens))]
    use_right, use_no_call = _use(policy, sandbox, categories, hard, tools_per_category, temperature, rng)
    good = [v.overall for v, (_, _, ok) in zip(verdicts, tools, strict=True) if v is not None and ok]
    bad = [v.overall for v, (_, _, ok) in zip(verdicts, tools, strict=True) if v is not None and not ok]
    return RoleTable(
        builds=len(prompts), build_parsed=sum(p.ok for p in parsed) / len(parsed), build_right=sum(right) / len(right),
        use_episodes=len(use_right), use_right=sum(use_right) / len(use_right),
        use_no_call=sum(use_no_call) / len(use_no_call),
        evaluator_questions=total, evaluator_called=called / total, evaluator_agrees=agrees / total,
        judge_tools=len(tools), judge_parsed=sum(v is not None for v in verdicts) / len(verdicts),
        judge_overall_right=sum(good) / len(good) if good else float("nan"),
        judge_overall_wrong=sum(bad) / len(bad) if bad else float("nan"), judge_auc=auc(good, bad))


def _use(policy: ChatBackend, sandbox: Any, categories: tuple[str, ...], hard: dict[str, list[Any]], n: int,
         temperature: float, rng: random.Random) -> tuple[list[bool], list[bool]]:
    """`n` use episodes per category, each with a correct tool of its category and up to
    `UseConfig.n_distractors` correct tools of others: per episode (answer right, answered without a call)."""
    catalog = load_catalog()
    correct = {c: [] for c in categories}
    while any(len(v) < n + 1 for v in correct.values()):
        for c in categories:
            _, entry, ok = demo_tool(c, rng)
            if ok:
                correct[c].append(entry)
    episodes = []
    for c in categories:
        others = [o for o in categories if o != c]
        for i in range(n):
            distractors = [PoolEntry(o, rng.choice(correct[o]).tool, 1.0)
                           for o in rng.sample(others, min(UseConfig.n_distractors, len(others)))]
            tools = [PoolEntry(c, correct[c][i].tool, 1.0), *distractors]
            rng.shuffle(tools)
            item = rng.choice(hard[c])
            episodes.append(Episode(use_messages(item.question), menu_names(tools), key=(c, item)))
    play(episodes, policy, SamplingParams(max_new_tokens=UseConfig.max_turn_tokens, temperature=temperature,
                                          seed=ROLE_SEED), UseConfig.max_turns, menu_executor(sandbox, None))
    right = [e.answer is not None and score(catalog.get(e.key[0]), e.answer, e.key[1]) >= 1.0 for e in episodes]
    return right, [not e.calls for e in episodes]
