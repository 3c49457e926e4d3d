"""rg's typed config (smith.evals.config): `RgConfig`, the `suite.*` settings (the out-of-domain suites tabmwp and
gqa extend it), the inference-time baselines' options (`suite.baselines.<method>`), and `RgEval`, the root of
`eval.py suite=rg` with its `mode`."""

from __future__ import annotations

from dataclasses import dataclass

from smith.config import SandboxConfig, knob
from smith.evals.config import EvalConfig

from .baselines import METHODS

MODES = ("cot", "build_use", "pool", *METHODS)  # the rg modes; the baselines' are those of rg.baselines


@dataclass
class Caps:
    """A budget: LLM calls and completion tokens (null: no cap)."""

    calls: int | None = knob(None, "LLM calls at most (null: no cap)", min=0)
    tokens: int | None = knob(None, "completion tokens at most (null: no cap)", min=0)


@dataclass
class BudgetConfig:
    """A baseline's budgets, recorded in summary.json."""

    build: Caps = knob(help="a category's offline tool making", factory=Caps)
    question: Caps = knob(help="one question's online work", factory=Caps)


@dataclass
class LatmConfig:
    """Cai et al. 2023, section 3.1: propose -> verify -> wrap; the tool user calls the tool."""

    n_demos: int = knob(3, "demonstrations the maker sees (paper: k = 3)", min=1)
    n_valid: int = knob(3, "validation examples the maker verifies on (released code: 3)", min=0)
    max_attempts: int = knob(3, "proposals per category (released code: 3 retries)", min=1)
    verify_threshold: float = knob(1.0, "fraction of validation examples that must pass (the unit tests all "
                                   "assert)", min=0.0)
    wrap_examples: int = knob(3, "verified question -> call demonstrations shown to the tool user", min=0)
    budget: BudgetConfig = knob(help="calls / completion tokens of building and of answering", factory=BudgetConfig)


@dataclass
class KViewConfig:
    """CRAFT's per-view top-k of multi-view matching (released code)."""

    explanation: int = knob(10, "tools kept by the tools' descriptions against the question's explanation", min=0)
    name: int = knob(5, "tools kept by name", min=0)
    query: int = knob(10, "tools kept by the question they were made from", min=0)


@dataclass
class CraftConfig:
    """Yuan et al. 2023, section 2: create (generate, abstract, verify, deduplicate), retrieve."""

    n_train: int = knob(4, "training problems per category the toolset is created from", min=1)
    top_k: int = knob(3, "tools offered per question (retrieval: most voted, at least min_votes)", min=1)
    min_votes: int = knob(2, "votes a tool needs to be offered", min=0)
    k_view: KViewConfig = knob(help="per-view top-k of multi-view matching (released code)", factory=KViewConfig)
    scorer: str = knob("minilm", "minilm (dense, the SimCSE role) | bm25")
    budget: BudgetConfig = knob(help="calls / completion tokens of building and of answering", factory=BudgetConfig)


@dataclass
class TroveConfig:
    """Wang et al. 2024: import / create / skip, agreement selection, periodic trimming."""

    modes: list[str] = knob(help="the modes each question samples", factory=lambda: ["import", "create", "skip"])
    n_samples: int = knob(1, "responses per mode (released code: num_return_sequences = 1)", min=1)
    trim_every: int = knob(500, "trim the toolbox every N questions of a stream (released code: 500), and at its "
                           "end", min=1)
    trim_base: int | float = knob(20, "keep functions used at least log_base(n) times (released code: log(n, 20))",
                                  min=0)
    regenerate: bool = knob(True, "after the last trim, re-solve questions whose tool was trimmed (import, skip)")
    budget: BudgetConfig = knob(help="calls / completion tokens of building and of answering", factory=BudgetConfig)


