"""Issue 15: the paper's loss. L = L_DAPO(B_build) + L_DAPO(B_use), each term normalised by its own kept-token
count, one backward pass; checked against a hand computation of the gradient on a small batch."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

from smith.entry import train_config
from smith.train.args import grpo_args
from smith.train.data import prompt_rows
from smith.train.trainer import AXIS_REWARDS, SmithTrainer, kept_rows

B, P, C = 4, 6, 12
IS_BUILD = torch.tensor([True, False, True, False])
LENGTHS = torch.tensor([12, 3, 9, 4])  # build completions longer than use ones, as in real runs


def _trainer(tiny_model_dir, tmp_path, loss_norm: str) -> SmithTrainer:
    cfg = train_config(["recipe=tiny-random", f"dapo.loss_norm={loss_norm}"])
    args = grpo_args(cfg, tmp_path, on_gpu=False, num_processes=1)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    # no session or rollout: the trainer computes losses only (args.loss_norm says which)
    trainer = SmithTrainer(model=model, reward_funcs=AXIS_REWARDS, args=args, processing_class=tok,
                           train_dataset=Dataset.from_list(prompt_rows(8)))
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def _batch(vocab: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    mask = (torch.arange(C).unsqueeze(0) < LENGTHS.unsqueeze(1)).long()
    tool_mask = torch.ones(B, C, dtype=torch.long)
    tool_mask[0, 4:6] = 0  # a fed-back tool response inside a completion: not the model's tokens
    kept = mask * tool_mask
    return {
        "prompt_ids": torch.randint(0, vocab, (B, P), generator=g), "prompt_mask": torch.ones(B, P, dtype=torch.long),
        "completion_ids": torch.randint(0, vocab, (B, C), generator=g), "completion_mask": mask,
        "tool_mask": tool_mask, "advantages": torch.tensor([1.0, -0.5, -1.0, 2.0]),
        "ref_per_token_logps": -torch.rand(B, C, generator=g) * 3 - 5,
        "is_build": IS_BUILD,
        "num_items_in_batch": kept.sum(), "num_items_build": kept[IS_BUILD].sum(),
        "num_items_use": kept[~IS_BUILD].sum(),
    }


def _hand_loss(trainer: SmithTrainer, batch: dict[str, torch.Tensor], per_kind: bool) -> torch.Tensor:
    """DAPO at ratio 1 (fresh samples): -A * ratio + beta * k3-KL to the reference (times the ratio: TRL's bias
    correction), summed over kept tokens, divided by the kind's token count (per_kind) or the batch's."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    logits = trainer.model(input_ids=ids).logits[:, P - 1: -1] / trainer.temperature
    logp = logits.log_softmax(-1).gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)
    ref = batch["ref_per_token_logps"]
    ratio = torch.exp(logp - logp.detach())
    kl = (torch.exp(ref - logp) - (ref - logp) - 1) * (ratio if trainer.args.use_bias_correction_kl else 1.0)
    per_token = -batch["advantages"].unsqueeze(1) * ratio + trainer.beta * kl
    kept = batch["completion_mask"] * batch["tool_mask"]
    if not per_kind:
        return (per_token * kept).sum() / kept.sum()
    return sum((per_token * kept)[rows].sum() / kept[rows].sum() for rows in (IS_BUILD, ~IS_BUILD))


