"""`smith report DIRS... --out D`: one Markdown + HTML page of paper-style tables and plots, from logs on disk.

Every number comes from a file a run wrote: the `summary.json` of eval suites, read through the one results
schema (smith/evals/results.schema.json: its `metrics`, and `details` only for what a table names; rg rows follow
the SMITH paper's main table: Seen Avg, unseen Logic / Game / Algebra / Arith / Algo, Avg, I/O tokens, methods in
the paper's order; tabmwp / gqa runs its out-of-domain table; bfcl rows BFCL's sections), and a training run's
`metrics.jsonl` (reward axes per step, pool size per category) with the `tool_pool.json` of its checkpoints. A
directory may hold many runs; it is searched recursively. A summary.json outside the schema (written before it)
is listed as skipped, never half-read. Every eval row links to its run's results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smith.curves import STYLES, plot_curves, read_metrics, role_table, rolled_out, series
from smith.evals.common import io_tokens, markdown_table, validate_summary
from smith.pool import POOL_FILE, checkpoints

TOKENS_NOTE = ("I/O tokens: mean input / output tokens per item (an rg question, a BFCL entry), every turn of it "
               "counted; the same in every table.")
_AXIS = re.compile(r"^rewards/([^/]+)/mean$")
_POOL = re.compile(r"^pool/size/(.+)$")


@dataclass
class Found:
    evals: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    runs: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # a summary.json outside the schema, and why


def discover(dirs: Iterable[str | Path]) -> Found:
    """Eval directories (a summary.json in the results schema) and training runs (a metrics.jsonl), in argument
    order; summaries outside the schema are kept aside with the reason."""
    from jsonschema import ValidationError

    found = Found()
    seen: set[Path] = set()
    for d in dirs:
        root = Path(d)
        if not root.is_dir():
            raise FileNotFoundError(f"{root} is not a directory; pass run or eval output directories")
        hits = sorted({p.parent for p in [*root.rglob("summary.json"), *root.rglob("metrics.jsonl")]})
        for where in hits:
            if where.resolve() in seen:
                continue
            seen.add(where.resolve())
            summary = where / "summary.json"
            if summary.is_file():
                try:
                    data = json.loads(summary.read_text(), parse_constant=_no_constant)
                    validate_summary(data)
                    found.evals.append((where, data))
                except ValueError as e:
                    found.skipped.append((where, f"not strict JSON: {e}"))
                except ValidationError as e:
                    found.skipped.append((where, f"not the results schema: {e.message}"))
            if (where / "metrics.jsonl").is_file():
                found.runs.append(where)
    if not found.evals and not found.runs:
        why = "".join(f"; skipped {d}/summary.json: {reason}" for d, reason in found.skipped)
        raise FileNotFoundError(f"no summary.json or metrics.jsonl under {', '.join(map(str, dirs))}; "
                                f"pass directories written by eval.py or train.py{why}")
    return found


def _no_constant(name: str) -> None:
    """json.loads hook: NaN / Infinity are not JSON (an old lomekwi summary.json holds NaN)."""
    raise ValueError(f"{name} is not JSON")


def pool_growth(run: Path, rows: list[dict[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    """Pool size per category per step: from metrics.jsonl's pool/size/<category>, else from the pools saved
    in the run's checkpoints (checkpoint-<step>/tool_pool.json)."""
    keys = sorted({m.group(1) for r in rows for k in r if (m := _POOL.match(k))})
    if keys:
        return {c: series(rows, f"pool/size/{c}") for c in keys}
    growth: dict[str, tuple[list[float], list[float]]] = {}
    for step, ckpt in checkpoints(run):
        path = ckpt / POOL_FILE
        if not path.is_file():
            continue
        entries = json.loads(path.read_text()).get("entries", [])
        counts: dict[str, int] = {}
        for e in entries:
            counts[e["category"]] = counts.get(e["category"], 0) + 1
        for cat in set(counts) | set(growth):
            growth.setdefault(cat, ([], []))
            growth[cat][0].append(step)
            growth[cat][1].append(float(counts.get(cat, 0)))
    return growth


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_pool(growth: dict[str, tuple[list[float], list[float]]], title: str, path: Path) -> Path | None:
    """Pool growth: tools in the pool per category against the training step."""
    if not growth:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    for i, (cat, (steps, values)) in enumerate(sorted(growth.items())):  # categories often grow alike
        line, marker = STYLES[i % len(STYLES)]
        ax.plot(steps, values, ls=line, marker=marker, ms=4 - 0.5 * (i % len(STYLES)), alpha=0.85, label=cat)
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("step")
    ax.set_ylabel("tools in pool")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


