"""Distillation baselines (smith.train.distill): generated teacher traces in both documented formats train a
LoRA adapter on the tiny model for a few SFT steps, only the teacher's tokens carry loss, and the adapter
evaluates with eval.py's model=<run dir>."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from smith.entry import compose, train_config

from .conftest import ROOT

TOOL = ("```python\ndef total(question: str) -> str:\n    import re\n    return str(sum(map(int, re.findall(r'\\d+', "
        "question))))\n```\n```json\n{\"name\": \"total\", \"description\": \"Sum of the numbers in the question.\", "
        "\"parameters\": {\"type\": \"object\", \"properties\": {\"question\": {\"type\": \"string\"}}, "
        "\"required\": [\"question\"]}}\n```")
SCHEMA = {"type": "function", "function": json.loads(TOOL.split("```json\n")[1].split("```")[0])}


def make_traces(path: Path, fmt: str, n: int = 6) -> Path:
    """A small generated fixture of teacher traces in `fmt` (the formats smith.train.distill documents)."""
    rows = []
    for i in range(n):
        a, b = 3 + i, 10 + 2 * i
        q = f"What is {a} + {b}?"
        if fmt == "retool":
            rows.append({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": (
                f"Let me compute it.\n<code>\n```python\nprint({a} + {b})\n```\n</code>\n<interpreter>{a + b}"
                f"</interpreter>\nAnswer: {a + b}")}]})
        elif i % 2:
            rows.append({"kind": "maker", "examples": [{"question": f"What is {k} + {k}?", "answer": str(2 * k)}
                                                       for k in range(i, i + 4)], "response": TOOL})
        else:
            call = json.dumps({"name": "total", "arguments": {"question": q}})
            rows.append({"kind": "user", "question": q, "tools": [SCHEMA], "messages": [
                {"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"},
                {"role": "tool", "content": str(a + b)}, {"role": "assistant", "content": str(a + b)}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_only_teacher_tokens_carry_loss(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    from smith.train.distill import read_traces, render

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    retool = read_traces(str(make_traces(tmp_path / "r.jsonl", "retool")))[0]
    ids, labels = render(retool, "retool", tok)
    learnt = tok.decode([t for t, lab in zip(ids, labels, strict=True) if lab != -100])
    assert "print(3 + 10)" in learnt and "Answer: 13" in learnt
    assert "<interpreter>" not in learnt and "What is 3 + 10?" not in learnt
    user = read_traces(str(make_traces(tmp_path / "l.jsonl", "latm")))[0]
    ids, labels = render(user, "latm", tok)
    learnt = tok.decode([t for t, lab in zip(ids, labels, strict=True) if lab != -100])
    assert "<tool_call>" in learnt and "<tool_response>" not in learnt and "total" in tok.decode(ids)


@pytest.mark.parametrize("fmt", ["retool", "latm"])
def test_distill_recipe_trains_an_adapter_that_eval_loads(fmt, tiny_model_dir, tmp_path):
    """retool through the documented train.py command; latm in process (smith.train.distill.distill)."""
    from smith.evals import tabmwp
    from smith.train import resolve_run_dir
    from smith.train.distill import distill

    traces = make_traces(tmp_path / "traces.jsonl", fmt)
    out = tmp_path / "run"
    args = [f"recipe=distill-{fmt}", f"distill.traces={traces}", "model.name_or_path=tiny",
            f"model.tiny_dir={tiny_model_dir}", f"output_dir={out}", "device=cpu", "distill.max_steps=3",
            "distill.batch_size=2", "lora.r=4", "lora.alpha=8"]
    if fmt == "retool":
        p = subprocess.run([sys.executable, "train.py", *args], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
        assert f"smith: distilled 6 retool traces into {out}" in p.stdout
    else:
        cfg = train_config(args)
        assert distill(cfg, resolve_run_dir(cfg)) == out
    info = json.loads((out / "distill.json").read_text())
    assert info["format"] == fmt and info["n_traces"] == 6 and info["steps"] == 3
    assert 0 < info["learnt_tokens"] < info["tokens"] and info["train_loss"] > 0
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert not (out / "sft").exists()
    fix = ROOT / "tests" / "fixtures" / "ood"
    s = tabmwp.run(compose("eval", ["suite=tabmwp", f"model={out}", f"suite.data={fix}/tabmwp_test.json",
                                    f"output_dir={tmp_path / 'eval'}", "limit=1", "suite.cot_max_new_tokens=8",
                                    "suite.bootstrap=20"], ("suite",)))
    assert s["model"] == str(out) and s["details"]["n_questions"] == 3 and s["details"]["tokens"]["all"]["output"] > 0


def test_train_py_refuses_missing_traces_in_one_line(tmp_path):
    p = subprocess.run([sys.executable, "train.py", "recipe=distill-retool", f"distill.traces={tmp_path}/no.jsonl",
                        f"output_dir={tmp_path / 'run'}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "distill.traces=" in p.stderr and "no such file" in p.stderr
    assert not (tmp_path / "run").exists()


def test_bad_traces_fail_in_one_line(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    from smith.errors import ConfigError
    from smith.train.distill import read_traces, rows_of

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\n[1, 2]\n')
    with pytest.raises(ConfigError, match="line 2 is not a JSON object"):
        read_traces(str(bad))
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    with pytest.raises(ConfigError, match=r"trace 1 is not a distill\.format=latm trace"):
        rows_of([{"kind": "teacher"}], "latm", tok, 100)
    with pytest.raises(ConfigError, match=r"trace 1 is not a distill\.format=retool trace"):
        rows_of([{"messages": [{"role": "user", "content": "q"}]}], "retool", tok, 100)
