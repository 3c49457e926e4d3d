"""Run `train()` in this process and record, at every rollout, what the scale-out tests check.

`python -m tests.scale_probe OUT.json OVERRIDE...` (a subprocess of tests/test_scale_out.py: vLLM and
torch.distributed are set up once per process). At each step's rollout it records the shapes of the samples
handed to TRL and, with a colocated vLLM engine, what that engine generates for fixed prompts next to the HF
policy's teacher-forced log-probs of the same tokens (the weights TRL synced must be the policy's). At every loss
call it records the vLLM importance-sampling ratio that reaches TRL's loss (its shape and range).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

PROBE_PROMPTS = [[1, 200, 300, 400, 2], [1, 500, 600]]  # fixed token ids, inside every tiny vocabulary


def _teacher_forced(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    logits = model(input_ids=torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1).tolist()


def _vllm_vs_policy(trainer: Any) -> dict[str, Any]:
    """What the colocated engine samples now (seeded), and the log-probs of those tokens under the policy as it is
    now and under the base model (adapter off). vLLM runs the float32 checkpoint in bfloat16 (its "auto" dtype
    on CPU), so the engine matches the policy to bfloat16 precision, not exactly."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=16, seed=0, logprobs=0)
    outs = trainer.vllm_generation.llm.generate([{"prompt_token_ids": p} for p in PROBE_PROMPTS], params,
                                                use_tqdm=False)
    model = trainer.accelerator.unwrap_model(trainer.model)
    row: dict[str, Any] = {"ids": [], "engine": [], "policy": [], "base": []}
    with torch.no_grad():
        for prompt, out in zip(PROBE_PROMPTS, outs, strict=True):
            completion = [int(t) for t in out.outputs[0].token_ids]
            row["ids"].append(completion)
            row["engine"].append([float(step[t].logprob) for step, t in
                                  zip(out.outputs[0].logprobs, completion, strict=True)])
            row["policy"].append(_teacher_forced(model, prompt, completion))
            with model.disable_adapter():
                row["base"].append(_teacher_forced(model, prompt, completion))
    return row


def main(out_path: str, overrides: list[str]) -> None:
    from smith.entry import compose
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
        if self.use_vllm and self.vllm_generation.mode == "colocate":
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
    cfg = compose("config", overrides, ("recipe",))
    train(cfg, resolve_run_dir(cfg))
    with open(out_path, "w") as f:
        json.dump(records, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
