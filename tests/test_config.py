"""The typed training config (smith/config.py) is the one home of every default: recipes/config.yaml states none,
and the classes and pure functions that offer a library default take it from the schema instead of a literal."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap

import pytest
import yaml

from smith.config import TrainConfig, field_of, validate
from smith.errors import ConfigError

from .conftest import ROOT


def test_config_yaml_is_only_a_defaults_list():
    data = yaml.safe_load((ROOT / "recipes" / "config.yaml").read_text())
    own = sorted(set(data) - {"defaults"})
    assert not own, f"recipes/config.yaml states settings of its own: {own}"
    assert data["defaults"] == ["schema", "_self_", {"recipe": "tiny"}]


def _leaves(cls: type, prefix: str = "") -> list[tuple[str, dataclasses.Field]]:
    out = []
    for f in dataclasses.fields(cls):
        kind = field_of(f"{prefix}{f.name}")
        sub = kind.default_factory if kind.default_factory is not dataclasses.MISSING else None
        if sub is not None and dataclasses.is_dataclass(sub):
            out += _leaves(sub, f"{prefix}{f.name}.")
        else:
            out.append((f"{prefix}{f.name}", f))
    return out


def test_every_setting_has_help_text():
    missing = [key for key, f in _leaves(TrainConfig) if not f.metadata.get("help")]
    assert missing == []


def _library_defaults() -> dict:
    """Objects below the config that offer a default for a config value -> {parameter or field: config key}."""
    from smith.models.openai import OpenAIBackend
    from smith.pool import ToolPool
    from smith.rewards.evaluation import evaluate_with_model
    from smith.rewards.use import correctness_reward, efficiency
    from smith.train.advantages import per_axis_advantages, summed_advantages
    from smith.train.args import SmithGRPOConfig
    from smith.train.data import TaskSource

    return {
        TaskSource: {"bank_size": "tasks.bank_size", "band_examples": "build.band_examples",
                     "band_heldout": "build.band_heldout"},
        efficiency: {"eta_mid": "use.eta_mid", "eta_min": "use.eta_min"},
        correctness_reward: {"max_turns": "use.max_turns", "eta_mid": "use.eta_mid", "eta_min": "use.eta_min"},
        per_axis_advantages: {"std_floor": "dapo.std_floor", "dynamic_sampling": "dapo.dynamic_sampling"},
        summed_advantages: {"std_floor": "dapo.std_floor", "dynamic_sampling": "dapo.dynamic_sampling"},
        ToolPool.__init__: {"cap_per_category": "pool.cap_per_category"},
        OpenAIBackend.__init__: {"timeout_s": "openai.timeout_s", "max_retries": "openai.max_retries",
                                 "concurrency": "openai.concurrency"},
        evaluate_with_model: {"max_turns": "evaluator.max_turns"},
        SmithGRPOConfig: {"advantage": "dapo.advantage", "std_floor": "dapo.std_floor",
                          "dynamic_sampling": "dapo.dynamic_sampling", "refill_rounds": "dapo.refill_rounds",
                          "refill_oversample": "dapo.refill_oversample", "loss_norm": "dapo.loss_norm",
                          "sync_every": "evaluator.sync_every"},
    }


def _default_nodes(obj: object) -> dict[str, ast.expr]:
    """The source expressions of a function's parameter defaults or a dataclass's field defaults."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj))).body[0]
    if isinstance(tree, ast.ClassDef):
        out = {}
        for node in tree.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                value = node.value
                if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
                    value = next(k.value for k in value.keywords if k.arg == "default")
                out[node.target.id] = value
        return out
    args = tree.args
    positional = args.posonlyargs + args.args
    out = {a.arg: d for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True)}
    out.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
    return out


@pytest.mark.parametrize("obj", list(_library_defaults()), ids=lambda o: o.__qualname__)
def test_library_defaults_come_from_the_config(obj):
    """Each default is written once: in smith/config.py. Elsewhere it is `SectionConfig.field`, never a literal."""
    schema = TrainConfig(name="x")
    nodes = _default_nodes(obj)
    for name, key in _library_defaults()[obj].items():
        node = nodes[name]
        assert isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id.endswith(("Config", "Weights")), f"{obj.__qualname__}.{name}: {ast.unparse(node)}"
        section, _, leaf = key.rpartition(".")
        expected = getattr(getattr(schema, section), leaf)
        actual = (inspect.signature(obj).parameters[name].default if not inspect.isclass(obj)
                  else {f.name: f.default for f in dataclasses.fields(obj)}[name])
        assert actual == expected, f"{obj.__qualname__}.{name}={actual!r}, config {key}={expected!r}"


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: setattr(c, "max_steps", 0), "max_steps=0 must be an integer >= 1"),
    (lambda c: setattr(c.evaluator, "kind", "foo"), "evaluator.kind=foo is not one of self, direct, external"),
    (lambda c: setattr(c.dapo, "dynamic_sampling", "maybe"),
     "dapo.dynamic_sampling=maybe is not one of refill, drop, off"),
    (lambda c: setattr(c.dapo, "dynamic_sampling", True),  # the boolean it was before refill
     "dapo.dynamic_sampling=true is not one of refill, drop, off"),
    (lambda c: setattr(c.rewards.weights, "use", "abc"), "rewards.weights.use=abc must be a number >= 0.0"),
    (lambda c: setattr(c.sandbox, "timeout_s", 0.0), "sandbox.timeout_s=0 must be a number >= 0.001"),
])
def test_validation_is_one_line_per_field(change, message):
    conf = TrainConfig(name="x")
    change(conf)
    with pytest.raises(ConfigError) as e:
        validate(conf)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_resume_of_a_run_saved_before_a_setting_existed_sees_no_change(tmp_path):
    """A run saved before the schema gained a setting ran with its default: resuming it is not a change."""
    from omegaconf import OmegaConf

    from smith.config import as_plain
    from smith.entry import train_config
    from smith.train.resume import config_changes

    cfg = train_config(["recipe=tiny-random"])
    saved = as_plain(cfg)
    del saved["dapo"]["advantage"], saved["distill"]
    OmegaConf.save(OmegaConf.create(saved), tmp_path / "config.yaml")
    assert config_changes(cfg, tmp_path) == []
    changed = train_config(["recipe=tiny-random", "dapo.advantage=sum_then_normalize"])
    assert config_changes(changed, tmp_path) == ['dapo.advantage: (absent) -> "sum_then_normalize"']


@pytest.mark.parametrize("override", ["+max_step=3", "+dapo.learnin_rate=1", "+rewards.weights.uze=1"])
def test_a_key_the_schema_lacks_is_a_one_line_error_naming_it(override):
    """Hydra's `+key=value` (and so a key a recipe adds) lands in any node; the typed config refuses it."""
    from smith.entry import train_config

    key = override[1:].partition("=")[0]
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)} is not a training setting"):
        train_config(["recipe=tiny-random", override])
