"""The evaluation configuration, typed, as the training one (smith.config): `EvalConfig` is the root of `python
eval.py` (recipes/eval.yaml), and each suite declares the dataclass of its own `suite.*` settings in its module,
with a subclass of `EvalConfig` whose `suite` is that dataclass (plus any top-level key of its own: rg's `mode`,
lomekwi's `import_logs`), registered with the suite (`smith.evals.suite.Suite.config`). The dataclasses hold every
default and its help text; `recipes/suite/<name>.yaml` holds the suite's one-line description and its `quick`
preset.

smith.entry registers the named suite's root in Hydra's ConfigStore as `eval_schema` (recipes/eval.yaml builds on
it), so an override of the wrong type (`limit=abc`) fails while composing; `typed` then builds the objects once,
refusing a key no dataclass declares (`+suite.n_itemz=3`) and checking every field's range and choices
(`EvalConfig.__post_init__`), each a one-line ConfigError before any model loads. `vllm.*` and `openai.*` stay
free-form (smith.models reads them: vllm.LLM keyword arguments, the OpenAI client's options).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smith.config import ModelConfig, build, knob, validate
from smith.errors import ConfigError

FREE_FORM = ("vllm", "openai")  # sections of any keys, recorded only when given (smith.evals.common.run_config)


@dataclass
class EvalConfig:
    """`python eval.py suite=NAME`: the root every suite's config extends (its `suite` is the suite's settings).
    `smith eval suite=NAME --cfg job` prints it resolved."""

    model: str = knob("tiny", "a local model / checkpoint dir | tiny | smollm2-135m | vllm:<path> | "
                      "openai:<base_url>#<model> | scripted:<agent> (smith.models)")
    limit: int | None = knob(None, "cap items or episodes per cell for a quick run; null: no cap", min=1)
    quick: bool = knob(False, "true: the suite's quick preset (its suite.quick overrides; yours still win)")
    output_dir: str | None = knob(None, "null -> checkpoints/eval/<suite>-<timestamp>")
    seed: int = knob(0, "the evaluation seed (sampling, bootstrap resamples)")
    tiny_dir: str = knob(ModelConfig.tiny_dir, "where model=tiny is built (cached), as training's model.tiny_dir")
    real_dir: str = knob(ModelConfig.real_dir, "where model=smollm2-135m is built (smith real-model), cached, as "
                         "training's model.real_dir")
    suite: Any = knob(None, "the suite's own settings: its module's dataclass (`smith suites` lists the suites)")
    vllm: dict[str, Any] = knob(help="free-form: vllm.LLM keyword arguments for model=vllm:<path>", factory=dict)
    openai: dict[str, Any] = knob(help="free-form: the OpenAI client's api_key, timeout_s, max_retries, concurrency "
                                  "for model=openai:<base_url>#<model>", factory=dict)

    def __post_init__(self) -> None:
        validate(self)


def typed(cfg: Any) -> EvalConfig:
    """The typed, validated evaluation config from Hydra's composed (OmegaConf) config (an EvalConfig is returned
    as it is): the root of the suite `suite.name` names (its module is imported, no other). Built once, by smith.entry,
    and passed down; a key no dataclass declares is a one-line error naming it."""
    if isinstance(cfg, EvalConfig):
        return cfg
    from smith.evals import get

    name = cfg.suite.name
    schema = get(name).config
    conf = build(cfg, schema, lambda key: f"{key} is not a setting of eval.py or suite {name} ({schema.__module__}."
                                          f"{schema.__qualname__}); `python eval.py suite={name} --cfg job` lists them")
    if not isinstance(conf, EvalConfig):
        raise ConfigError(f"config: not an evaluation config ({type(conf).__name__})")
    return conf
