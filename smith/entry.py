"""Hydra composition for train.py / eval.py with one-line errors instead of deep stack traces.

The training config composes `recipes/config.yaml` over the typed schema of smith.config (`TrainConfig`,
registered in Hydra's ConfigStore as `schema`), where every training default lives; the evaluation config
composes `recipes/eval.yaml` over the named suite's typed config (`Suite.config`, an `EvalConfig` of
smith.evals.config, registered as `eval_schema`). Each is converted to its typed object once, here
(`train_config`, `eval_config`), and passed down. We use Hydra's compose API (not @hydra.main) so that the run
directory is computed once, no `outputs/` folder appears behind the user's back, and every failure is one
readable line. Layer 5: it imports the schemas from below.
"""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from smith.config import TrainConfig, problem, typed
from smith.errors import ConfigError, guarded
from smith.evals.config import EvalConfig

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


def register_eval_schema(overrides: list[str]) -> type[EvalConfig]:
    """`eval_schema` in Hydra's ConfigStore: the typed config of the suite the overrides name (else
    recipes/eval.yaml's default suite), which `recipes/eval.yaml` builds on; only that suite's module is
    imported. Returns it."""
    from hydra.core.config_store import ConfigStore

    from smith.evals import get

    name = next((v for k, _, v in (o.partition("=") for o in reversed(overrides)) if k.lstrip("+~") == "suite"),
                None) or _default("eval", "suite")
    schema = get(name).config
    ConfigStore.instance().store(name="eval_schema", node=schema)
    return schema


def _default(config_name: str, group: str) -> str:
    """The option of `group` that recipes/<config_name>.yaml's defaults list picks."""
    for entry in OmegaConf.load(RECIPES / f"{config_name}.yaml").get("defaults", []):
        if isinstance(entry, DictConfig) and group in entry:
            return str(entry[group])
    raise ConfigError(f"recipes/{config_name}.yaml picks no {group}")


def _type_error(e: BaseException, root: type) -> str | None:
    """A value of the wrong type for a typed field (`max_steps=abc`), worded like the schema's own checks."""
    from omegaconf.errors import ValidationError

    while e is not None:
        if isinstance(e, ValidationError) and e.full_key:
            return problem(str(e.full_key), e.value, root)
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
    root = register_eval_schema(overrides) if config_name == "eval" else TrainConfig
    try:
        with initialize_config_dir(config_dir=str(RECIPES), version_base="1.3"):
            cfg = hydra_compose(config_name=config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        if message := _type_error(e, root):
            raise ConfigError(message) from None
        first = str(e).strip().splitlines()[0]
        raise ConfigError(f"bad override in {' '.join(overrides) or '(none)'}: {first}") from None
    preset = OmegaConf.select(cfg, "suite.quick") if quick and cfg.get("quick") else None
    if preset:  # `quick=true`: the suite's own overrides first, so that the user's still win
        return compose(config_name, [*map(str, preset), *overrides], groups, quick=False)
    return cfg


def train_config(overrides: list[str]) -> TrainConfig:
    """`python train.py OVERRIDES`'s typed config: composed, then converted and validated once (smith.config)."""
    return typed(compose("config", overrides, ("recipe",)))


def eval_config(overrides: list[str]) -> EvalConfig:
    """`python eval.py OVERRIDES`'s typed config: composed (the suite's quick preset applied for quick=true), then
    converted and validated once (smith.evals.config): the named suite's `Suite.config`."""
    from smith.evals.config import typed as typed_eval

    return typed_eval(compose("eval", overrides, ("suite",)))


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
        from smith.evals.config import typed as typed_eval

        run(typed_eval(cfg))

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
