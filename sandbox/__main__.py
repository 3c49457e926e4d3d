"""`python -m sandbox serve --host 127.0.0.1 --port N [--isolation strict] [--workers W] [bounds...]`.

The bounds flags (`--max-memory-mb`, `--max-request-output-mb`, `--idle-timeout-s`, ...) are `server.Bounds`:
what one client may ask of a shared service; `--help` lists them with their defaults.
"""

from __future__ import annotations

import argparse
import dataclasses

from sandbox.server import Bounds, serve
from sandbox.types import Limits

MIB = 1 << 20


def _limit_flag(name: str) -> str:
    return "--max-" + name.removeprefix("max_").replace("_", "-")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description="Serve the tool sandbox over HTTP.")
    sub = parser.add_subparsers(dest="command", required=True)
    srv = sub.add_parser("serve", help="serve /run, /run_code (SandboxFusion) and /health")
    srv.add_argument("--host", default="127.0.0.1")
    srv.add_argument("--port", type=int, default=8080)
    srv.add_argument("--isolation", choices=("strict", "process"), default="strict")
    srv.add_argument("--workers", type=int, default=None, help="pre-started workers (default: two per CPU, at most 32)")
    default = Bounds()
    for field in dataclasses.fields(Limits):
        value = getattr(default.max_limits, field.name)
        shown = "ceil(--max-timeout-s) + 1" if value is None else "%(default)s"
        srv.add_argument(
            _limit_flag(field.name), dest=f"limit_{field.name}", type=float if field.name == "timeout_s" else int,
            default=value, metavar="N",
            help=f"largest limits.{field.name} a request may ask for, more is a 400 (default: {shown})",
        )  # fmt: skip
    flags = [
        ("--max-request-output-mb", default.max_output_bytes / MIB,
         "values + stdout + stderr of all of a request's calls; calls past it are not run (status 'limit')"),
        ("--max-body-mb", default.max_body_bytes / MIB, "largest request body, else 413"),
        ("--body-timeout-s", default.body_timeout_s, "to send a body once the server reads it, else 408"),
        ("--idle-timeout-s", default.idle_timeout_s,
         "to send a request head, or to read any of a response, else the connection is closed"),
    ]  # fmt: skip
    for flag, value, text in flags:
        srv.add_argument(flag, type=float, default=value, metavar="X", help=f"{text} (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        bounds = Bounds(
            max_limits=Limits(**{f.name: getattr(args, f"limit_{f.name}") for f in dataclasses.fields(Limits)}),
            max_output_bytes=int(args.max_request_output_mb * MIB), max_body_bytes=int(args.max_body_mb * MIB),
            body_timeout_s=args.body_timeout_s, idle_timeout_s=args.idle_timeout_s,
        )  # fmt: skip
    except ValueError as exc:
        parser.error(str(exc))
    serve(args.host, args.port, isolation=args.isolation, workers=args.workers, bounds=bounds)


if __name__ == "__main__":
    main()
