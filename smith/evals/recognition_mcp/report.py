"""Recognition-MCP outputs: the details and metrics of summary.json (results schema), results.md and the paper's
three-panel figure (Figure 3/4), and the tools-off pilot's calibration table.

The figure has one panel per metric -- manual success, oracle discovery, overall success -- with
+-1 rollout-bootstrap standard error bars, as in the released plotter.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from smith.evals import common
from smith.evals.common import markdown_table

from .scoring import METRICS, scored_rows, summarize

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.transforms import Transform

PANELS = {"manual_success": "Manual success", "oracle_discovery": "Oracle discovery",
          "overall_success": "Overall success"}
_SIZE = re.compile(r"^(.*?)[-_:]?(\d+(?:\.\d+)?)[bB]$")
_TUNE = re.compile(r"[-_](?:instruct|chat|it)$", re.I)
MARKERS = "osD^vP*X"
LINESTYLES = ("-", "--", "-.", ":")


def family_and_size(model: str) -> tuple[str, float | None]:
    """'Qwen/Qwen3.5-27B' -> ('Qwen3.5', 27.0), 'Qwen/Qwen2.5-32B-Instruct' -> ('Qwen2.5', 32.0); names
    without a size -> (name, None)."""
    base = _TUNE.sub("", model.rstrip("/").split("/")[-1])
    m = _SIZE.match(base)
    return (m.group(1), float(m.group(2))) if m else (base, None)


def _order(value: object) -> tuple:
    """Models by family then size; numbers numerically; everything else by name."""
    if isinstance(value, str):
        fam, size = family_and_size(value)
        return (fam, size if size is not None else -1.0, value)
    return ("", float(value), "")


def group(records: list[dict], *fields: str) -> dict[tuple, list[dict]]:
    """Records grouped by the given fields, groups in reading order (models by size)."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        out[tuple(r[f] for f in fields)].append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(_order(x) for x in kv[0])))


def _pm(m: dict) -> str:
    return f"{m['value']:.3f} ± {m['se']:.3f}"


def _table_rows(summaries: list[tuple[dict, dict]]) -> list[dict]:
    rows = []
    for head, s in summaries:
        rows.append({**head, "rollouts": s["rollouts"], "scored": s["scored"],
                     **{k: _pm(s[k]) for k in METRICS}, "tool calls / rollout": round(s["tool_calls_per_rollout"], 2),
                     "no-tool rollouts": s["no_tool_rollouts"], "manual solves": s["manual_solves"]})
    return rows


def _tick_labels(ticks: dict[float, str]) -> tuple[list[float], list[str]]:
    """Every x gets a tick; a label only when it clears the last labelled one (model sizes 0.5, 0.6, 1.5,
    1.7, 2 ... crowd the left end of one axis)."""
    xs = sorted(ticks)
    gap = 0.035 * ((xs[-1] - xs[0]) or 1.0)
    labels, last = [], None
    for x in xs:
        keep = last is None or x - last >= gap
        labels.append(ticks[x] if keep else "")
        last = x if keep else last
    return xs, labels


def _shift(ax: Axes, i: int, k: int) -> Transform:
    """Series i of k moved (i - (k-1)/2) * 5 points sideways: tied series stay side by side."""
    from matplotlib.transforms import offset_copy

    return offset_copy(ax.transData, fig=ax.figure, x=5 * (i - (k - 1) / 2), units="points")


def _n(points: list[tuple[float, str, dict]]) -> str:
    ns = sorted({p[2]["rollouts"] for p in points})
    return f"n={ns[0]}" if len(ns) == 1 else f"n={ns[0]}-{ns[-1]}"


