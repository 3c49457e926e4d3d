"""lomekwi's typed config (smith.evals.config): `LomekwiConfig`, the `suite.*` settings (section 4.2's protocol and
the released runner's switches), `DeepConfig`, Deep Lomekwi's own sweep (`suite.deep`), and `LomekwiEval`, the root
of `eval.py suite=lomekwi` with its `import_logs`. The worlds, parsers, echo modes and schemes are checked by the
game itself (smith.evals.lomekwi.env.Rules, `check`), naming the known ones."""

from __future__ import annotations

from dataclasses import dataclass

from smith.config import knob
from smith.evals.config import EvalConfig


@dataclass
class DeepConfig:
    """world=deep: the released Deep Lomekwi sweep (run_deep_lomekwi_sweep.py), 105 episodes."""

    n_values: list[int] = knob(help="containers", factory=lambda: list(range(10, 31)))
    t_values: list[int] = knob(help="resource kinds in the look-alike family", factory=lambda: [2, 3, 4, 5, 6])
    reps: int = knob(1, "episodes per cell; every cell's episode r uses relabel/drop seed r (released)", min=1)
    scheme: str = knob("tokens", "the released deep world always relabels with tokens (n + 4 labels: letter fits "
                       "n <= 22)")
    hint: bool = knob(False, "unused by the deep world's texts; recorded as released")
    no_progress_window: int | None = knob(None, "null: no guard, as released (the coupon tail is legitimately "
                                          "stale); a number turns it on", min=1)


@dataclass
class LomekwiConfig:
    """`suite.*` of suite=lomekwi (recipes/suite/lomekwi.yaml)."""

    name: str = knob("lomekwi", "the suite", choices=("lomekwi",))
    n_values: list[int] = knob(help="doors", factory=lambda: [9, 10, 11])
    t_values: list[int] = knob(help="shard types; the recipe is one unordered pair of them", factory=lambda: [2, 3, 4])
    reps: int = knob(20, "episodes per cell; episode i of the cell-major sweep uses relabel/drop seed i", min=1)
    world: str = knob("pickup", "pickup (the paper's world) | v1 (the released single-shard world: t_values unused) "
                      "| deep (Deep Lomekwi: its grid and settings are in `deep`)")
    scheme: str = knob("letter", "tokens | letter | alnum relabeling; the paper reports letter (section 4.3)")
    parser: str = knob("upstream", "upstream (the released parser) | smith (the paper's text: any-case fillers, "
                       "articles and punctuation dropped); see docs/lomekwi.md")
    echo: str = knob("typed", "typed (labels echoed as typed, released) | canonical (\"r_02\" echoed as \"r_2\")")
    fold_case: bool = knob(False, "false: lower-cased arguments vs labels case-sensitively (released: upper-case "
                           "labels unreachable); true: ignore case (and alnum labels stay apart folded)")
    commit_nudge: str | None = knob(None, "a text shown once when the recipe is held but not built (released probe)")
    stop_on_build: bool = knob(False, "end an episode when the machine is built (stop reason \"built\")")
    hint: bool = knob(True, "examining a shard says it \"shifts when held alongside a different kind\"")
    budget_mult: float = knob(1.2, "B = round(1.2 (n H_n + n)): 41, 47, 53 for n = 9, 10, 11", min=0.0)
    no_progress_window: int | None = knob(20, "executed actions without progress that end an episode (released "
                                          "sweep); null: no guard", min=1)
    max_new_tokens: int = knob(1500, "per model call (section 4.2)", min=1)
    temperature: float = knob(1.0, "provider default sampling (section 4.2)", min=0.0)
    top_p: float = knob(1.0, "nucleus sampling", min=0.0)
    system_suffix: str = knob("", "appended to the system prompt; \" /no_think\" turns Qwen3 thinking off "
                              "(section 4.2)")
    batch_size: int = knob(20, "episodes played in lockstep per backend call", min=1)
    plots: bool = knob(True, "false skips the PNGs (a quick check)")
    deep: DeepConfig = knob(help="world=deep: Deep Lomekwi's own grid and settings", factory=DeepConfig)
    quick: list[str] = knob(help="quick=true: these overrides first (recipes/suite/lomekwi.yaml)", factory=list)


@dataclass
class LomekwiEval(EvalConfig):
    """`python eval.py suite=lomekwi`."""

    suite: LomekwiConfig = knob(factory=LomekwiConfig)
    import_logs: str | None = knob(None, "a folder of released-format episodes.jsonl files: score them instead of "
                                   "playing")
