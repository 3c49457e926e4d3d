"""Hydra composition for train.py / eval.py with one-line errors instead of deep stack traces.

The training config composes `recipes/config.yaml` over the typed schema of smith.config (`TrainConfig`,
registered in Hydra's ConfigStore as `schema`), where every training default lives. We use Hydra's compose
API (not @hydra.main) so that the run directory is computed once, no `outputs/` folder appears behind the user's
back, and every failure is one readable line. Layer 5: it imports the schema from below.
"""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from smith.config import TrainConfig, problem, typed
from smith.errors import ConfigError, guarded

RECIPES = Path(__file__).resolve().parent / "recipes"  # in a checkout a link to ../recipes; a wheel holds the files


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (RECIPES / group).glob("*.yaml"))


def _check_group(overrides: list[str], group: str) -> None:
    for o in overrides:
        key, _, value = o.partition("=")
        if key.lstrip("+~") == group and value and value not in options(group):
            raise ConfigError(f"{group} '{value}' not found; known: {', '.join(options(group))}")


def register_schema() -> None:
    """`schema` in Hydra's ConfigStore: the typed training config `recipes/config.yaml` builds on."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="schema", node=TrainConfig)


def _type_error(e: BaseException) -> str | None:
    """A value of the wrong type for a typed field (`max_steps=abc`), worded like the schema's own checks."""
    from omegaconf.errors import ValidationError

    while e is not None:
        if isinstance(e, ValidationError) and e.full_key:
            return problem(str(e.full_key), e.value)
        e = e.__cause__ or e.__context__
    return None


def compose(config_name: str, overrides: list[str], groups: tuple[str, ...] = (), quick: bool = True) -> DictConfig:
    """Compose `recipes/<config_name>.yaml` with command-line style overrides (and, for `quick=true`, the
    suite's `suite.quick` preset before them)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    for group in groups:
        _check_group(overrides, group)
    # trainer.* are GRPOConfig fields the recipe does not list: add them, as Hydra's `++` would
    overrides = [f"++{o}" if o.startswith("trainer.") else o for o in overrides]
    register_schema()
    try:
        with initialize_config_dir(config_dir=str(RECIPES), version_base="1.3"):
            cfg = hydra_compose(config_name=config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        if message := _type_error(e):
            raise ConfigError(message) from None
        first = str(e).strip().splitlines()[0]
        raise ConfigError(f"bad override in {' '.join(overrides) or '(none)'}: {first}") from None
    if not isinstance(cfg.get("quick", False), bool):
        raise ConfigError(f"quick={cfg.quick} must be true or false")
    preset = OmegaConf.select(cfg, "suite.quick") if quick and cfg.get("quick") else None
    if preset:  # `quick=true`: the suite's own overrides first, so that the user's still win
        return compose(config_name, [*map(str, preset), *overrides], groups, quick=False)
    if config_name == "eval" and (unknown := _undeclared(cfg, _declared(cfg))):
        raise ConfigError(f"{unknown} is not a setting of eval.py or suite {cfg.suite.name} (recipes/eval.yaml, "
                          f"recipes/suite/{cfg.suite.name}.yaml)")
    return cfg


def _declared(cfg: DictConfig) -> dict:
    """The keys an evaluation config may hold: recipes/eval.yaml's and its suite's file's (training's are the
    typed schema's, checked by smith.config.typed)."""
    def keys(path: Path) -> dict:
        node = OmegaConf.to_container(OmegaConf.load(path))
        parents = [keys(path.parent / f"{d}.yaml") for d in node.pop("defaults", []) if d != "_self_"]
        return OmegaConf.to_container(OmegaConf.merge(*parents, node))

    root = OmegaConf.to_container(OmegaConf.load(RECIPES / "eval.yaml"))
    root.pop("defaults", None)
    root.update(vllm={}, openai={})  # free-form sections: vllm.LLM kwargs, the OpenAI client's (smith.models)
    return OmegaConf.to_container(OmegaConf.merge(root, keys(RECIPES / "suite" / f"{cfg.suite.name}.yaml")))