def three_panel_figure(series: dict[str, list[tuple[float, str, dict]]], xlabel: str) -> Figure:
    """One line per series over x, one panel per metric, +-1 SE error bars and value labels. Series that tie
    keep apart (own marker, line style and a sideways shift) and share one label; labels sit above their
    points, stacked when close, inside the axes; the legend says n, rollouts per point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.8), layout="constrained", sharey=True)
    ticks: dict[float, str] = {}
    labels: dict[tuple[int, float], dict[str, list[tuple[int, float]]]] = defaultdict(dict)  # -> text -> (i, top)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, points) in enumerate(series.items()):
        points = sorted(points, key=lambda p: p[0])
        xs = [p[0] for p in points]
        ticks.update({p[0]: p[1] for p in points})
        for j, (ax, metric) in enumerate(zip(axes, METRICS, strict=True)):
            ys, es = [p[2][metric]["value"] for p in points], [p[2][metric]["se"] for p in points]
            bars = ax.errorbar(xs, ys, yerr=es, capsize=3, linewidth=1.6, marker=MARKERS[i % len(MARKERS)],
                               ls=LINESTYLES[i % len(LINESTYLES)], markersize=5, mfc="none", mew=1.5,
                               color=colors[i % len(colors)], label=f"{label}, {_n(points)}")
            for artist in bars.get_children():  # after autoscaling, which an offset transform would throw off
                artist.set_transform(_shift(ax, i, len(series)))
            for x, y, e in zip(xs, ys, es, strict=True):
                labels[(j, x)].setdefault(f"{y:.2f}", []).append((i, y + e))
    for (j, x), by_text in labels.items():
        below = None
        for text, members in sorted(by_text.items(), key=lambda kv: float(kv[0])):
            top = max(t for _, t in members)  # above the error bar, not on it
            up = 3 if below is None or top - below[0] > 0.08 else below[1] + 9  # stack labels that would collide
            below = (top, up)
            first = members[0][0]
            one = len(members) == 1
            axes[j].annotate(text, (x, top), textcoords="offset points", ha="center", va="bottom", fontsize=7,
                             xytext=(5 * (first - (len(series) - 1) / 2) if one else 0, up),
                             color=colors[first % len(colors)] if one else "0.2")
    for ax, metric in zip(axes, METRICS, strict=True):
        ax.set_title(PANELS[metric], fontweight="bold")
        ax.set_xlabel(xlabel)
        ax.set_xticks(*_tick_labels(ticks), rotation=60, ha="right", fontsize=7)
        ax.set_ylim(-0.08, 1.2)  # room for a label above a point at 1
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.margins(x=0.1)
        ax.grid(alpha=0.25)
    axes[0].set_ylabel("Probability")
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="outside lower center",
               ncols=min(3, max(1, len(series))))
    return fig


def three_panel(series: dict[str, list[tuple[float, str, dict]]], xlabel: str, path: Path) -> None:
    """three_panel_figure written to `path`."""
    import matplotlib.pyplot as plt

    fig = three_panel_figure(series, xlabel)
    fig.savefig(path, dpi=150)
    plt.close(fig)


def write_report(records: list[dict], out: Path, mode: str, budget: int | None, surcharge: int | None,
                 n_boot: int, seed: int, extra: dict | None = None) -> dict:
    """Score every rollout and write results.md, scored.jsonl and three_panel.png; returns the summary's details
    (per model and condition, per cell). Error rows (failed rollouts) are counted, not scored."""
    def stats(rs: list[dict]) -> dict:
        return summarize(rs, budget, surcharge, n_boot, seed)

    errors = sum(bool(r.get("error")) for r in records)
    records = [r for r in records if not r.get("error")]
    extra = {**(extra or {}), "error_rows": errors}

    models: dict[str, dict] = defaultdict(dict)
    table = []
    for (model, condition), rs in group(records, "model", "condition").items():
        s = stats(rs)
        models[model][condition] = s
        table.append(({"model": model, "condition": condition}, s))
    cells = []
    for (model, condition, tools, d), rs in group(records, "model", "condition", "n", "difficulty").items():
        s = stats(rs)
        cells.append({"model": model, "condition": condition, "T": tools, "d": d, **s})
    with (out / "scored.jsonl").open("w") as f:
        for r in records:
            for row in scored_rows(r, budget, surcharge):
                f.write(json.dumps(row) + "\n")

    series: dict[str, list[tuple[float, str, dict]]] = defaultdict(list)
    if mode == "import":
        for model, by_condition in models.items():
            fam, size = family_and_size(model)
            x = size if size is not None else float(len(series))
            for condition, s in by_condition.items():
                series[f"{fam} ({condition})"].append((x, f"{size:g}B" if size is not None else fam, s))
        three_panel(series, "Model size (B params)", out / "three_panel.png")
    else:
        for (model, condition, tools), rs in group(records, "model", "condition", "n").items():
            series[f"{model} ({condition})"].append((float(tools), str(tools), stats(rs)))
        three_panel(series, "Candidate tools T", out / "three_panel.png")

    columns = ["model", "condition", "rollouts", "scored", *METRICS, "tool calls / rollout", "no-tool rollouts",
               "manual solves"]
    logged = "as logged per rollout"
    rule = (f"budget: {budget if budget is not None else logged}; surcharge per tool call: "
            f"{surcharge if surcharge is not None else logged}")
    md = [f"# Recognition MCP ({mode})\n", f"Counterfactual scoring ({rule}). Values ± rollout-bootstrap SE.\n",
          markdown_table(_table_rows(table), columns)]
    if mode == "run":
        cell_rows = _table_rows([({"model": c["model"], "condition": c["condition"], "T": c["T"], "d": c["d"]}, c)
                                 for c in cells])
        md += ["\n## Per cell\n", markdown_table(cell_rows, ["condition", "T", "d", *columns[2:]])]
    (out / "results.md").write_text("\n".join(md))
    details = {"mode": mode, "score_budget": budget, "score_surcharge": surcharge, "bootstrap": n_boot,
               "models": dict(models), "cells": cells, **extra}
    if len(models) == 1:  # a live run: the one model's conditions at the top level too
        details["conditions"] = next(iter(models.values()))
    return details


def run_metrics(details: dict) -> dict[str, dict]:
    """Results-schema metrics of a sweep or an import: `<model>/<condition>/<metric>` for manual success, oracle
    discovery and overall success, with the rollout-bootstrap 95% interval and SE (n = rollouts, the unit
    resampled)."""
    return {f"{model}/{condition}/{name}": common.metric(s[name]["value"], s[name]["lo"], s[name]["hi"],
                                                         s["rollouts"], "bootstrap-95", s[name]["se"])
            for model, by_condition in details["models"].items() for condition, s in by_condition.items()
            for name in METRICS}


def pilot_metrics(details: dict) -> dict[str, dict]:
    """Results-schema metrics of the pilot: `<model>/d<d>/accuracy` (Wilson, n = episodes) and
    `<model>/d<d>/median_S` (median manual token cost of the correct submissions, n = those submissions)."""
    out = {}
    for c in details["cells"]:
        key = f"{c['model']}/d{c['d']}"
        out[f"{key}/accuracy"] = common.wilson_metric(c["correct"], c["episodes"])
        out[f"{key}/median_S"] = common.metric(c["median_S"], n=c["correct"], unit="tokens per item")
    return out


def pilot_report(records: list[dict], out: Path, budget_mult: float, extra: dict | None = None) -> dict:
    """The tools-off pilot table per (model, d): manual accuracy, the median meter S of correct submissions
    and the budget the released pilot suggests from it, round(budget_mult * median S). Error rows are
    counted, not scored. Writes results.md; returns the summary's details."""
    cells = []
    good = [r for r in records if not r.get("error")]
    for (model, d), rs in group(good, "model", "difficulty").items():
        costs = [r["submit"]["meter_raw"] for r in rs if r.get("submit") and r["submit"].get("correct")]
        median = statistics.median(costs) if costs else None
        cells.append({"model": model, "d": d, "episodes": len(rs), "correct": len(costs),
                      "accuracy": len(costs) / len(rs), "median_S": median,
                      "suggested_budget": round(budget_mult * median) if costs else None})
    columns = ["model", "d", "episodes", "accuracy", "median_S", "suggested_budget"]
    md = ["# Recognition MCP (tools-off pilot)\n",
          f"Manual accuracy and median token cost S of correct submissions; suggested budget = {budget_mult} x "
          "median S.\n", markdown_table([{k: ("" if c[k] is None else c[k]) for k in columns} for c in cells], columns)]
    (out / "results.md").write_text("\n".join(md))
    return {"mode": "pilot", "budget_mult": budget_mult, "cells": cells, "error_rows": len(records) - len(good),
            **(extra or {})}
