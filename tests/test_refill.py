"""Issue 30: DAPO's dynamic sampling as published. With `dapo.dynamic_sampling=refill` a group whose every reward axis
ties is replaced by a fresh group of the same kind that has signal, for at most `dapo.refill_rounds` extra rounds;
`drop` is the old behaviour (tied groups leave the loss), `off` keeps them. A scripted rollout decides, per key,
which groups tie, so the test knows what each round must do."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

from smith.entry import train_config
from smith.errors import ConfigError
from smith.pool import PoolEntry, ToolPool
from smith.rollout.episodes import Sample
from smith.toolspec import ToolSpec
from smith.train.args import grpo_args, per_device_batch
from smith.train.callbacks import SmithCallback
from smith.train.data import prompt_rows
from smith.train.session import Session
from smith.train.trainer import AXIS_REWARDS, REFILL_ORDINAL, SmithTrainer

G, PROMPTS = 2, 4


def tied(key: str) -> bool:
    """The dataset's groups all tie; refill groups have signal."""
    return int(key.split(":")[1]) < REFILL_ORDINAL


class ScriptedRollout:
    """Stands in for the episode runner: one short completion per key repeat, its rewards from `ties(key)`
    (every sample alike, or the first of the group better than the others). Counts the keys it ran."""

    def __init__(self, tok, ties: Callable[[str], bool]) -> None:
        self.tok, self.ties, self.last_grading_seconds, self.ran = tok, ties, 0.0, Counter()

    def run(self, build: list[str], use: list[str], rng, step: int) -> list[Sample]:
        out = []
        for key in build + use:
            n = self.ran[key]
            self.ran[key] += 1
            kind = key.split(":")[0]
            s = Sample(kind, "lcm", self.tok(f"{key} question")["input_ids"], [5, 6, 7, self.tok.eos_token_id],
                       [-1.0] * 4, [1] * 4)
            good = 0.0 if self.ties(key) else float(n == 0)
            if kind == "build":
                s.rewards.update(format=0.5, evaluation=good, judge=0.5)
            else:
                s.rewards.update(use=2 * good, tool=0.2)
            out.append(s)
        return out

    def take_meters(self) -> dict[str, float]:
        """No model generates here: no per-role counts."""
        return {}


