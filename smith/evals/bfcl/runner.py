"""BFCL v4 generation + evaluation for one OpenAI-compatible endpoint; runs inside the bfcl-eval venv.

Standalone on purpose (imports bfcl_eval and the standard library only): smith.evals.bfcl starts it with
the bfcl venv's python. BFCL_PROJECT_ROOT (set by the caller, before bfcl_eval is imported) puts every file
bfcl-eval writes -- results, scores, locks -- under the suite's output directory, never in site-packages.

The endpoint is registered as a function-calling model served through bfcl-eval's own OpenAI chat
completions handler, so requests carry `tools=[...]` and replies' `tool_calls` are scored by BFCL's checkers.
A limit keeps the first N entries of each category (memory entries keep the prerequisite conversations
they depend on); generation resumes (bfcl-eval skips ids already in the result files) and evaluation is
partial over the generated ids.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace


def _register(registry: str, served_name: str) -> None:
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING, ModelConfig
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler

    MODEL_CONFIG_MAPPING[registry] = ModelConfig(
        model_name=served_name, display_name=registry, url="", org="smith", license="",
        model_handler=OpenAICompletionsHandler, input_price=None, output_price=None, is_fc_model=True,
        underscore_to_dot=True,  # the chat-completions handler renames `a.b` tools to `a_b`; the checker maps back
    )


def _select_ids(categories: list[str], limit: int | None) -> dict[str, list[str]]:
    from bfcl_eval.utils import load_dataset_entry

    chosen: dict[str, list[str]] = {}
    for cat in categories:
        entries = load_dataset_entry(cat)
        main = [e for e in entries if "prereq" not in e["id"]]
        main = main[:limit] if limit else main
        needed = {dep for e in main for dep in e.get("depends_on", [])}
        chosen[cat] = [e["id"] for e in entries if e["id"] in needed] + [e["id"] for e in main]
    return chosen


def _tokens(value: object) -> float:
    if isinstance(value, list):
        return sum(_tokens(v) for v in value)
    return float(value) if isinstance(value, int | float) else 0.0


def _collect(root: Path, registry: str, categories: list[str]) -> dict:
    from bfcl_eval.constants.eval_config import RESULT_PATH, SCORE_PATH

    out: dict = {"categories": {}, "overall_csv": None}
    for cat in categories:
        row: dict = {}
        for path in (SCORE_PATH / registry).rglob(f"BFCL_v4_{cat}_score.json"):
            row.update(json.loads(path.read_text().splitlines()[0]))
        inputs = outputs = n = errors = 0.0
        for path in (RESULT_PATH / registry).rglob(f"BFCL_v4_{cat}_result.json"):
            for line in path.read_text().splitlines():
                entry = json.loads(line)
                n += 1
                inputs += _tokens(entry.get("input_token_count", 0))
                outputs += _tokens(entry.get("output_token_count", 0))
                errors += isinstance(entry.get("result"), str) and entry["result"].startswith("Error during inference")
        row.update({"generated": int(n), "inference_errors": int(errors), "input_tokens": inputs,
                    "output_tokens": outputs})
        out["categories"][cat] = row
    overall = SCORE_PATH / "data_overall.csv"
    if overall.is_file():
        with overall.open() as f:
            rows = [r for r in csv.DictReader(f) if r.get("Model") == registry]
        out["overall_csv"] = rows[0] if rows else None
    out["root"] = str(root)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--registry", required=True, help="the name results are filed under")
    p.add_argument("--served-name", required=True, help="the model id the endpoint expects")
    p.add_argument("--categories", nargs="+", required=True)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--temperature", type=float, default=0.001)
    p.add_argument("--out", required=True, help="where to write the collected scores (JSON)")
    a = p.parse_args(argv)
    root = Path(os.environ["BFCL_PROJECT_ROOT"])
    if not os.environ.get("OPENAI_BASE_URL"):
        raise SystemExit("error: OPENAI_BASE_URL is not set; the suite passes the endpoint through it")

    from bfcl_eval._llm_response_generation import main as generate
    from bfcl_eval.constants.eval_config import TEST_IDS_TO_GENERATE_PATH
    from bfcl_eval.eval_checker.eval_runner import main as evaluate

    _register(a.registry, a.served_name)
    ids = _select_ids(a.categories, a.limit)
    TEST_IDS_TO_GENERATE_PATH.write_text(json.dumps(ids, indent=1))
    generate(SimpleNamespace(
        model=[a.registry], test_category=a.categories, temperature=a.temperature, include_input_log=False,
        exclude_state_log=True, num_threads=a.threads, num_gpus=1, gpu_memory_utilization=0.9, backend="vllm",
        skip_server_setup=True, local_model_path=None, result_dir=None, allow_overwrite=False, run_ids=True,
        enable_lora=False, max_lora_rank=None, lora_modules=None,
    ))
    try:
        evaluate([a.registry], a.categories, None, None, partial_eval=True)
    except statistics.StatisticsError as e:
        # bfcl-eval's last step (data_overall.csv) takes the stdev of latencies and fails on a single entry;
        # every category's score file is already written by then
        print(f"warning: bfcl-eval could not write data_overall.csv ({e}); per-category scores are complete",
              file=sys.stderr)
    Path(a.out).write_text(json.dumps(_collect(root, a.registry, a.categories), indent=1))


if __name__ == "__main__":
    main()
