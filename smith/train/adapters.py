"""The policy and its frozen evaluator/judge copy: two LoRA adapters of one PEFT model (`default` and
`evaluator`). The copy is re-synced to the policy every `evaluator.sync_every` steps (`sync_evaluator`),
checkpointed beside it (`evaluator_state`), and either adapter can be written out as a LoRA dir for an engine
that serves it (`save_adapter`). Under DeepSpeed ZeRO-3 every one of them gathers the full tensors first."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch

EVALUATOR_ADAPTER = "evaluator"
POLICY_ADAPTER = "default"


def gathered(params: list[torch.Tensor], modify: bool = False) -> AbstractContextManager:
    """Under DeepSpeed ZeRO-3 each rank holds a shard of every parameter (a copy between them would touch empty
    tensors): gather the full tensors for the block, and with `modify` scatter rank 0's changes back after.
    A collective: every rank must enter it. Without ZeRO-3 it does nothing."""
    if not any(hasattr(p, "ds_id") for p in params):
        return nullcontext()
    import deepspeed

    return deepspeed.zero.GatheredParameters(params, modifier_rank=0 if modify else None)


def sync_evaluator(model: Any) -> None:
    """Copy the policy adapter into the frozen evaluator adapter (paper: periodic re-sync). On every rank."""
    params = dict(model.named_parameters())
    twin = {n: n.replace(f".{POLICY_ADAPTER}.", f".{EVALUATOR_ADAPTER}.") for n in params if f".{POLICY_ADAPTER}." in n}
    pairs = [(params[n], params[t]) for n, t in twin.items() if t in params]
    with torch.no_grad(), gathered([t for pair in pairs for t in pair], modify=True):
        for source, target in pairs:
            target.copy_(source)


def evaluator_state(model: Any) -> dict[str, torch.Tensor]:
    """The evaluator adapter's full tensors (gathered under ZeRO-3: call it on every rank)."""
    named = [(n, p) for n, p in model.named_parameters() if f".{EVALUATOR_ADAPTER}." in n]
    with gathered([p for _, p in named]):
        return {n: p.detach().cpu().clone() for n, p in named}


def save_adapter(model: Any, name: str, path: Path, write: bool = True) -> None:
    """PEFT adapter `name` of `model` as a LoRA dir (adapter_config.json + safetensors) that vLLM loads. Every
    rank calls it (under ZeRO-3 the tensors are gathered first); only those with `write` write."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    with gathered([p for n, p in model.named_parameters() if f".{name}." in n]):
        state = get_peft_model_state_dict(model, adapter_name=name)
        if write:
            path.mkdir(parents=True, exist_ok=True)
            save_file({k: v.detach().cpu().contiguous() for k, v in state.items()},
                      str(path / "adapter_model.safetensors"))
    if write:
        model.peft_config[name].save_pretrained(str(path))