def _grads(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.mark.parametrize("loss_norm", ["per_kind", "batch"])
def test_loss_gradient_matches_the_hand_computation(loss_norm, tiny_model_dir, tmp_path):
    trainer = _trainer(tiny_model_dir, tmp_path, loss_norm)
    assert trainer.beta > 0  # the KL term is normalised with its kind's tokens too
    batch = _batch(trainer.model.config.vocab_size)
    trainer.model.train()
    trainer._compute_loss(trainer.model, batch).backward()
    got = _grads(trainer.model)
    trainer.model.zero_grad()
    _hand_loss(trainer, batch, per_kind=loss_norm == "per_kind").backward()
    want = _grads(trainer.model)
    trainer.model.zero_grad()
    _hand_loss(trainer, batch, per_kind=loss_norm != "per_kind").backward()
    other = _grads(trainer.model)
    assert torch.allclose(got, want, rtol=1e-3, atol=1e-6 * want.abs().max().item())
    assert not torch.allclose(got, other, rtol=1e-2, atol=1e-5)  # the two normalisations really differ here


def test_a_rank_without_one_kind_still_adds_that_term(tiny_model_dir, tmp_path):
    """A rank holding only use samples normalises them by the use count alone, and TRL's loss (whose metrics are
    collectives) runs once: its metrics are logged once per micro-step, not once per kind."""
    trainer = _trainer(tiny_model_dir, tmp_path, "per_kind")
    batch = _batch(trainer.model.config.vocab_size)
    only_use = {k: v[~IS_BUILD] if v.ndim else v for k, v in batch.items()}
    only_use["num_items_build"] = torch.tensor(50)  # build tokens held by the other rank
    trainer.model.train()
    loss = trainer._compute_loss(trainer.model, only_use)
    hand = _hand_loss(trainer, only_use, per_kind=False)  # all use: its own count is the whole local count
    assert torch.allclose(loss, hand, rtol=1e-5)
    assert len(trainer._metrics["train"]["entropy"]) == 1


def test_clip_higher_binds_asymmetrically_on_known_old_log_probs(tiny_model_dir, tmp_path):
    """Issue 30: with old log-probs of an earlier update (`dapo.updates_per_batch` > 1) the ratio leaves 1 and TRL's
    DAPO clips it at 1 - epsilon for negative advantages and 1 + epsilon_high for positive ones: the same 0.25 off
    1 is clipped below (0.75 < 0.8) and not above (1.25 < 1.28). A clipped token keeps only its KL gradient."""
    trainer = _trainer(tiny_model_dir, tmp_path, "per_kind")
    eps, eps_high = trainer.args.epsilon, trainer.args.epsilon_high
    assert (eps, eps_high) == (0.2, 0.28)
    batch = _batch(trainer.model.config.vocab_size)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    trainer.model.train()
    with torch.no_grad():
        logits = trainer.model(input_ids=ids).logits[:, P - 1: -1] / trainer.temperature
        now = logits.log_softmax(-1).gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)
    # advantages 1.0, -0.5, -1.0, 2.0: unclipped above, clipped below, unclipped below, clipped above
    ratios = torch.tensor([1.25, 0.75, 0.85, 1.35])
    batch["old_per_token_logps"] = now - ratios.log().unsqueeze(1)
    trainer._compute_loss(trainer.model, batch).backward()
    got = _grads(trainer.model)
    trainer.model.zero_grad()

    def hand(clip: bool) -> torch.Tensor:
        logits = trainer.model(input_ids=ids).logits[:, P - 1: -1] / trainer.temperature
        logp = logits.log_softmax(-1).gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)
        ratio = torch.exp(logp - batch["old_per_token_logps"])
        a = batch["advantages"].unsqueeze(1)
        bounded = torch.clamp(ratio, 1 - eps, 1 + eps_high) if clip else ratio
        ref = batch["ref_per_token_logps"]
        kl = (torch.exp(ref - logp) - (ref - logp) - 1) * (ratio if trainer.args.use_bias_correction_kl else 1.0)
        per_token = -torch.min(ratio * a, bounded * a) + trainer.beta * kl
        kept = batch["completion_mask"] * batch["tool_mask"]
        return sum((per_token * kept)[rows].sum() / kept[rows].sum() for rows in (IS_BUILD, ~IS_BUILD))

    hand(clip=True).backward()
    want = _grads(trainer.model)
    trainer.model.zero_grad()
    hand(clip=False).backward()
    unclipped = _grads(trainer.model)
    assert torch.allclose(got, want, rtol=1e-3, atol=1e-6 * want.abs().max().item())
    assert not torch.allclose(got, unclipped, rtol=1e-2, atol=1e-5)
    # TRL's logs, once per micro-step, over the kept tokens weighted as the loss weights them (each kind's tokens
    # sum to the same weight): the use half's clip ratio (rows 1 and 3) counts half, the unclipped build half the other
    kept = (batch["completion_mask"] * batch["tool_mask"]).sum(1).float()
    metrics = trainer._metrics["train"]
    assert metrics["clip_ratio/high_mean"] == pytest.approx([(kept[3] / (kept[1] + kept[3])).item() / 2])
    assert metrics["clip_ratio/low_mean"] == pytest.approx([(kept[1] / (kept[1] + kept[3])).item() / 2])