def _undeclared(node: DictConfig, declared: dict, prefix: str = "") -> str | None:
    """The first key of `node` its declaration lacks (Hydra's `+key=value` adds one anywhere); a section declared
    empty or null takes any keys."""
    for key in node:
        if key not in declared:
            return f"{prefix}{key}"
        sub = node.get(key)
        if isinstance(sub, DictConfig) and isinstance(declared[key], dict) and declared[key] \
                and (found := _undeclared(sub, declared[key], f"{prefix}{key}.")):
            return found
    return None


def train_config(overrides: list[str]) -> TrainConfig:
    """`python train.py OVERRIDES`'s typed config: composed, then converted and validated once (smith.config)."""
    return typed(compose("config", overrides, ("recipe",)))


def parse_argv(argv: list[str]) -> tuple[bool, list[str]]:
    """Split `--cfg job` (print the resolved config) from Hydra overrides."""
    show, rest, i = False, [], 0
    while i < len(argv):
        if argv[i] == "--cfg":
            show, i = True, i + 2
            continue
        if argv[i].startswith("--cfg="):
            show, i = True, i + 1
            continue
        if argv[i] in ("-h", "--help"):
            raise ConfigError("usage: KEY=VALUE overrides (recipe=NAME, max_steps=N, ...); --cfg job prints the config")
        rest.append(_quote_hash(argv[i]))
        i += 1
    return show, rest


def _quote_hash(override: str) -> str:
    """Hydra's override grammar rejects a bare '#', which `model=openai:<url>#<model>` needs: quote such values."""
    key, sep, value = override.partition("=")
    if sep and "#" in value and value[:1] not in "'\"":
        return f"{key}='{value}'"
    return override


def hydra_verbose(argv: list[str]) -> bool:
    """Whether the command line turns on Hydra's `hydra.verbose` (true, a logger name or a list of them): the
    boundary then shows the traceback of bad input and Ctrl-C too, like SMITH_TRACEBACK=1. Read off argv, since
    the boundary must know before composing (composing may be what fails)."""
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+") == "hydra.verbose":
            return value.strip().strip("'\"").lower() not in ("", "false", "null", "none", "[]")
    return False


def main_entry(config_name: str, groups: tuple[str, ...], run, argv: list[str] | None = None) -> None:  # noqa: ANN001
    """Shared body of train.py and eval.py (and `smith train` / `smith eval`): compose, optionally print, run, all
    behind the error boundary (smith.errors: bad input is one line and exit 2, Ctrl-C exit 130; tracebacks with
    `hydra.verbose=true`)."""
    argv = sys.argv[1:] if argv is None else argv

    def body() -> None:
        show, overrides = parse_argv(argv)
        cfg = compose(config_name, overrides, groups)
        if show:
            print(OmegaConf.to_yaml(cfg, resolve=True))
            return
        run(cfg)

    guarded(body, verbose=hydra_verbose(argv))


def train_main(argv: list[str] | None = None) -> None:
    """`python train.py ...` and `smith train ...`."""

    def run(cfg: DictConfig) -> None:
        from smith.train import main

        main(typed(cfg))

    main_entry("config", ("recipe",), run, argv)


def eval_main(argv: list[str] | None = None) -> None:
    """`python eval.py ...` and `smith eval ...`."""

    def run(cfg: DictConfig) -> None:
        from smith.evals import run

        run(cfg)

    main_entry("eval", ("suite",), run, argv)


def describe(group: str) -> list[tuple[str, str]]:
    """(name, first sentence of the header comment) of each config in a group: `smith recipes` / `smith suites`
    (the suites are those of the registry, smith.evals.SUITES, each described by its `recipes/suite/<name>.yaml`;
    no suite module is imported)."""
    import re

    from smith.evals import SUITES

    out = []
    for name in sorted(SUITES) if group == "suite" else options(group):
        lines = (RECIPES / group / f"{name}.yaml").read_text().splitlines()
        header = []
        for line in lines:
            if not line.startswith("#"):
                break
            text = line.lstrip("#").strip()
            if "@package" in text or text.startswith(("python ", "smith ")):
                continue
            header.append(text)
        first = re.split(r"(?<=\.)\s", " ".join(header), maxsplit=1)[0]
        out.append((name, first if len(first) <= 110 else first[:109].rstrip() + "…"))
    return out
