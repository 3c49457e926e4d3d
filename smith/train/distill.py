"""The paper's distillation baselines (SMITH main table: "ReTool (distill Qwen-32B)", "LATM (distill
GPT-4.1)"): supervised fine-tuning of a LoRA adapter on a teacher's traces, with TRL's `SFTTrainer`.

    python train.py recipe=distill-retool distill.traces=PATH [model.name_or_path=...] [output_dir=D]
    python train.py recipe=distill-latm distill.traces=PATH

The traces are yours (JSONL, one trace a line; nothing is downloaded). Two formats, `distill.format`:

- `retool`, code-interpreter traces as ReTool's cold-start data: `{"messages": [{"role": "system" | "user" |
  "assistant" | "tool", "content": str}, ...]}`. Assistant text is learnt except the interpreter's output,
  which ReTool masks from the loss: `<interpreter>...</interpreter>` spans inside an assistant message, and
  `tool` messages between assistant turns.
- `latm`, tool-maker and tool-user traces as LATM's two roles, rendered with smith's own prompts:
  `{"kind": "maker", "examples": [{"question": str, "answer": str}, ...], "response": str}` (the build
  prompt over the examples -> the teacher's ```python tool + ```json schema), and `{"kind": "user",
  "question": str, "tools": [OpenAI tool schemas], "messages": [assistant / tool messages]}` (the use prompt
  with those tools -> the teacher's tool calls and answer; tool outputs are masked).

Only the teacher's tokens carry loss (prompts and fed-back outputs are -100), as in smith.train.warm. The run
directory gets the adapter and tokenizer (so `python eval.py suite=rg model=<run dir>` evaluates it), a model
card and `distill.json` (traces read, tokens, training loss).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from smith.config import TrainConfig
from smith.errors import ConfigError, writable_dir

_INTERPRETER = re.compile(r"(<interpreter>.*?</interpreter>)", re.S)


def read_traces(path: str) -> list[dict[str, Any]]:
    """The JSONL traces; a line that is not a JSON object fails with its line number."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"distill.traces={path}: no such file")
    out = []
    for i, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"distill.traces={path} line {i} is not JSON: {e.msg}") from None
        if not isinstance(row, dict):
            raise ConfigError(f"distill.traces={path} line {i} is not a JSON object")
        out.append(row)
    if not out:
        raise ConfigError(f"distill.traces={path} holds no traces")
    return out


def _said(tok: Any, text: str, learn: bool) -> tuple[list[int], list[int]]:
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return ids, ids if learn else [-100] * len(ids)


