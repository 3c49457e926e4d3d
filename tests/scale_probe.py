"""Run `train()` in this process and record, at every rollout, what the scale-out tests check.

`python -m tests.scale_probe OUT.json OVERRIDE...` (a subprocess of tests/test_scale_out.py: vLLM and
torch.distributed are set up once per process). At each step's rollout it records the shapes of the samples
handed to TRL and, where vLLM serves the adapters (a colocated engine or a LoRA server), what its policy and
evaluator adapters generate for fixed prompts next to the trainer's policy and evaluator copy (the adapters smith
pushed must be the trainer's). At every loss
call it records the vLLM importance-sampling ratio that reaches TRL's loss (its shape and range).
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import torch

PROBE_PROMPTS = [[1, 200, 300, 400, 2], [1, 500, 600]]  # fixed token ids, inside every tiny vocabulary


def _teacher_forced(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    logits = model(input_ids=torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1).tolist()


def _vllm_vs_policy(trainer: Any) -> dict[str, Any]:
    """What vLLM (the colocated engine or a LoRA server) samples now (seeded) with the policy adapter, and the
    log-probs of those tokens under the trainer's policy as it is now and under the base model (adapters off);
    the same seeded sample with the evaluator adapter; and a greedy tool-calling turn (a use prompt, on which the
    warm policy calls the tool) from vLLM's evaluator adapter and from the trainer's evaluator copy on the HF
    loop. vLLM computes in the policy's float32, so it matches the trainer to float32 summation-order noise."""
    from smith.models.base import SamplingParams
    from smith.models.hf import HFBackend
    from smith.rollout.prompts import use_messages
    from smith.train.adapters import EVALUATOR_ADAPTER
    from smith.train.warm import demo_tool

    seeded = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=16, seed=0)
    model = trainer.accelerator.unwrap_model(trainer.model)
    policy = trainer.engine.policy.continue_ids(PROBE_PROMPTS, seeded)
    row: dict[str, Any] = {"ids": [g.completion_ids for g in policy], "engine": [g.logprobs for g in policy],
                           "policy": [], "base": [],
                           "evaluator_ids": [g.completion_ids for g in trainer.engine.copy.continue_ids(
                               PROBE_PROMPTS, seeded)]}
    with torch.no_grad():
        for prompt, completion in zip(PROBE_PROMPTS, row["ids"], strict=True):
            row["policy"].append(_teacher_forced(model, prompt, completion))
            with model.disable_adapter():
                row["base"].append(_teacher_forced(model, prompt, completion))
    tool = demo_tool("lcm", random.Random(0))[1].tool.openai_tool()
    turn = use_messages("Find the Least Common Multiple (LCM) of these numbers: 599, 506, 848, 485")
    greedy = SamplingParams(max_new_tokens=48, temperature=0.0)
    hf = HFBackend(model, trainer.processing_class, progress=False).with_adapter(EVALUATOR_ADAPTER)
    for name, backend in (("engine", trainer.engine.copy), ("trainer", hf)):
        g = backend.chat([turn], [[tool]], greedy)[0]
        row[f"evaluator_greedy_{name}"] = {"ids": g.completion_ids, "text": g.text,
                                           "calls": [c.name for c in backend.chat_format.parse(g.text).calls]}
    return row


def main(out_path: str, overrides: list[str]) -> None:
    from smith.entry import train_config
    from smith.train import resolve_run_dir
    from smith.train.run import train
    from smith.train.trainer import SmithTrainer

    records: list[dict[str, Any]] = []
    rollout = SmithTrainer._rollout

    def probed(self: Any, prompts: list[str], trainer: Any) -> dict[str, Any]:
        out = rollout(self, prompts, trainer)
        row: dict[str, Any] = {
            "step": self.state.global_step,
            "keys": sorted(out),
            "n": {k: len(v) for k, v in out.items()},
            "aligned": all(len(c) == len(lp) == len(m) for c, lp, m in
                           zip(out["completion_ids"], out["logprobs"], out["env_mask"], strict=True)),
            "completion_tokens": sum(len(c) for c in out["completion_ids"]),
        }
        if self.engine is not None:
            row["probe"] = _vllm_vs_policy(self)
        records.append(row)
        return out

    compute_loss = SmithTrainer._compute_loss

    def probed_loss(self: Any, model: Any, inputs: dict[str, Any]) -> Any:
        ratio = inputs.get("importance_sampling_ratio")
        mask = inputs["completion_mask"].bool()
        if ratio is not None and records and mask.any():  # a micro-batch of truncated episodes keeps no token
            rows = [r[m] for r, m in zip(ratio.float(), mask, strict=True) if m.sum() > 1]
            records[-1].setdefault("is_ratio", []).append({
                "shape": list(ratio.shape), "completion_shape": list(inputs["completion_ids"].shape),
                "min": float(ratio[mask].min()), "max": float(ratio[mask].max()),
                "rows_varying": sum(bool(r.max() > r.min()) for r in rows), "rows": len(rows)})
        return compute_loss(self, model, inputs)

    SmithTrainer._rollout = probed
    SmithTrainer._compute_loss = probed_loss
    cfg = train_config(overrides)
    train(cfg, resolve_run_dir(cfg))
    with open(out_path, "w") as f:
        json.dump(records, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
