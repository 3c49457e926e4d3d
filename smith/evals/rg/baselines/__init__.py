"""The inference-time tool-making baselines of the SMITH paper's main table, as rg modes.

    python eval.py suite=rg model=SPEC mode=latm|craft|trove|ktce [suite.writer=SPEC] [limit=N]

One module per method, named as in its paper (latm, craft, trove, ktce), registered in METHODS. They share
everything but their procedure with the other rg modes: reasoning-gym items and guarded scoring
(smith.tasks), smith's tool format (one ```python function + its ```json OpenAI schema, parsed by
smith.toolspec), the sandbox that runs every tool call, the one tool loop (rg.episodes.run_episodes) and the
rg summary (rg.write_summary). What the methods add is in `Context`: a meter for each LLM call, the
per-method budgets (suite.baselines.<method>.budget: calls / completion tokens of a category's offline tool
making and of one question's online work), and `toolsets.jsonl`, where each method keeps what it built so a
rerun into the same output_dir resumes without rebuilding.

`suite.writer=SPEC` names the model that makes tools (LATM's tool maker, CRAFT's and KTCE's creator), so
"LATM with a bigger writer" is `mode=latm suite.writer=<bigger>`; the model SPEC is always the tool user.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from smith.config import as_plain
from smith.episodes import Episode
from smith.models.base import ChatBackend, Generation, SamplingParams
from smith.models.chat_format import without_reasoning
from smith.pool import PoolEntry, menu_names
from smith.rollout.prompts import USE_SYSTEM
from smith.toolspec import ToolSpec, parse_response

from ..episodes import COT_SYSTEM, run_episodes

if TYPE_CHECKING:
    from ..config import RgEval

# method -> (module, paper label); modules load lazily so `rg.MODES` costs no imports
METHODS: dict[str, tuple[str, str]] = {
    "latm": ("latm", "LATM"),
    "craft": ("craft", "CRAFT"),
    "trove": ("trove", "TroVE"),
    "ktce": ("ktce", "KTCE"),
}
SINGLE_MODEL = ("trove",)  # TroVE makes and uses its tools inline: no separate writer


@dataclass
class Spend:
    """LLM calls and tokens spent on one scope (a category's tool making, or one question)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add_generation(self, g: Generation) -> None:
        self.calls += 1
        self.prompt_tokens += g.prompt_tokens
        self.completion_tokens += g.completion_tokens

    def add_episode(self, e: Episode) -> None:
        self.calls += e.turns
        self.prompt_tokens += e.prompt_tokens
        self.completion_tokens += e.completion_tokens

    def __iadd__(self, other: Spend) -> Spend:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        return self


@dataclass
class Budget:
    """A cap on calls and completion tokens (None: no cap); `allows` is asked before starting more work."""

    calls: int | None = None
    tokens: int | None = None

    def allows(self, spend: Spend) -> bool:
        return (self.calls is None or spend.calls < self.calls) and (
            self.tokens is None or spend.completion_tokens < self.tokens)


@dataclass
class Context:
    """What a method needs from the rg run, and the meters it reports through."""

    cfg: RgEval
    user: ChatBackend
    writer: ChatBackend
    sandbox: Any
    limits: Any
    cats: list[Any]
    questions: dict[str, list[Any]]  # category -> its held-out (hard) items
    pending: set[str]  # question keys not yet in episodes.jsonl
    log: Any  # EpisodeLog of episodes.jsonl
    store: Any  # EpisodeLog of toolsets.jsonl (key "key")
    train_items: Callable[[str, int], list[Any]]  # (category, n) -> its first n easy items
    build_spend: dict[str, Spend] = field(default_factory=dict)
    stops: dict[str, int] = field(default_factory=lambda: {"build": 0, "question": 0})

    @property
    def opts(self) -> Any:
        """The method's options, `suite.baselines.<mode>` (rg.config: LatmConfig, CraftConfig, ...)."""
        return getattr(self.cfg.suite.baselines, self.cfg.mode)

    def budget(self, scope: str) -> Budget:
        b = getattr(self.opts.budget, scope)
        return Budget(b.calls, b.tokens)

    def allows(self, scope: str, spend: Spend) -> bool:
        """Whether `spend` leaves room in the `scope` budget; a refusal is counted (summary: budget_stops)."""
        ok = self.budget(scope).allows(spend)
        if not ok:
            self.stops[scope] += 1
        return ok

    def params(self, kind: str = "use") -> SamplingParams:
        s = self.cfg.suite
        tokens = {"use": s.max_new_tokens, "build": s.build_max_new_tokens, "cot": s.cot_max_new_tokens}[kind]
        return SamplingParams(max_new_tokens=tokens, temperature=s.temperature, top_p=s.top_p, seed=self.cfg.seed)

    def chat(self, backend: ChatBackend, convs: list[list[dict[str, Any]]], spends: Sequence[Spend],
             kind: str = "build") -> list[str]:
        """One batched chat call, each reply metered to its own Spend; returns the texts."""
        if not convs:
            return []
        gens = backend.chat(convs, None, self.params(kind))
        for g, sp in zip(gens, spends, strict=True):
            sp.add_generation(g)
        return [g.text for g in gens]

    def play(self, backend: ChatBackend, episodes: list[Episode], spends: Sequence[Spend], kind: str = "use") -> None:
        """Play episodes on the rg tool loop (tools run in the shared sandbox), each metered to its Spend."""
        if not episodes:
            return
        s = self.cfg.suite
        turns = 1 if kind == "cot" else s.max_turns
        run_episodes(backend, episodes, self.params(kind), turns, self.sandbox, self.limits, s.max_tool_output_chars)
        for e, sp in zip(episodes, spends, strict=True):
            sp.add_episode(e)

    def record(self, cat: Any, item: Any, episode: Episode | None, spend: Spend, **extra: Any) -> None:
        """One question's row in episodes.jsonl: the rg row of its answering episode, with the question's
        whole spend as its I/O tokens and the method's own fields."""
        from ..episodes import question_row

        row = question_row(cat, item, episode, self.cfg.suite.log_chars)
        row.update(prompt_tokens=spend.prompt_tokens, completion_tokens=spend.completion_tokens, llm_calls=spend.calls,
                   tool_source=self.cfg.mode, **extra)
        self.log.add(row)


def key_of(cat: Any, item: Any) -> str:
    return f"{cat.name}/{item.id}"


def use_episode(key: str, question: str, tools: Iterable[PoolEntry], note: str = "") -> Episode:
    """smith's use prompt offering `tools` (repeated names suffixed); `note` extends the system prompt (a
    method's tool documentation); with no tools it is a direct answer under the same prompt."""
    system = USE_SYSTEM + (f"\n\n{note}" if note else "")
    return Episode([{"role": "system", "content": system}, {"role": "user", "content": question}],
                   menu_names(list(tools)), key=key)


def cot_episode(key: str, question: str) -> Episode:
    """Solving without tools (TroVE's skip mode)."""
    return Episode([{"role": "system", "content": COT_SYSTEM}, {"role": "user", "content": question}], key=key)


def parse_tool(text: str, category: str) -> tuple[PoolEntry | None, str | None]:
    """A reply in smith's tool format -> (tool, None), or (None, why it is not one); its reasoning is left out."""
    p = parse_response(without_reasoning(text))
    if not p.ok:
        return None, f"{p.reason}: {p.detail}" if p.detail else str(p.reason)
    return PoolEntry(category, p.spec, 0.0), None


def tool_row(tool: PoolEntry, **meta: Any) -> dict[str, Any]:
    return {"code": tool.tool.code, "schema": tool.tool.schema, "function_name": tool.tool.function_name, **meta}


def tool_of(row: dict[str, Any], category: str) -> PoolEntry:
    return PoolEntry(category, ToolSpec(row["code"], row["schema"], row["function_name"]), 0.0)


def called(e: Episode) -> list[PoolEntry]:
    """The tools an episode called successfully, in call order (each once)."""
    out: dict[str, PoolEntry] = {}
    for c in e.calls:
        if c.get("status") == "ok" and c.get("name") in e.menu:
            out.setdefault(c["name"], e.menu[c["name"]])
    return list(out.values())


def solved(cat: Any, e: Episode, item: Any, through_tool: bool = True) -> bool:
    """Correct, and (by default) answered after a successful tool call: SMITH's evaluation reward counts only
    answers that came through a real call, and a verifying unit test runs the tool."""
    return (not through_tool or bool(called(e))) and cat.score(e.answer or "", item) >= 1.0


def run(cfg: RgEval, ctx: Context) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Run the method `cfg.mode` names; returns the per-category build rows for the rg summary and the
    summary's `baseline` block (options, budgets, spend, budget stops and the method's own statistics)."""
    import importlib

    module, label = METHODS[cfg.mode]
    stats = importlib.import_module(f"{__name__}.{module}").run(ctx)
    tool_rows = {cat: {"source": cfg.mode, "ok": bool(stats.get("tools", {}).get(cat)), **asdict(sp)}
                 for cat, sp in ctx.build_spend.items()}
    total = Spend()
    for sp in ctx.build_spend.values():
        total += sp
    block = {"method": label, "options": as_plain(ctx.opts), "build": asdict(total),
             "budget_stops": dict(ctx.stops), **stats}
    return tool_rows, block