class ToolRollout(ScriptedRollout):
    """Also writes one tool per build key and leaves it as the sample's pool candidate, as the trainer's rollout
    does; the trainer admits those of the groups its update sees."""

    def run(self, build: list[str], use: list[str], rng, step: int) -> list[Sample]:
        out = super().run(build, use, rng, step)
        for key, s in zip(build, out, strict=False):  # the build samples come first
            name = "tool_" + key.replace(":", "_")
            code = f"def {name}(question: str) -> str:\n    return question\n"
            schema = {"name": name, "description": "echo", "parameters": {
                "type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}
            s.candidate = PoolEntry(self.category_of(key), ToolSpec(code, schema, name), 1.0)
            s.trace["key"] = key
        return out

    category_of = staticmethod(lambda key: Keys().category_of(key))


class Keys:
    """Task keys as tasks; the dataset's keys alternate two categories by ordinal, a refill key names its own."""

    def task(self, key: str) -> str:
        return key

    def category_of(self, key: str) -> str:
        _, ordinal, *named = key.split(":")
        return named[0] if named else ("lcm", "gcd")[int(ordinal) % 2]


class Batches(SmithTrainer):
    """Keeps what each step's update is given (advantages and the mask of kept tokens)."""

    seen: list[dict[str, torch.Tensor]]

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        self.seen.append({"advantages": out["advantages"].clone(), "tool_mask": out["tool_mask"].clone(),
                          "is_build": out["is_build"].clone()})
        return out


def run(tiny_model_dir: Path, tmp_path: Path, ties: Callable[[str], bool], *overrides: str, steps: int = 1,
        tools: bool = False):
    cfg = train_config(["recipe=tiny-random", f"dapo.num_generations={G}", f"dapo.prompts_per_step={PROMPTS}",
                             f"max_steps={steps}", "save_every=100", "judge.kind=none", *overrides])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    session = Session(cfg, run_dir, ToolPool())
    rollout = ToolRollout(tok, ties) if tools else ScriptedRollout(tok, ties)
    trainer = Batches(model=AutoModelForCausalLM.from_pretrained(tiny_model_dir), reward_funcs=AXIS_REWARDS,
                      args=grpo_args(cfg, run_dir, on_gpu=False, num_processes=1), processing_class=tok,
                      train_dataset=Dataset.from_list(prompt_rows(PROMPTS * steps)), session=session, tasks=Keys(),
                      make_rollout=lambda policy, copy: rollout, callbacks=[SmithCallback(session)])
    trainer.seen = []
    trainer.train()
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    episodes = [json.loads(x) for x in (run_dir / "rollouts.jsonl").read_text().splitlines()]
    return trainer.seen, rows, episodes, rollout.ran


def test_refill_keeps_stratification_logs_every_episode_and_admits_only_what_is_trained(tiny_model_dir, tmp_path):
    """Issue 44, item 4: a replacement group has the category of the group it replaces; the groups a refill
    generated and did not train on (and the tied ones it replaced) are logged with `kept: false` and admit no
    tool; the kept build groups' tools are admitted."""
    _, _, episodes, ran = run(tiny_model_dir, tmp_path, tied, "dapo.dynamic_sampling=refill", tools=True)
    keys = Keys()
    kept = [e for e in episodes if e["kept"]]
    original = ["build:0", "use:0", "build:1", "use:1"]
    assert [keys.category_of(e["key"]) for e in kept[::G]] == [keys.category_of(k) for k in original]
    assert all(not tied(e["key"]) for e in kept)
    dropped = Counter(e["key"] for e in episodes if not e["kept"])
    assert sum(dropped.values()) + len(kept) == sum(ran.values())  # every generated episode is logged once
    assert set(original) <= set(dropped) and all(n == G for n in dropped.values())
    pool = {e["function_name"] for e in json.loads((tmp_path / "run" / "tool_pool.json").read_text())["entries"]}
    trained_builds = {e["key"] for e in kept if e["kind"] == "build"}
    admitted = {e["trace"]["key"] for e in episodes if e["kind"] == "build" and e["trace"].get("admitted")}
    assert admitted and admitted <= trained_builds, (admitted, trained_builds)
    assert not any(e["trace"].get("admitted") for e in episodes if not e["kept"])
    assert pool == {"tool_" + k.replace(":", "_") for k in admitted}


def test_refill_replaces_every_tied_group_with_one_of_its_kind(tiny_model_dir, tmp_path):
    seen, (row,), episodes, ran = run(tiny_model_dir, tmp_path, tied, "dapo.dynamic_sampling=refill")
    (batch,) = seen
    # the update sees B groups, all with signal: nothing masked, every group's advantages non-zero
    assert batch["tool_mask"].bool().all()
    assert (batch["advantages"].view(-1, G).abs().sum(1) > 0).all()
    assert (row["dynamic_sampling/groups_generated"], row["dynamic_sampling/groups_kept"],
            row["dynamic_sampling/extra_rounds"], row["dynamic_sampling/frac_dropped"]) == (12.0, 4.0, 1.0, 0.0)
    # one round of 2 fresh groups per tied one (refill_oversample), each run G times; the first of each kind kept
    fresh = [k for k in ran if not tied(k)]
    assert len(fresh) == PROMPTS * 2 and all(ran[k] == G for k in fresh)
    trained = [e["key"] for e in episodes if e["kept"]]
    assert [k.split(":")[0] for k in trained] == ["build"] * G + ["use"] * G + ["build"] * G + ["use"] * G
    assert all(not tied(k) for k in trained)  # rollouts.jsonl logs the keys trained on
    assert batch["is_build"].tolist() == [k.startswith("build:") for k in trained]


def test_drop_keeps_the_tied_groups_out_of_the_loss_and_draws_nothing(tiny_model_dir, tmp_path):
    seen, (row,), episodes, ran = run(tiny_model_dir, tmp_path, lambda key: key == "use:0",
                                      "dapo.dynamic_sampling=drop")
    assert set(ran) == {"build:0", "use:0", "build:1", "use:1"}
    assert seen[0]["tool_mask"].view(-1, G, seen[0]["tool_mask"].shape[1]).bool().all(-1).all(-1).tolist() == \
        [True, False, True, True]
    assert (row["dynamic_sampling/groups_generated"], row["dynamic_sampling/groups_kept"],
            row["dynamic_sampling/extra_rounds"], row["dynamic_sampling/frac_dropped"]) == (4.0, 3.0, 0.0, 0.25)
    assert [e["key"] for e in episodes] == [k for k in ("build:0", "use:0", "build:1", "use:1") for _ in range(G)]


def test_off_keeps_tied_groups_in_the_loss(tiny_model_dir, tmp_path):
    seen, (row,), _, _ = run(tiny_model_dir, tmp_path, tied, "dapo.dynamic_sampling=off")
    assert seen[0]["tool_mask"].bool().all() and not seen[0]["advantages"].any()
    assert (row["dynamic_sampling/groups_kept"], row["dynamic_sampling/frac_dropped"]) == (4.0, 0.0)


def test_refill_rounds_are_bounded_and_what_stays_tied_is_dropped(tiny_model_dir, tmp_path):
    """Only build refills ever have signal: the use groups stay tied through every round, then are dropped."""
    seen, (row,), episodes, ran = run(tiny_model_dir, tmp_path, lambda key: tied(key) or key.startswith("use:"),
                                      "dapo.dynamic_sampling=refill", "dapo.refill_rounds=2",
                                      "dapo.refill_oversample=3")
    # round 1: 4 tied groups x 3 fresh; round 2: the 2 use groups x 3; then no more
    assert (row["dynamic_sampling/groups_generated"], row["dynamic_sampling/extra_rounds"],
            row["dynamic_sampling/groups_kept"]) == (4.0 + 12 + 6, 2.0, 2.0)
    assert sum(1 for k in ran if not tied(k)) == 18
    kinds = [(e["key"].split(":")[0], tied(e["key"])) for e in episodes if e["kept"]]
    assert kinds == [("build", False)] * G + [("use", True)] * G + [("build", False)] * G + [("use", True)] * G
    keep = seen[0]["tool_mask"].view(-1, G, seen[0]["tool_mask"].shape[1]).bool().all(-1).all(-1)
    assert keep.tolist() == [True, False, True, False]


def test_refill_draws_the_same_fresh_keys_again_for_the_same_step(tiny_model_dir, tmp_path):
    """Fresh keys are fixed by step, round, rank and position: a resumed run replays its refills."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = run(tiny_model_dir, tmp_path / "a", tied, "dapo.dynamic_sampling=refill")[2]
    again = run(tiny_model_dir, tmp_path / "b", tied, "dapo.dynamic_sampling=refill")[2]
    assert [e["key"] for e in first] == [e["key"] for e in again]
    assert [e["key"] for e in first if not e["kept"]]  # the groups generated and not trained on are logged too


def test_refill_refuses_a_batch_whose_processes_split_groups():
    cfg = (train_config(["recipe=tiny-random", "dapo.prompts_per_step=2", "dapo.num_generations=2",
                                   "dapo.dynamic_sampling=refill"]))
    with pytest.raises(ConfigError, match=r"^dapo\.dynamic_sampling=refill replaces whole groups on each process: "
                                          r"dapo\.prompts_per_step=2 must be a multiple of the 4 processes"):
        per_device_batch(cfg, 4)
    cfg.dapo.dynamic_sampling = "drop"
    assert per_device_batch(cfg, 4) == 1  # drop needs no whole groups
