"""rg's summary: summary.json (results schema), results.md and accuracy_by_group.png from a run's episode rows,
and the label a run gets in tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .baselines import METHODS
from .metrics import accuracy_table
from .sources import ItemSource, ReasoningGym

if TYPE_CHECKING:
    from .config import RgEval


def write_rg_summary(out: Path, cfg: RgEval, identity: dict[str, Any], rows: list[dict[str, Any]],
                     tool_rows: dict[str, dict[str, Any]], extra: dict[str, Any] | None = None,
                     source: ItemSource | None = None) -> dict:
    """summary.json (results schema: macro and group accuracies, the accuracy over all questions, mean I/O tokens
    per question as metrics), results.md and accuracy_by_group.png from the episode rows of this run's questions
    (`extra`: a mode's own details, e.g. a baseline's budgets and spend; `source`: whose headline row results.md
    shows, default reasoning-gym's paper row)."""
    import numpy as np

    from smith.evals import common
    from smith.evals.common import bootstrap, markdown_table

    from .plots import plot_groups

    correct: dict[str, list[float]] = {}
    groups: dict[str, str] = {}
    splits: dict[str, str] = {}
    for r in rows:
        correct.setdefault(r["category"], []).append(float(r["correct"]))
        groups[r["category"]], splits[r["category"]] = r["group"], r["split"]
    table = accuracy_table(correct, groups, splits, cfg.suite.bootstrap, cfg.seed)

    def mean_tokens(sel: list[dict[str, Any]]) -> dict[str, float | None]:
        if not sel:
            return {"input": None, "output": None, "n": 0}
        return {"input": float(np.mean([r["prompt_tokens"] for r in sel])),
                "output": float(np.mean([r["completion_tokens"] for r in sel])), "n": len(sel)}

    tokens = {"all": mean_tokens(rows), **{sp: mean_tokens([r for r in rows if r["split"] == sp])
                                           for sp in ("seen", "unseen")}}
    for cat, cell in table["categories"].items():
        cell.update({f"{k}_tokens": v for k, v in mean_tokens([r for r in rows if r["category"] == cat]).items()
                     if k != "n"})
        if cat in tool_rows:
            cell["tool_source"] = tool_rows[cat]["source"]
    build = [r for r in tool_rows.values() if r["source"] != "pool"]
    details = {
        **identity, "n_questions": len(rows), **table, "tokens": tokens,
        "build_tokens": {"input": sum(r["prompt_tokens"] for r in build),
                         "output": sum(r["completion_tokens"] for r in build), "tools": len(build),
                         "built_ok": sum(bool(r["ok"]) for r in build)}, **(extra or {}),
    }
    metrics = _metrics(table, rows, tokens["all"])
    overall = bootstrap([float(r["correct"]) for r in rows], n_resamples=cfg.suite.bootstrap, seed=cfg.seed)
    metrics["overall"] = common.metric(overall["value"], overall["lo"], overall["hi"], len(rows), "bootstrap-95",
                                       overall["se"])  # over all questions: the paper's out-of-domain numbers
    summary = common.write_summary(out, cfg, metrics, details, label=cfg.suite.label or _label(identity))
    cat_rows = [{"category": c, "group": v["group"], "split": v["split"], "n": v["n"],
                 "accuracy": 100 * v["value"], "95% CI": f"[{100 * v['lo']:.1f}, {100 * v['hi']:.1f}]",
                 "in/out tokens": f"{v['input_tokens']:,.0f} / {v['output_tokens']:,.0f}",
                 "tool": v.get("tool_source", "")} for c, v in sorted(table["categories"].items(),
                                                                      key=lambda kv: (kv[1]["split"], kv[1]["group"]))]
    source = source or ReasoningGym(cfg)
    head, columns = source.headline(summary)
    md = (f"# {summary['suite']}: {summary['label']}\n\n" + markdown_table([{"Method": summary["label"], **head}],
                                                                          ["Method", *columns])
          + "\nPercent, ± bootstrap standard error; groups average their categories, Avg averages the groups; "
          "I/O tokens are mean input / output tokens per question.\n\n"
          + markdown_table(cat_rows, ["category", "group", "split", "n", "accuracy", "95% CI", "in/out tokens",
                                      "tool"], floatfmt=".1f"))
    (out / "results.md").write_text(md)
    if isinstance(source, ReasoningGym):  # the figure's x axis is the paper's reasoning-gym groups
        plot_groups({summary["label"]: summary["details"]}, out / "accuracy_by_group.png")
    return summary


def _metrics(table: dict[str, Any], rows: list[dict[str, Any]], tokens: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The results-schema metrics: `<split>/avg` and `<split>/<group>` accuracies (stratified bootstrap, n =
    questions) and `tokens/input`, `tokens/output` (mean tokens per question, all turns of it)."""
    from smith.evals.common import metric

    def cell(c: dict[str, Any], n: int) -> dict[str, Any]:
        return metric(c["value"], c["lo"], c["hi"], n, "stratified-bootstrap-95", c["se"])

    out: dict[str, dict[str, Any]] = {}
    for split, macro in table["macro"].items():
        out[f"{split}/avg"] = cell(macro, sum(r["split"] == split for r in rows))
        for g, c in table["groups"][split].items():
            out[f"{split}/{g}"] = cell(c, sum(r["split"] == split and r["group"] == g for r in rows))
    for kind in ("input", "output"):
        out[f"tokens/{kind}"] = metric(tokens[kind], n=tokens["n"], unit="tokens per item")
    return out


def _short(spec: str) -> str:
    """A model SPEC as a table label: the endpoint's model name, or the last two parts of a path."""
    spec = spec.split("#")[-1] if spec.startswith("openai:") else spec.removeprefix("vllm:")
    return "/".join(Path(spec).parts[-2:]) or spec


def _label(identity: dict[str, Any]) -> str:
    name = _short(identity["model"])
    if identity["mode"] == "cot":
        return f"{name} (CoT)"
    if identity["mode"] in METHODS:
        method = METHODS[identity["mode"]][1]
        by = "" if identity["writer"] == identity["model"] else f", tools by {_short(identity['writer'])}"
        return f"{name} ({method}{by})"
    if identity["mode"] == "pool":
        return f"{name} (pool {_short(identity['pool'])})"
    if identity["writer"] != identity["model"]:
        return f"{name} (tools by {_short(identity['writer'])})"
    return f"{name} (build+use)"
