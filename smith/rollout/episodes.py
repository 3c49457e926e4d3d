"""Build and use episodes -> token ids, sampled-token logprobs, loss masks and every reward axis.

Paper, "Task 1 Build" / "Task 2 Use"; docs/architecture.md, "One training step". One `Rollout` runs a batch of episodes:
build completions are generated and graded, then the use episodes are played, token-level episodes of the one tool
loop, `smith.episodes.play`. Every model call runs on the calling thread; only sandbox runs go to worker threads.
Torch ops issued from a second thread get an OpenMP team of their own, and on a few cores the two teams' spinning
workers made each decode step several times slower (`benchmarks/rollout_threads.py`).
"""

from __future__ import annotations

import copy
import json
import math
import random
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sandbox import FAULT
from smith.config import TrainConfig
from smith.episodes import Episode, menu_executor, play, turn_limit
from smith.models.base import Metered, SamplingParams, derive_seed
from smith.models.chat_format import without_reasoning
from smith.pool import PoolEntry, ToolPool, menu_names
from smith.rewards import AXES
from smith.rewards.evaluation import evaluate_direct, evaluate_many
from smith.rewards.format import format_reward
from smith.rewards.judge import judge_prompt, judge_reward, parse_judge_reply
from smith.rewards.tool import answer_uses, tool_execution_reward
from smith.rewards.use import correctness_reward
from smith.rollout.prompts import build_messages, inner_use_messages, use_messages
from smith.tasks import Catalog, load_catalog, score
from smith.toolspec import Reason, parse_response

NAN = float("nan")


class EpisodeKind(StrEnum):
    """The two halves of a SMITH step. A task key (the prompt TRL's sampler hands out) is `<kind>:<ordinal>`,
    optionally `:<category>`; `EpisodeKind.of` reads its kind."""

    BUILD = "build"
    USE = "use"

    @classmethod
    def of(cls, key: str) -> EpisodeKind:
        try:
            return cls(key.split(":", 1)[0])
        except ValueError:
            raise ValueError(f"bad task key '{key}' (want build:N or use:N, optionally :CATEGORY)") from None


@dataclass
class Sample:
    """One trajectory as the trainer needs it. `mask` is 0 on tool-output tokens (not trained on)."""

    kind: EpisodeKind
    category: str
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    rewards: dict[str, float] = field(default_factory=lambda: dict.fromkeys(AXES, NAN))
    truncated: bool = False
    trace: dict[str, Any] = field(default_factory=dict)
    candidate: PoolEntry | None = None  # the tool this episode built with r_eval > 0: the trainer may admit it

    def extend(self, ids: Sequence[int], logprobs: Sequence[float] | None, trained: bool) -> None:
        self.completion_ids += list(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)
        self.mask += [int(trained)] * len(ids)


@dataclass
class BuildTask:
    category: str
    examples: list[Any]  # easy-band items (question + answer shown)
    heldout: list[Any]  # hard-band items (graded; never shown)


@dataclass
class UseTask:
    category: str
    examples: list[Any]  # for building a tool first when the pool has none
    item: Any  # the target question (hard band)
    heldout: list[Any] = field(default_factory=list)  # grading items for an inner build
    # the GRPO group's identity: its menu is drawn from an RNG seeded by (key, step), so a group that TRL splits
    # across ranks shows every rank the same menu (the pools are identical; the ranks' own RNGs are not)
    key: str | None = None