def _episode(tok: Any, prompt: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
             rest: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """Prompt (masked) + the assistant turns of `rest` (learnt, interpreter spans masked) + fed-back tool
    messages (masked), in the token layout of the tokenizer's chat format (an assistant message's structured
    `tool_calls` written in its family's syntax)."""
    from smith.models.chat_format import chat_format

    fmt = chat_format(tok)
    ids = fmt.render(prompt, tools)
    labels = [-100] * len(ids)
    i = 0
    while i < len(rest):
        msg = rest[i]
        if msg["role"] != "assistant":
            raise ValueError(f"expected an assistant message, got {msg['role']!r}")
        for part in _INTERPRETER.split(fmt.reply_text(msg)):
            if part:
                a, b = _said(tok, part, not part.startswith("<interpreter>"))
                ids, labels = ids + a, labels + b
        ids.append(fmt.end_of_turn)
        labels.append(fmt.end_of_turn)
        fed = []
        i += 1
        while i < len(rest) and rest[i]["role"] != "assistant":
            fed.append(rest[i])
            i += 1
        if fed:
            cont = fmt.continuation(fed)
            ids, labels = ids + cont, labels + [-100] * len(cont)
    return ids, labels


def render(trace: dict[str, Any], fmt: str, tok: Any) -> tuple[list[int], list[int]]:
    """(input_ids, labels) of one trace of format `fmt`."""
    from smith.rollout.prompts import build_messages, use_messages

    if fmt == "retool":
        msgs = trace["messages"]
        first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
        return _episode(tok, msgs[:first], None, msgs[first:])
    if trace["kind"] == "maker":
        examples = [SimpleNamespace(question=e["question"], answer=e["answer"]) for e in trace["examples"]]
        return _episode(tok, build_messages(examples), None, [{"role": "assistant", "content": trace["response"]}])
    if trace["kind"] == "user":
        return _episode(tok, use_messages(trace["question"]), trace["tools"], trace["messages"])
    raise ValueError(f"kind {trace['kind']!r} is neither maker nor user")


def rows_of(traces: list[dict[str, Any]], fmt: str, tok: Any, max_length: int) -> list[dict[str, list[int]]]:
    """SFT rows; a malformed trace fails with its index, an over-long one is cut at `max_length` tokens."""
    rows = []
    for n, trace in enumerate(traces, 1):
        try:
            ids, labels = render(trace, fmt, tok)
        except (KeyError, TypeError, ValueError, StopIteration) as e:
            raise ConfigError(f"trace {n} is not a distill.format={fmt} trace (docs/training.md, "
                              f"\"Distillation baselines\"): {type(e).__name__}: {e}") from None
        rows.append({"input_ids": ids[:max_length], "labels": labels[:max_length]})
    return rows


def distill(conf: TrainConfig, run_dir: Path) -> Path:
    """Fine-tune the LoRA policy of `conf.model` on `conf.distill.traces`; the adapter lands in `run_dir`."""
    import torch
    from datasets import Dataset

    from smith.train.args import sft_args
    from smith.train.run import load_policy
    from smith.train.warm import PlainLossSFTTrainer

    d = conf.distill
    if not d.traces:
        raise ConfigError("distill.traces=PATH is needed: a JSONL file of teacher traces (docs/training.md)")
    traces = read_traces(d.traces)
    writable_dir(run_dir, "output_dir")
    on_gpu = conf.device != "cpu" and torch.cuda.is_available()
    torch.manual_seed(conf.seed)
    model, tok, base = load_policy(conf, on_gpu)
    rows = rows_of(traces, d.format, tok, d.max_length)
    args = sft_args(
        run_dir / "sft", on_gpu, conf.model.dtype, num_train_epochs=d.epochs, max_steps=d.max_steps,
        per_device_train_batch_size=d.batch_size, learning_rate=d.learning_rate,
        lr_scheduler_type="cosine", logging_steps=10, seed=conf.seed, data_seed=conf.seed,
    )
    trainer = PlainLossSFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok)
    result = trainer.train()
    shutil.rmtree(run_dir / "sft", ignore_errors=True)
    model.save_pretrained(run_dir)
    tok.save_pretrained(run_dir)
    learnt = sum(sum(x != -100 for x in r["labels"]) for r in rows)
    info = {"format": d.format, "traces": d.traces, "n_traces": len(rows), "base_model": base,
            "tokens": sum(len(r["input_ids"]) for r in rows), "learnt_tokens": learnt,
            "steps": trainer.state.global_step, "train_loss": result.training_loss}
    (run_dir / "distill.json").write_text(json.dumps(info, indent=1) + "\n")
    (run_dir / "README.md").write_text(
        f"# {run_dir.name}\n\nA LoRA adapter distilled by smith (recipe `{conf.name}`, SFT with TRL) on "
        f"{len(rows)} `{d.format}` teacher traces from `{d.traces}` over `{base}`; {trainer.state.global_step} "
        f"steps. Evaluate it with `python eval.py suite=rg model={run_dir}`.\n")
    print(f"smith: distilled {len(rows)} {d.format} traces into {run_dir} ({trainer.state.global_step} steps, "
          f"loss {result.training_loss:.3f})")
    return run_dir
