"""The `smith` console script. Each subcommand lives with the module it serves; this file only
parses arguments and dispatches (imports are lazy so `smith --help` is instant)."""

from __future__ import annotations

import argparse


def _tiny_model(a: argparse.Namespace) -> None:
    if a.warm:
        from smith.train.warm import WarmSettings, build_warm_model

        path, built = build_warm_model(a.dir, WarmSettings(seed=a.seed), cache_dir=a.cache_dir)
        print(f"{'built' if built else 'reused cached'} warm-started tiny policy at {path}")
        return
    from smith.models.tiny import build_tiny_model

    path, built = build_tiny_model(a.dir, seed=a.seed)
    print(f"{'built' if built else 'reused cached'} tiny model at {path}")


def _grade(a: argparse.Namespace) -> None:
    from smith.rewards.evaluation import grade_cli

    grade_cli(a)


def _export_pool(a: argparse.Namespace) -> None:
    from smith.pool.export import export_cli

    export_cli(a)


def _serve_pool(a: argparse.Namespace) -> None:
    from smith.pool.mcp_server import serve_cli

    serve_cli(a)


def _report(a: argparse.Namespace) -> None:
    from smith.evals.report import report_cli

    report_cli(a)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="smith", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("tiny-model", help="build the tiny local Qwen3-architecture model (cached)")
    s.add_argument("dir")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--warm", action="store_true",
                   help="the SFT-warm-started policy of recipe=tiny (smith.train.warm; ~12 min on 2 cores)")
    s.add_argument("--cache-dir", default="checkpoints/.task-cache", help="reasoning-gym item cache (--warm)")
    s.set_defaults(func=_tiny_model)

    s = sub.add_parser("grade", help="grade a tool file on held-out questions in the strict sandbox")
    s.add_argument("--category", required=True)
    s.add_argument("--tool", required=True, help="a .py file defining the tool function")
    s.add_argument("--function", default=None, help="function name (default: the only/last top-level def)")
    s.add_argument("--k", type=int, default=16)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--band", default="hard", choices=["easy", "hard"])
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
    """Parse and dispatch behind the error boundary (smith.errors: bad input is one line and exit 2, Ctrl-C
    exit 130)."""
    from smith.errors import ConfigError, guarded

    args = build_parser().parse_args(argv)

    def body() -> None:
        try:
            args.func(args)
        except (FileNotFoundError, ValueError) as e:
            # a subcommand reports a bad argument (a missing file, a malformed pool or tool) this way
            raise ConfigError(str(e)) from e

    guarded(body)


if __name__ == "__main__":
    main()