class Rollout:
    """Runs SMITH episodes with a policy backend (must expose `render`, `continue_ids`, `tokenizer`)."""

    def __init__(
        self,
        policy: Any,
        sandbox: Any,
        limits: Any,
        pool: ToolPool,
        conf: TrainConfig,
        evaluator: Any = None,
        judge: Any = None,
        workers: int = 4,
        retriever: Any = None,
        catalog: Catalog | None = None,
        source_run: str = "",
    ) -> None:
        """`conf`: the typed config; the rollout reads its `dapo` (completion length, sampling), `use`, `evaluator`
        and `judge` (kinds, turns, tokens) and `pool` (menu size) sections. The rollout reads `pool` (use menus) and
        never writes it: a build with r_eval > 0 leaves its tool as the sample's `candidate`, for the caller to
        admit (`admit`; the trainer, across ranks), stamped with `source_run` (the run directory's name).
        `retriever` (a `smith.pool.retrieval` AdaptiveRetriever) builds use menus from the whole pool once it
        outgrows `pool.menu_size`. `catalog` scores answers (`tasks.catalog`; None: the packaged one)."""
        # each role counts its own tokens and seconds (`take_meters`); the evaluator and judge may share a model
        self.policy = Metered(policy, "policy")
        self.sandbox = sandbox
        self.limits = limits
        self.pool = pool
        self.conf = conf
        self.source_run = source_run
        self.evaluator = Metered(evaluator, "evaluator") if evaluator is not None else None
        self.judge = Metered(judge, "judge") if judge is not None else None
        # sandbox runs only: every model call stays on the calling thread (module docstring)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="smith-sandbox")
        self.retriever = retriever
        self.last_grading_seconds = 0.0
        self._step = 0
        self._seed = 0  # the step's sampling seed (`run`)
        self.catalog = catalog or load_catalog()

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    # -- the batch ---------------------------------------------------------------------------------
    def run(self, build: Sequence[BuildTask], use: Sequence[UseTask], rng: random.Random,
            step: int = 0) -> list[Sample]:
        """Build samples, then use samples, in input order. Every build reply of the step (the build prompts' and
        the inner builds of use episodes whose category has no pool tool yet) is generated in one decode batch,
        with the first turn of every use episode that has its menu (it needs nothing of this step's builds), and
        graded in one evaluator and one judge batch (one batch when both are the self copy; their seconds:
        `last_grading_seconds`); then the use episodes are played on. `step` (the trainer's) stamps admitted tools
        and seeds each group's menu."""
        self._step = step
        # common random numbers: every sampled row draws from (this seed, its sample's place in the step), so two
        # runs with the same rng (a run and its learning-rate-0 control) sample the same sample alike, whatever
        # else their batches hold (`row_streams`)
        self._seed = rng.getrandbits(62)
        uses, episodes = self._use_starts(use, rng)
        for j, e in enumerate(episodes):
            e.stream = len(build) + j
        inner = [e for e in episodes if not e.menu]
        samples, replies = self._build_replies(build, inner, [e for e in episodes if e.menu])
        t0 = time.perf_counter()
        self._grade(samples, replies)
        self.last_grading_seconds = time.perf_counter() - t0
        self._start_inner_uses(inner, replies[len(build):], rng)
        self._play_uses(uses, episodes)
        return samples[: len(build)] + uses

    # -- build ---------------------------------------------------------------------------------------
    def _params(self, max_new_tokens: int, seed: int | None = None) -> SamplingParams:
        return SamplingParams(max_new_tokens=max(1, max_new_tokens), temperature=self.conf.dapo.temperature,
                              top_p=self.conf.dapo.top_p, seed=seed)

    def _build_replies(self, build: Sequence[BuildTask], inner: list[Episode], ready: list[Episode]
                       ) -> tuple[list[Sample], list[tuple[BuildTask, Any, Any]]]:
        """One decode batch of build replies, the build prompts' (new samples) and the inner builds' (appended to
        their use samples), and of the `ready` use episodes' first turns (each to its own turn limit, left as the
        episode's `ahead` reply for `play`). Per build sample, (its task, the generation, the parsed reply)."""
        tasks = [*build, *(BuildTask(e.key.category, e.key.examples, e.key.heldout) for e in inner)]
        prompts = [self.policy.render(build_messages(t.examples)) for t in build]
        prompts += [e.transcript.prompt_ids for e in inner]
        params = self._params(self.conf.dapo.max_completion_length, self._seed)
        turn = self._params(self._turn_tokens())
        limits = [params.max_new_tokens] * len(prompts) + [turn_limit(e, turn) for e in ready]
        streams = [*range(len(build)), *(e.stream for e in inner), *(e.stream for e in ready)]
        gens = self.policy.continue_ids(prompts + [e.transcript.prompt_ids for e in ready], params,
                                        limits=limits, streams=streams) if limits else []
        for e, g in zip(ready, gens[len(prompts):], strict=True):
            e.ahead = g
        gens = gens[: len(prompts)]
        samples = [Sample(EpisodeKind.BUILD, t.category, list(p)) for t, p in zip(build, prompts, strict=False)]
        samples += [e.transcript for e in inner]
        for i, (s, g) in enumerate(zip(samples, gens, strict=True)):
            s.extend(g.completion_ids, g.logprobs, trained=True)
            if i < len(build):
                s.truncated = g.finish_reason == "length"
                s.trace["response"] = g.text
            else:
                s.trace["inner_build"] = {"response": g.text}
        return samples, [(t, g, parse_response(without_reasoning(g.text))) for t, g in zip(tasks, gens, strict=True)]

    def _grade(self, samples: list[Sample], replies: list[tuple[BuildTask, Any, Any]]) -> None:
        """Every build reply's format, evaluation and judge rewards and pool candidate, in one batch per role."""
        graded = self.grade_builds([t for t, _, _ in replies], [g.text for _, g, _ in replies],
                                   [s.trace for s in samples], [p for _, _, p in replies])
        for s, (rewards, candidate) in zip(samples, graded, strict=True):
            s.rewards.update(rewards)
            s.candidate = candidate

    def grade_builds(self, tasks: Sequence[BuildTask], texts: Sequence[str], traces: Sequence[dict[str, Any]],
                     parsed: Sequence[Any] | None = None) -> list[tuple[dict[str, float], PoolEntry | None]]:
        """Format, evaluation and judge rewards of build responses (their reasoning left out), the evaluator's and
        the judge's generations batched across the builds, each with its pool candidate (a tool with r_eval > 0)."""
        texts = [without_reasoning(t) for t in texts]
        parsed = [p or parse_response(t) for p, t in zip(parsed or [None] * len(texts), texts, strict=True)]
        for trace, p in zip(traces, parsed, strict=True):
            trace["parse"] = {"ok": p.ok, "reason": str(p.reason), "detail": p.detail}
        judged = self.conf.judge.kind != "none"
        ok = [i for i, p in enumerate(parsed) if p.ok]
        specs = {i: parsed[i].spec if hasattr(parsed[i], "spec") else parsed[i] for i in ok}
        # the judge formula speaks itself for a malformed pair: -0.5 for a syntax error, 0.5 * s_overall when
        # schema and code disagree (paper, r_judge); every other malformed pair scores 0 on every axis
        asked = [i for i, p in enumerate(parsed)
                 if judged and (p.ok or p.reason in (Reason.NAME_NOT_IN_CODE, Reason.PARAM_MISMATCH))]
        keys, prompts = {}, {}  # the judge decodes greedily: one ask per distinct tool
        for i in asked:
            m = judge_prompt(specs.get(i, texts[i]))
            keys[i] = json.dumps(m)
            prompts.setdefault(keys[i], m)
        # the judge is the evaluator's model (both the policy's synced copy): its verdicts ride the evaluator's first
        # batch, their decode steps beside the calls' instead of after them
        beside = [Episode(m, limit=self.conf.judge.max_new_tokens) for m in prompts.values()] if (
            prompts and self.conf.evaluator.kind != "direct" and self.judge.backend is self.evaluator.backend) else []
        evals = dict(zip(ok, self._evaluate([(specs[i], tasks[i].heldout) for i in ok], beside), strict=True))
        if beside:
            said = dict(zip(prompts, (e.final or "" for e in beside), strict=True))
            self.evaluator.shift(self.judge, sum(e.completion_tokens for e in beside))
        else:
            said = self._judge(list(prompts.values()))
        verdicts = dict(zip(asked, self._verdicts([said[keys[i]] for i in asked], [parsed[i] for i in asked],
                                                  [traces[i] for i in asked]), strict=True))
        rewards = []
        for i, (task, p, trace) in enumerate(zip(tasks, parsed, traces, strict=True)):
            if not judged:
                r_judge = NAN
            elif i in verdicts:
                r_judge = verdicts[i]
            else:  # a malformed pair the judge was not asked about
                r_judge = judge_reward(p, None) if p.reason == Reason.SYNTAX_ERROR else 0.0
            if not p.ok:
                rewards.append(({"format": 0.0, "evaluation": 0.0, "judge": r_judge}, None))
                continue
            ev = evals[i]
            trace["evaluation"] = {"correct": ev.correct, "k": ev.k, "faults": ev.faults,
                                   "no_tool_call": sum(t.status == "no_tool_call" for t in ev.traces)}
            candidate = PoolEntry(task.category, specs[i], ev.r_eval, None if math.isnan(r_judge) else r_judge,
                                  self._step, self.source_run) if ev.r_eval > 0 else None
            rewards.append(({"format": format_reward(p), "evaluation": ev.r_eval, "judge": r_judge}, candidate))
        return rewards

    def _evaluate(self, jobs: list[tuple[Any, list[Any]]], beside: list[Episode]) -> list[Any]:
        """r_eval of each (spec, held-out items): in the sandbox alone (each tool on a worker of its own), or
        through the evaluator model (with the judge's `beside` episodes in its first batch). Each distinct job is
        graded once and its result copied to its duplicates: a group's samples often write the same tool for the
        same questions, and both evaluators are deterministic in the tool and the questions (the model evaluator
        decodes greedily)."""
        keys = [(spec.code, json.dumps(spec.schema, sort_keys=True), tuple(it.id for it in items))
                for spec, items in jobs]
        first: dict[Any, int] = {}  # each key's first job
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        distinct = [jobs[i] for i in first.values()]
        if self.conf.evaluator.kind == "direct":
            results = list(self._executor.map(
                lambda job: evaluate_direct(job[0], job[1], self.sandbox, self.limits, self.catalog), distinct))
        else:
            results = evaluate_many(distinct, self.evaluator, self.sandbox, self.limits,
                                    self.conf.evaluator.max_turns, catalog=self.catalog, beside=beside)
        graded = dict(zip(first, results, strict=True))
        return [graded[k] if first[k] == i else copy.deepcopy(graded[k]) for i, k in enumerate(keys)]

    def _judge(self, prompts: list[list[dict[str, Any]]]) -> dict[str, str]:
        """The judge model's reply to each distinct prompt (one per distinct tool: it decodes greedily), in one
        batch, by the prompt's JSON."""
        if not prompts:
            return {}
        said = self.judge.chat(prompts, params=SamplingParams(max_new_tokens=self.conf.judge.max_new_tokens))
        return {json.dumps(m): g.text for m, g in zip(prompts, said, strict=True)}

    @staticmethod
    def _verdicts(replies: list[str], parsed: list[Any], traces: list[dict[str, Any]]) -> list[float]:
        """Each judge reply's scores mapped to r_judge; an unparseable reply gives the documented neutral value."""
        rewards = []
        for reply, p, trace in zip(replies, parsed, traces, strict=True):
            scores = parse_judge_reply(reply)
            trace["judge"] = {"reply": reply[:500], "parsed": scores is not None}
            rewards.append(judge_reward(p, scores))
        return rewards

    # -- use -----------------------------------------------------------------------------------------
    def menu(self, category: str, rng: random.Random, question: str = "") -> list[tuple[str, PoolEntry]] | None:
        """The use prompt's tools, each under a distinct callable name; None if the category has no tool yet.

        Paper: 1 matching + n distractors, shuffled. With a retriever and a pool larger than the menu, the
        menu is instead the retriever's adaptive-depth shortlist for the question (it may miss the tool)."""
        match = self.pool.matching(category, rng)
        if match is None:
            return None
        if self.retriever is not None and len(self.pool) > self.conf.pool.menu_size:
            entries = list(self.pool)
            picked = self.retriever.shortlist(question, [e.document() for e in entries], self.conf.pool.menu_size)
            tools = [entries[i] for i in picked]
        else:
            tools = [match, *self.pool.distractors(category, self.conf.use.n_distractors, rng)]
            rng.shuffle(tools)
        return list(menu_names(tools).items())

    def take_meters(self) -> dict[str, float]:
        """Tokens and generation seconds of each role since the last call (`smith.models.base.Metered`)."""
        out: dict[str, float] = {}
        for backend in (self.policy, self.evaluator, self.judge):
            if backend is not None:
                out.update(backend.take())
        return out

    def _use_starts(self, tasks: Sequence[UseTask], rng: random.Random) -> tuple[list[Sample], list[Episode]]:
        """Each use task's sample and episode: the use prompt with its menu, or, when the pool has no tool of the
        category yet, the build prompt (an episode without a menu: its tool is built first, `run`). GRPO groups
        (same task object) share one menu."""
        menus: dict[int, Any] = {}
        samples: list[Sample] = []
        episodes: list[Episode] = []
        for t in tasks:
            if id(t) not in menus:
                group_rng = random.Random(f"{t.key}:{self._step}") if t.key is not None else rng
                menus[id(t)] = self.menu(t.category, group_rng, t.item.question)
            menu = menus[id(t)]
            if menu is None:
                ids = self.policy.render(build_messages(t.examples))
            else:
                ids = self.policy.render(use_messages(t.item.question), [e.tool.openai_tool(name) for name, e in menu])
            samples.append(Sample(EpisodeKind.USE, t.category, list(ids)))
            if menu is not None:
                samples[-1].trace["menu"] = [f"{name} ({entry.category})" for name, entry in menu]
            episodes.append(Episode(samples[-1], dict(menu or []), budget=self.conf.dapo.max_completion_length, key=t))
        return samples, episodes

    def _start_inner_uses(self, episodes: list[Episode], replies: list[tuple[BuildTask, Any, Any]],
                          rng: random.Random) -> None:
        """After an inner build (generated and graded with the step's builds), the episode goes on with its own tool
        among distractors; a truncated or unparseable build ends it."""
        fmt = self.policy.chat_format
        for e, (_, g, p) in zip(episodes, replies, strict=True):
            t, s = e.key, e.transcript
            if g.finish_reason == "length" or not p.ok:
                e.end = "budget" if g.finish_reason == "length" else "no_tool"
                continue
            own = PoolEntry(t.category, p.spec, 0.0)
            others = self.pool.distractors(t.category, self.conf.use.n_distractors, rng)
            tools = [own, *others]
            rng.shuffle(tools)
            e.menu = menu_names(tools)
            name = next(n for n, entry in e.menu.items() if entry is own)
            # the use prompt every use episode gets (its tools in the template's tool block), rendered afresh
            s.extend(fmt.follow_up(inner_use_messages(name, t.item.question), e.tools), None, trained=False)

    def _turn_tokens(self) -> int:
        """A use turn's token limit."""
        return min(self.conf.dapo.max_completion_length, self.conf.use.max_turn_tokens)

    def _play_uses(self, samples: list[Sample], episodes: list[Episode]) -> None:
        """Play the use episodes (multi-turn, on the episode engine, each turn within its budget) and score them."""
        execute = menu_executor(self.sandbox, self.limits, self.conf.use.max_tool_output_chars, self._executor)
        play(episodes, self.policy, self._params(self._turn_tokens(), derive_seed(self._seed, 0)),
             self.conf.use.max_turns, execute)
        for s, e in zip(samples, episodes, strict=True):
            s.truncated = e.truncated
            self._score_use(s, e)

    def _score_use(self, s: Sample, e: Episode) -> None:
        """The use and tool axes of a finished use episode (docs/tasks.md, "Reward axes"). A call the sandbox
        faulted on twice (execute_tool_calls retries once) is the machine's failure: every axis of the episode is
        NaN, no signal, and it is counted in `sandbox_faults/use`."""
        t = e.key
        answer = e.answer
        ok = sum(c.get("status") == "ok" for c in e.calls)
        faults = sum(c.get("status") == FAULT for c in e.calls)
        used = any(c.get("status") == "ok" and c.get("category") == t.category and answer_uses(answer, c["output"])
                   for c in e.calls)
        correct = answer is not None and score(self.catalog.get(t.category), answer, t.item) >= 1.0
        s.trace.update({"answer": answer, "correct": correct, "turns": e.turns, "calls": e.calls,
                        "tool_call_ok": ok, "tool_calls": len(e.calls), "sandbox_faults": faults,
                        "answer_uses_tool": used})
        if faults:
            s.rewards = dict.fromkeys(AXES, NAN)
            return
        s.rewards["use"] = correctness_reward(correct, e.turns, self.conf.use.max_turns, self.conf.use.eta_mid,
                                              self.conf.use.eta_min)
        s.rewards["tool"] = tool_execution_reward(used, len(e.calls) - ok, answer is not None)


def admit(pool: ToolPool, samples: Sequence[Sample]) -> None:
    """Admit the samples' candidates to `pool`, in order; each trace says whether the pool took its tool (one
    process; the trainer admits across ranks, smith.train.trainer)."""
    for s in samples:
        if s.candidate is not None:
            s.trace["admitted"] = pool.admit(s.candidate)