def _labels(evals: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """Row labels: a summary's own label, made unique with its directory name when two collide."""
    raw = [str(s["label"]) for _, s in evals]
    return [f"{lab} [{d.name}]" if raw.count(lab) > 1 else lab for lab, (d, _) in zip(raw, evals, strict=True)]


def _pct(m: dict[str, Any] | None) -> float | None:
    """A fraction metric in percent; None when absent or undefined."""
    return None if m is None or m.get("value") is None else 100.0 * float(m["value"])


def _link(d: Path, out: Path) -> str | None:
    """A Markdown link from the report to the run's results.md (relative, so the page can move with its runs)."""
    target = d / "results.md"
    return f"[results.md]({os.path.relpath(target, out)})" if target.is_file() else None


METHOD_ORDER = ("cot", "latm", "craft", "trove", "ktce")  # the paper's row order; SMITH's own modes come last
OOD_SUITES = (("tabmwp", "TabMWP-Hard"), ("gqa", "GQA"))  # the paper's out-of-domain table, in its order


def by_method(runs: list[tuple[str, Path, dict[str, Any]]]) -> list[tuple[str, Path, dict[str, Any]]]:
    """Runs in the paper's method order: Standard CoT, the inference-time baselines, then the rest (SMITH's
    build_use / pool runs, distilled adapters), each kind in argument order."""
    def rank(run: tuple[str, Path, dict[str, Any]]) -> int:
        mode = run[2]["details"].get("mode")
        return METHOD_ORDER.index(mode) if mode in METHOD_ORDER else len(METHOD_ORDER)

    return sorted(runs, key=rank)


def ood_table(evals: list[tuple[Path, dict[str, Any]]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The paper's OOD table: a row per benchmark (TabMWP-Hard, GQA), a column per method -- the runs' labels
    (`suite.label`), so runs of one method on both suites share a column -- holding accuracy over all
    questions, percent ± bootstrap standard error."""
    from smith.evals.rg.sources import ood_row

    cells: dict[str, dict[str, Any]] = {}
    order: list[tuple[str, Path, dict[str, Any]]] = []
    for suite, task in OOD_SUITES:
        runs = [(d, s) for d, s in evals if s["suite"] == suite]
        for label, (d, s) in zip(_labels(runs), runs, strict=True):
            cells.setdefault(task, {})[label] = ood_row(s)["Accuracy"]
            order.append((label, d, s))
    methods = list(dict.fromkeys(label for label, _, _ in by_method(order)))
    rows = [{"Task": task, **cells[task]} for _, task in OOD_SUITES if task in cells]
    return rows, ["Task", *methods]


def table_png(rows: list[dict[str, Any]], columns: list[str], title: str, path: Path) -> Path:
    """A Markdown table as a figure (the paper's tables as images for slides and notebooks)."""
    plt = _plt()
    text = [["" if r.get(c) is None else str(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in text)) for i, c in enumerate(columns)]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.085 * sum(widths) + 0.3 * len(columns)), 0.6 + 0.32 * (len(rows) + 1)))
    ax.axis("off")
    table = ax.table(cellText=text, colLabels=columns, loc="center", cellLoc="center",
                     colWidths=[w / sum(widths) for w in widths])
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    for (row, _), cell in table.get_celld().items():
        if row == 0:
            cell.set_text_props(weight="bold")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path


def build_report(dirs: Iterable[str | Path], out: str | Path) -> Path:
    """Write out/report.md, out/report.html and the PNGs; returns the Markdown path."""
    from smith.evals.rg.metrics import PAPER_COLUMNS, PAPER_GROUPS, paper_row
    from smith.evals.rg.plots import plot_groups

    found = discover(dirs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    labels = dict(zip([str(d) for d, _ in found.evals], _labels(found.evals), strict=True))
    md = ["# smith report", "", "Every number below is read from the logs of the directories listed at the end.", ""]

    rg = by_method([(labels[str(d)], d, s) for d, s in found.evals if s["suite"] == "rg"])
    if rg:
        md += ["## Reasoning-gym (SMITH paper, main table)", ""]
        main = [{"Method": lab, **paper_row(s)} for lab, _, s in rg]
        md.append(markdown_table([{**row, "results": _link(d, out)} for row, (_, d, _) in zip(main, rg, strict=True)],
                                 ["Method", *PAPER_COLUMNS, "results"]))
        md += ["", f"Percent, ± bootstrap standard error. Seen Avg and Avg (unseen) average the groups; a group "
               f"averages its categories. {TOKENS_NOTE} Rows in the paper's order: CoT, the inference-time "
               "baselines, then the other runs.", ""]
        png = table_png(main, ["Method", *PAPER_COLUMNS], "Reasoning-gym: seen and unseen accuracy",
                        out / "main_table.png")
        md += [f"![main table]({png.name})", ""]
        detail = []
        for lab, _, s in rg:
            row: dict[str, Any] = {"Method": lab, "mode": s["details"].get("mode"),
                                   "questions": s["details"].get("n_questions")}
            for split in ("seen", "unseen"):
                for g, _ in PAPER_GROUPS:
                    if f"{split}/{g}" in s["metrics"]:
                        row[f"{split} {g}"] = _pct(s["metrics"][f"{split}/{g}"])
            detail.append(row)
        cols = ["Method", "mode", "questions", *(f"{sp} {g}" for sp in ("seen", "unseen") for g, _ in PAPER_GROUPS
                                                 if any(f"{sp} {g}" in r for r in detail))]
        md += ["### Per split and group", "", markdown_table(detail, cols, floatfmt=".1f"), ""]
        png = plot_groups({lab: s["details"] for lab, _, s in rg}, out / "accuracy_by_group.png")
        md += [f"![accuracy per group]({png.name})", ""]

    ood_rows, ood_cols = ood_table(found.evals)
    if ood_rows:
        md += ["## Out-of-domain generalization (SMITH paper)", "", markdown_table(ood_rows, ood_cols), "",
               "Accuracy over all questions, percent ± bootstrap standard error; a column per run label "
               "(`suite.label`), so one method's TabMWP-Hard and GQA runs share a column.", ""]
        png = table_png(ood_rows, ood_cols, "Out-of-domain accuracy", out / "ood_table.png")
        md += [f"![OOD table]({png.name})", ""]

    bfcl = [(labels[str(d)], d, s) for d, s in found.evals if s["suite"] == "bfcl"]
    if bfcl:
        names = list(dict.fromkeys(k.removeprefix("section/") for _, _, s in bfcl for k in s["metrics"]
                                   if k.startswith("section/")))
        rows = []
        for lab, d, s in bfcl:
            m = s["metrics"]
            rows.append({"Model": lab, **{n: _pct(m.get(f"section/{n}")) for n in names},
                         "Mean": _pct(m.get("mean_accuracy")), "entries": m.get("mean_accuracy", {}).get("n"),
                         "I/O tokens": io_tokens(m), "results": _link(d, out)})
        md += ["## BFCL v4 (offline categories)", "",
               markdown_table(rows, ["Model", *names, "Mean", "entries", "I/O tokens", "results"], floatfmt=".1f"),
               "", "Percent. Sections follow BFCL's aggregation over the categories that were run; Mean averages "
               f"those categories. {TOKENS_NOTE}", ""]

    shown = ("rg", "bfcl", *(suite for suite, _ in OOD_SUITES))
    others = [(labels[str(d)], d, s) for d, s in found.evals if s["suite"] not in shown]
    if others:
        md += ["## Other suites", "", markdown_table(
            [{"suite": s["suite"], "run": lab, "metrics": len(s["metrics"]), "date": s["date"],
              "results": _link(d, out)} for lab, d, s in others], ["suite", "run", "metrics", "date", "results"]),
               "", "Each run's results.md holds its tables; its summary.json every metric with its interval.", ""]

    for run in found.runs:
        rows = read_metrics(run)
        name = _slug(run.name)
        md += [f"## Training run `{run.name}`", ""]
        if not rows:
            md += ["metrics.jsonl holds no step rows yet.", ""]
            continue
        scored = rolled_out(rows) or rows  # with dapo.updates_per_batch > 1 only these steps log rewards
        last = scored[-1]
        axes = sorted(m.group(1) for k in last if (m := _AXIS.match(k)))
        table = {"step": last["step"], **{a: last.get(f"rewards/{a}/mean") for a in axes}}
        for key in ("use/correct", "pool/size"):
            if key in last:
                table[key] = last[key]
        counted = f"{len(rows)} logged steps" if len(scored) == len(rows) else \
            f"{len(scored)} steps that rolled out a batch ({len(rows)} logged)"
        md += [f"Step {last['step']}, the last of {counted}:", "",
               markdown_table([table], list(table)), ""]
        roles = role_table(rows)
        if roles:
            md += ["Generation per step by role (mean over the steps that rolled out; share: of the roles' "
                   "generation seconds):", "",
                   markdown_table(roles, ["role", "engine", "tokens", "seconds", "tokens/s", "share"], floatfmt=".2f"),
                   ""]
        curves = plot_curves(rows, out / f"curves-{name}.png", run.name)
        if curves:
            md += [f"![training curves]({curves.name})", ""]
        pool = plot_pool(pool_growth(run, rows), f"{run.name}: pool growth", out / f"pool-{name}.png")
        if pool:
            md += [f"![pool growth]({pool.name})", ""]

    md += ["## Sources", ""] + [f"- `{d}` ({s['suite']}, {s['date']}{_commit(s)})" for d, s in found.evals]
    md += [f"- `{r}` (training run)" for r in found.runs]
    md += [f"- skipped `{d}`: {reason}" for d, reason in found.skipped]
    text = "\n".join(md) + "\n"
    path = out / "report.md"
    path.write_text(text)
    (out / "report.html").write_text(to_html(text))
    return path


def _commit(summary: dict[str, Any]) -> str:
    git = summary.get("git")
    return "" if not git else f", commit {git['commit'][:10]}{' (dirty)' if git['dirty'] else ''}"


def to_html(markdown: str) -> str:
    """The Markdown page as standalone HTML (markdown-it with GFM tables); images stay relative to it."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(markdown)
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}img{max-width:100%}")
    return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>smith report</title><style>{style}</style>"
            f"</head><body>\n{body}</body></html>\n")


def report_cli(args: argparse.Namespace) -> None:
    path = build_report(args.dirs, args.out)
    print(f"wrote {path} and {path.with_suffix('.html')}")
