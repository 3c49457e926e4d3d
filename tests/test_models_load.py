"""load_backend: every SPEC form resolves to a working backend; everything else is one clear ValueError."""

from __future__ import annotations

import json

import pytest
import torch

from smith.errors import ConfigError
from smith.models import load_backend, resolve_model
from smith.models.base import ChatBackend, SamplingParams
from smith.models.hf import HFBackend
from smith.models.openai import OpenAIBackend

CONV = [[{"role": "user", "content": "What is 3 + 4?"}]]
GREEDY = SamplingParams(max_new_tokens=6, temperature=0.0)


@pytest.fixture(scope="module")
def lora_dir(tiny_model_dir, tmp_path_factory):
    """A LoRA checkpoint as PEFT saves it (adapter_config.json names the tiny model dir as base)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    path = tmp_path_factory.mktemp("ckpt") / "step-5"
    model.save_pretrained(path)
    return path, model.eval()


def test_tiny_and_model_dir(tiny_model_dir):
    cfg = {"model": {"tiny_dir": str(tiny_model_dir)}, "device": "cpu"}
    tiny = load_backend("tiny", cfg)
    assert isinstance(tiny, HFBackend) and isinstance(tiny, ChatBackend) and tiny.name == "tiny"
    assert resolve_model("tiny", {"tiny_dir": str(tiny_model_dir)}) == (str(tiny_model_dir), None)
    direct = load_backend(str(tiny_model_dir), cfg)
    assert direct.chat(CONV, None, GREEDY)[0].completion_ids == tiny.chat(CONV, None, GREEDY)[0].completion_ids
    assert next(direct.model.parameters()).dtype == torch.float32  # CPU runs float32 whatever model.dtype says


def test_tiny_warm_resolves_alike_for_training_and_evaluation(warm_model_dir, tmp_path):
    """One resolver of the built specs: `model=tiny-warm` in eval.py is the policy train.py starts from (the
    shipped copy, or a built `warm_dir`); a `warm_dir` with no model in it is one line naming the build command."""
    from smith.entry import train_config
    from smith.models import built_model
    from smith.train.checks import _model_dir

    conf = train_config(["recipe=tiny"])
    assert resolve_model("tiny-warm") == (str(warm_model_dir), None) == (built_model("tiny-warm", conf), None)
    assert _model_dir(conf, "tiny-warm") == str(warm_model_dir)
    with pytest.raises(ConfigError, match=r"^tiny-warm: no model in .*; build it with `smith tiny-model .* --warm`$"):
        resolve_model("tiny-warm", {"warm_dir": str(tmp_path / "none")})


def test_lora_checkpoint_uses_its_base_and_adapter(tiny_model_dir, lora_dir):
    path, live = lora_dir
    assert json.loads((path / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_model_dir)
    assert resolve_model(str(path)) == (str(tiny_model_dir), str(path))
    backend = load_backend(str(path), {"device": "cpu"})
    g = backend.chat(CONV, None, GREEDY)[0]
    same = HFBackend(live, backend.tokenizer).chat(CONV, None, GREEDY)[0]
    assert g.completion_ids == same.completion_ids
    assert g.logprobs == pytest.approx(same.logprobs, abs=1e-5)
    base = backend.chat(CONV, None, GREEDY, adapter=None)[0]
    assert base.logprobs != pytest.approx(g.logprobs, abs=1e-3)  # the adapter is really applied


def test_base_hint_file_wins(tiny_model_dir, lora_dir, tmp_path):
    path, _ = lora_dir
    moved = tmp_path / "run" / "step-5"
    moved.mkdir(parents=True)
    config = json.loads((path / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "/nowhere/base"  # as after copying a run to another machine
    (moved / "adapter_config.json").write_text(json.dumps(config))
    (moved / "adapter_model.safetensors").write_bytes((path / "adapter_model.safetensors").read_bytes())
    with pytest.raises(ValueError, match=r"base model '/nowhere/base' \(from .*adapter_config\.json\) is not"):
        resolve_model(str(moved))
    (moved / "smith_base.json").write_text(json.dumps({"base_model": "tiny"}))
    assert resolve_model(str(moved), {"tiny_dir": str(tiny_model_dir)}) == (str(tiny_model_dir), str(moved))
    (moved / "smith_base.json").write_text(json.dumps({}))
    with pytest.raises(ValueError, match="names no base model"):
        resolve_model(str(moved))
    (moved / "smith_base.json").unlink()  # the trainer's checkpoint marker carries the recipe's base model too
    (moved / "smith_checkpoint.json").write_text(json.dumps({"step": 5, "base_model": "tiny"}))
    assert resolve_model(str(moved), {"tiny_dir": str(tiny_model_dir)}) == (str(tiny_model_dir), str(moved))


def test_openai_spec():
    backend = load_backend("openai:http://127.0.0.1:8000/v1#Qwen/Qwen3-4B-Instruct-2507",
                           {"openai": {"api_key": "k", "timeout_s": 5, "max_retries": 1}})
    assert isinstance(backend, OpenAIBackend) and isinstance(backend, ChatBackend)
    assert (backend.base_url, backend.model) == ("http://127.0.0.1:8000/v1", "Qwen/Qwen3-4B-Instruct-2507")
    assert (backend.timeout_s, backend.max_retries) == (5.0, 1)
    assert backend.name == "openai:http://127.0.0.1:8000/v1#Qwen/Qwen3-4B-Instruct-2507"
    backend.close()


@pytest.mark.parametrize("spec,message", [
    ("", "non-empty"),
    ("openai:http://127.0.0.1:8000/v1", "bad openai spec"),
    ("openai:127.0.0.1:8000#m", "bad openai spec"),
    ("openai:http://h/v1#", "bad openai spec"),
    ("vllm:", "bad vllm spec"),
    ("scripted:oracle", "the suite resolves it"),
    ("ollama:llama3", "unknown model spec prefix"),
    ("/no/such/model/dir", "not a directory, a cached hub id"),
    ("nobody/no-such-model-xyz", "not a directory, a cached hub id"),
])
def test_bad_specs(spec, message):
    with pytest.raises(ValueError, match=message) as err:
        load_backend(spec)
    assert "\n" not in str(err.value)


def test_directory_without_a_model(tmp_path):
    with pytest.raises(ValueError, match=r"without config\.json or adapter_config\.json"):
        load_backend(str(tmp_path))
