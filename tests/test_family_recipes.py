"""Issue 29: the paper's other backbones run a SMITH step end to end through `python train.py`: `recipe=qwen3-8b`,
`recipe=granite-3.3-8b` and `recipe=ablation-self-judge` with their family's real chat template (random tiny
weights of the family's architecture, built here: no download) and a scripted policy text
(`smith.train.dry_run:family_tools`). Everything after the text is real: the chat format, the rollout, the sandbox,
the self-evaluator's tool calls in the family's syntax, the pool, the TRL update. A run whose evaluator's calls
never parse says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smith.entry import train_config
from smith.models.chat_format import ENDPOINT, ReplyFormat
from smith.models.scripted import ScriptedBackend
from smith.models.serve import running
from smith.train import resolve_run_dir
from smith.train.dry_run import family_tools
from smith.train.run import train as run_training

from .chat_families import family_model, family_tokenizer

SHAPES = ["generation.backend=scripted", "device=cpu", "model.dtype=float32", "max_steps=1", "save_every=1",
          "dapo.num_generations=2", "dapo.prompts_per_step=2", "dapo.gradient_checkpointing=false",
          "dapo.warmup_steps=0", "build.k_heldout=2", "lora.r=4", "lora.alpha=8", "sandbox.workers=2",
          "tasks.categories=[spell_backward,lcm]", "tasks.bank_size=16",
          "dapo.dynamic_sampling=drop"]  # one step of the recipe as sampled (refill: tests/test_refill.py)


def hermes_everywhere(ctx: str, fmt: ReplyFormat) -> str:
    """What smith wrote before its family layer: Hermes `<tool_call>` blocks whatever the model's family."""
    text = family_tools(ctx, fmt)
    reply = fmt.parse(text)
    return ENDPOINT.reply_text(fmt.assistant_message(reply, 0)) if reply.calls else text


def train(recipe: str, model: Path, run: Path, cache: Path, *extra: str,
          script: str = "smith.train.dry_run:family_tools") -> tuple[list[dict], list[dict]]:
    """`python train.py recipe=... ...`: the same composition and run, in this process (a second interpreter would
    cost more than the step)."""
    cfg = train_config([f"recipe={recipe}", f"model.name_or_path={model}", *SHAPES, f"generation.script={script}",
                             f"tasks.cache_dir={cache}", f"output_dir={run}", *extra])
    run_training(cfg, resolve_run_dir(cfg))
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    episodes = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    return rows, episodes


def assert_a_working_step(rows: list[dict], episodes: list[dict]) -> None:
    (row,) = rows
    assert row["rewards/format/mean"] > 0 and row["rewards/evaluation/mean"] > 0 and row["rewards/use/mean"] > 0
    assert row["evaluation/no_tool_call"] == 0.0  # every question of the self-evaluator got a parsed call
    assert row["pool/size"] > 0
    calls = [c for e in episodes for c in e["trace"].get("calls", [])]
    assert calls and all(c["status"] == "ok" for c in calls) and not any(c.get("name") == "draft" for c in calls)


@pytest.fixture(scope="module")
def models(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {name: family_model(tiny_model_dir, name, root / name) for name in ("qwen3", "granite-3.3")}


def test_granite_3_3(models, tmp_path, rg_cache):
    """Granite's self-evaluator writes `<|tool_call|>[...]`: before the family layer none of its calls parsed."""
    rows, episodes = train("granite-3.3-8b", models["granite-3.3"], tmp_path / "run", rg_cache)
    assert_a_working_step(rows, episodes)


def test_qwen3_8b_with_its_external_judge(models, tiny_model_dir, tmp_path, rg_cache):
    """Qwen3-8B's own template is not prefix-preserving (the first tool output used to stop it); its judge is an
    external endpoint, here smith's server over the same scripted text."""
    judge = ScriptedBackend(family_tokenizer(tiny_model_dir, "qwen3"), family_tools, name="judge")
    with running(judge) as url:
        rows, episodes = train("qwen3-8b", models["qwen3"], tmp_path / "run", rg_cache, f"judge.base_url={url}",
                                  "judge.model_name=judge")
    assert_a_working_step(rows, episodes)
    assert rows[0]["rewards/judge/mean"] == pytest.approx(0.8 * 0.5)  # one good build (0.8), one broken (0)


def test_ablation_self_judge_with_thinking_on(models, tmp_path, rg_cache):
    """`model.thinking=true`: every reply opens with a think block holding a code block and a tool call; neither
    reaches build parsing (no `multiple_blocks`) nor tool-call parsing (no call of `draft`)."""
    rows, episodes = train("ablation-self-judge", models["qwen3"], tmp_path / "run", rg_cache,
                              "model.thinking=true")
    assert_a_working_step(rows, episodes)
    builds = [e for e in episodes if e["kind"] == "build"]
    assert all("<think>" in e["trace"]["response"] for e in builds)
    assert {e["trace"]["parse"]["reason"] for e in builds} == {"ok", "missing_json_block"}  # the broken one
    assert rows[0]["rewards/judge/mean"] > 0


def test_an_evaluator_whose_calls_never_parse_is_reported(models, tmp_path, rg_cache, capsys):
    """Hermes calls under a Granite model: every r_eval is 0, and the run says why, in its log and on stderr."""
    rows, _ = train("granite-3.3-8b", models["granite-3.3"], tmp_path / "run", rg_cache,
                    script="tests.test_family_recipes:hermes_everywhere")
    assert rows[0]["rewards/evaluation/mean"] == 0 and rows[0]["evaluation/no_tool_call"] == 1.0
    assert "the evaluator made no tool call that parsed on any of its" in capsys.readouterr().err
