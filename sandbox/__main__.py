"""`python -m sandbox serve --host 127.0.0.1 --port N [--isolation strict] [--workers W]`."""

from __future__ import annotations

import argparse

from sandbox.server import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description="Serve the tool sandbox over HTTP.")
    sub = parser.add_subparsers(dest="command", required=True)
    srv = sub.add_parser("serve", help="serve /run, /run_code (SandboxFusion) and /health")
    srv.add_argument("--host", default="127.0.0.1")
    srv.add_argument("--port", type=int, default=8080)
    srv.add_argument("--isolation", choices=("strict", "process"), default="strict")
    srv.add_argument("--workers", type=int, default=None, help="pre-started workers (default: two per CPU, at most 32)")
    args = parser.parse_args(argv)
    serve(args.host, args.port, isolation=args.isolation, workers=args.workers)


if __name__ == "__main__":
    main()