@dataclass
class KtceConfig:
    """Ma et al. 2025: knowledge-based tool creation, then tool evolutionary search."""

    n_train: int = knob(4, "training problems per category (the field's problems)", min=1)
    max_tools: int = knob(4, "key points turned into tools", min=1)
    max_iter: int = knob(3, "evolution iterations (released code: 5)", min=0)
    max_rollbacks: int = knob(2, "stop after this many rollbacks in a row (released code: 2)", min=0)
    max_delete: int = knob(5, "tools one deletion step may remove (released prompt: at most 5)", min=0)
    mutate_min_freq: int = knob(2, "a tool is mutated when used at least this often ...", min=0)
    mutate_max_success: float = knob(0.9, "... and its success rate is at most this (released code: Freq > 1, "
                                     "TSR <= 0.9)", min=0.0)
    budget: BudgetConfig = knob(help="calls / completion tokens of building and of answering", factory=BudgetConfig)


@dataclass
class BaselinesConfig:
    """The inference-time tool-making baselines (mode=latm|craft|trove|ktce; smith/evals/rg/baselines,
    docs/evaluation.md). Budgets: `build` caps the LLM calls / completion tokens of a category's offline tool
    making, `question` those of one question's online work (null = no cap); both are recorded in summary.json."""

    latm: LatmConfig = knob(factory=LatmConfig)
    craft: CraftConfig = knob(factory=CraftConfig)
    trove: TroveConfig = knob(factory=TroveConfig)
    ktce: KtceConfig = knob(factory=KtceConfig)


@dataclass
class RgConfig:
    """`suite.*` of suite=rg (recipes/suite/rg.yaml)."""

    name: str = knob("rg", "the suite", choices=("rg",))
    seed: int = knob(1000, "held-out items: a seed disjoint from training's")
    train_seed: int = knob(0, "the training seed (TrainConfig.seed); suite.seed must differ")
    band: str = knob("hard", "questions come from this band (the paper grades on the hardest band)",
                     choices=("easy", "hard"))
    splits: list[str] = knob(help="which catalog splits to evaluate", factory=lambda: ["seen", "unseen"])
    categories: list[str] | None = knob(None, "a subset of catalog categories; null = all of the chosen splits")
    n_items: int = knob(50, "questions per category (limit=N caps it)", min=1)
    n_examples: int = knob(4, "easy examples a build_use / pool writer sees (paper: N = 4)", min=1)
    writer: str | None = knob(None, "build_use / pool: a model SPEC that writes the tools (tool transfer); "
                              "null = model")
    pool: str | None = knob(None, "pool mode: a run directory, checkpoint directory or pool file")
    n_distractors: int = knob(0, "tools of other categories offered beside the matching one (training uses 2)",
                              min=0)
    max_turns: int = knob(5, "use episodes: T = 5 assistant turns", min=1)
    max_new_tokens: int = knob(512, "per use turn", min=1)
    build_max_new_tokens: int = knob(1024, "the build reply (code + schema)", min=1)
    cot_max_new_tokens: int = knob(4096, "the CoT baseline reasons at length (paper: ~3.2k output tokens)", min=1)
    temperature: float = knob(0.0, "greedy evaluation", min=0.0)
    top_p: float = knob(1.0, "nucleus sampling", min=0.0)
    max_tool_output_chars: int = knob(2000, "a tool's output is cut to this many characters", min=1)
    batch_size: int = knob(16, "conversations per backend.chat call; one call per turn", min=1)
    bootstrap: int = knob(1000, "stratified bootstrap resamples for the intervals", min=1)
    cache_dir: str | None = knob(None, "reasoning-gym item cache; null = ~/.cache/smith/rg_items")
    log_chars: int = knob(2000, "final reply text kept per question in episodes.jsonl", min=0)
    label: str | None = knob(None, "row label in tables; null = derived from model / mode / writer")
    quick: list[str] = knob(help="quick=true: these overrides first (recipes/suite/<name>.yaml)", factory=list)
    sandbox: SandboxConfig = knob(help="where tools run (docs/sandbox.md), as training's sandbox.*",
                                  factory=SandboxConfig)
    baselines: BaselinesConfig = knob(help="mode=latm|craft|trove|ktce: each method's options and budgets",
                                      factory=BaselinesConfig)


@dataclass
class RgEval(EvalConfig):
    """`python eval.py suite=rg`."""

    suite: RgConfig = knob(factory=RgConfig)
    mode: str = knob("cot", "cot | build_use | pool | latm | craft | trove | ktce", choices=MODES)