def test_rows_without_a_kept_token_skip_the_forward_and_change_nothing(tiny_model_dir, tmp_path):
    """A dropped group's rows (tool_mask zeroed) leave the micro-batch before the model runs: the gradient is the hand
    computation's over the whole batch, and the model sees only the kept rows (one, when none is kept)."""
    trainer = _trainer(tiny_model_dir, tmp_path, "per_kind")
    batch = _batch(trainer.model.config.vocab_size)
    batch["tool_mask"][[1, 2]] = 0  # one build and one use row dropped
    kept = batch["completion_mask"] * batch["tool_mask"]
    batch.update(num_items_in_batch=kept.sum(), num_items_build=kept[IS_BUILD].sum(),
                 num_items_use=kept[~IS_BUILD].sum())
    rows = []
    hook = trainer.model.register_forward_pre_hook(lambda _m, _args, kw: rows.append(kw["input_ids"].shape[0]),
                                                   with_kwargs=True)
    trainer.model.train()
    try:
        trainer._compute_loss(trainer.model, batch).backward()
        assert rows == [2]
        got = _grads(trainer.model)
        trainer.model.zero_grad()
        _hand_loss(trainer, batch, per_kind=True).backward()
        want = _grads(trainer.model)
        assert torch.allclose(got, want, rtol=1e-3, atol=1e-6 * want.abs().max().item())
        trainer.model.zero_grad()
        batch["tool_mask"][:] = 0
        batch.update(num_items_in_batch=torch.tensor(0), num_items_build=torch.tensor(0), num_items_use=torch.tensor(0))
        loss = trainer._compute_loss(trainer.model, batch)
        loss.backward()
        assert loss.item() == 0.0 and rows[-1] == 1
        assert all(p.grad is not None for p in trainer.model.parameters() if p.requires_grad)
    finally:
        hook.remove()
    batch["tool_mask"][:] = 1
    batch["tool_mask"][[0, 2]] = 0
    three = kept_rows(batch, 3)  # another rank kept 3 rows: the 2 kept here and the first masked one, in batch order
    assert three["advantages"].tolist() == batch["advantages"][[0, 1, 3]].tolist()
    assert three["is_build"].tolist() == [True, False, False]
    assert three["num_items_in_batch"] is batch["num_items_in_batch"]  # scalars pass through


def test_the_no_grad_forwards_score_only_the_rows_the_loss_keeps(tiny_model_dir, tmp_path):
    """TRL's reference (and old) log-probs come from forwards without grad over the step's rows: once the rollout
    has said which rows the loss keeps (`_scored_rows`), a dropped group's rows are not run, and the kept rows get
    the values of a forward over every row."""
    trainer = _trainer(tiny_model_dir, tmp_path, "per_kind")
    batch = _batch(trainer.model.config.vocab_size)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    mask = torch.ones_like(ids)
    rows = []
    hook = trainer.model.register_forward_pre_hook(lambda _m, _args, kw: rows.append(kw["input_ids"].shape[0]),
                                                   with_kwargs=True)
    try:
        with torch.no_grad():
            every, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, C)
            trainer._scored_rows = torch.tensor([True, False, False, True])
            some, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, C)
            trainer._scored_rows = torch.zeros(B, dtype=torch.bool)
            none, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, C)
    finally:
        hook.remove()
        trainer._scored_rows = None
    assert rows == [B, 2]  # every row, then the two kept, then no forward at all
    assert torch.allclose(some[[0, 3]], every[[0, 3]], atol=1e-5)
    assert some[[1, 2]].abs().sum() == 0 and none.shape == every.shape and none.abs().sum() == 0


def test_a_learning_rate_0_control_runs_no_loss_forward(tiny_model_dir, tmp_path):
    """The benchmarks' control (`dapo.learning_rate=0`) could not change a weight: its loss is a constant 0 that
    backpropagates to no parameter, without a forward of the model."""
    trainer = _trainer(tiny_model_dir, tmp_path, "per_kind")
    batch = _batch(trainer.model.config.vocab_size)
    rows = []
    hook = trainer.model.register_forward_pre_hook(lambda _m, _args, kw: rows.append(kw["input_ids"].shape[0]),
                                                   with_kwargs=True)
    trainer.args.learning_rate = 0.0
    try:
        loss = trainer._compute_loss(trainer.model, batch)
        loss.backward()
    finally:
        hook.remove()
    assert rows == [] and loss.item() == 0.0
    assert all(p.grad is None for p in trainer.model.parameters())
