"""A tiny random Qwen3-architecture model with a locally trained byte-level BPE tokenizer.

Tests and the README's main command need a real causal LM with the real Qwen3-Instruct-2507 chat
template (tools, `<tool_call>` round trips) but cannot download anything. This builds one
deterministically in seconds: the same seed gives bit-identical weights. Built once per path.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from smith.builds import cached_build, read_marker

TINY_VERSION = 1
MARKER = "smith_tiny.json"
WARM_SPEC = "tiny-warm"  # the warm-started tiny policy: built by smith.train.warm (it needs the rollout), shipped
WARM_SHIPPED = Path(__file__).resolve().parents[1] / "assets" / "tiny-warm"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen3 adds these as (non-special) added tokens; they must stay single tokens to round-trip.
ADDED = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def corpus(seed: int, n: int = 300) -> list[str]:
    """Generated text of the kinds the tiny model sees: Python tools, JSON schemas, tool-call chats."""
    rng = random.Random(seed)
    words = ["sum", "count", "bits", "prime", "factor", "solve", "number", "question", "answer", "value",
             "list", "string", "reverse", "word", "letters", "base", "convert", "gcd", "lcm", "equation"]
    texts = []
    for _ in range(n):
        name = "_".join(rng.sample(words, 2))
        a, b = rng.randint(0, 9999), rng.randint(1, 999)
        code = (f"import re\n\ndef {name}(question: str) -> str:\n"
                f"    nums = [int(x) for x in re.findall(r\"-?\\d+\", question)]\n"
                f"    return str(sum(nums) % {b})\n")
        schema = {"type": "function", "function": {"name": name, "description": f"Computes the {rng.choice(words)}.",
                  "parameters": {"type": "object", "properties": {"question": {"type": "string"}},
                                 "required": ["question"]}}}
        call = json.dumps({"name": name, "arguments": {"question": f"What is {a} + {b}?"}})
        texts.append(f"```python\n{code}```\n```json\n{json.dumps(schema, indent=2)}\n```")
        texts.append(
            f"<|im_start|>system\n# Tools\n<tools>\n{json.dumps(schema)}\n</tools><|im_end|>\n"
            f"<|im_start|>user\nWhat is {a} + {b}?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{call}\n"
            f"</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{a + b}\n</tool_response><|im_end|>\n"
            f"<|im_start|>assistant\nThe answer is {a + b}.<|im_end|>\n"
        )
    return texts


def train_tokenizer(corpus: list[str], vocab_size: int):  # noqa: ANN201
    """A byte-level BPE over `corpus` with Qwen3's special and added tokens and its chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_instruct_2507_chat_template

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL + ADDED,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[],
        clean_up_tokenization_spaces=False,
    )
    fast.add_tokens(ADDED)  # registered as added tokens, as in Qwen3, so they never split
    fast.chat_template = qwen3_instruct_2507_chat_template
    return fast


def build_tiny_model(
    path: str | os.PathLike, seed: int = 0, vocab_size: int = 2048, head_dim: int = 16
) -> tuple[Path, bool]:
    """Build (or reuse) the tiny model at `path`. Returns (path, built_now). vLLM's CPU attention needs
    `head_dim` 32, 64 or 128 (the scale-out tests build one with 32)."""
    path = Path(path)
    want = {"version": TINY_VERSION, "seed": seed, "vocab_size": vocab_size}
    if head_dim != 16:  # the default model's marker (and every cache of it) stays as it was
        want["head_dim"] = head_dim

    def build(tmp: Path) -> None:
        import torch
        from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

        os.environ.setdefault("RAYON_NUM_THREADS", "1")  # BPE merges deterministic
        tok = train_tokenizer(corpus(seed), vocab_size)
        config = Qwen3Config(
            vocab_size=len(tok),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=head_dim,
            max_position_embeddings=8192,
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
            pad_token_id=tok.pad_token_id,
        )
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
        model.generation_config = GenerationConfig(
            eos_token_id=[tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")],
            pad_token_id=tok.pad_token_id,
            do_sample=True,
            temperature=0.7,
            top_p=0.95,
        )
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / MARKER).write_text(json.dumps(want))

    return cached_build(path, lambda p: read_marker(p, MARKER) == want, build, "tiny model")
