"""The error boundary of train.py, eval.py and the `smith` command.

Bad input (a recipe, an override, an argument, a file or directory the user named) is a `ConfigError`: its
message is the whole story, so it is printed as one `error: ...` line with exit code 2. Ctrl-C prints
`interrupted` and exits 130. Anything else is a bug and keeps its traceback. `SMITH_TRACEBACK=1` (or the
`hydra.verbose=true` override of train.py / eval.py) prints the traceback of the first two as well (to find
where a check fired). Standard library only: `smith --help` and the pool modules import it without pulling in
Hydra.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

TRACEBACK_ENV = "SMITH_TRACEBACK"
EXIT_USAGE = 2  # bad input, as argparse and Hydra use it
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C'd command


class ConfigError(ValueError):
    """Bad user input; the message names the bad value and what to do, and is the whole story. `details`: lines
    printed above the error line when one line cannot hold the evidence (a resumed run's config diff)."""

    def __init__(self, message: str, details: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.details = list(details)


def one_line(message: object) -> str:
    """A message squeezed onto one line (an endpoint's or a parser's text may span several)."""
    return " | ".join(part.strip() for part in str(message).splitlines() if part.strip())


def guarded(main: Callable[[], object], verbose: bool = False) -> None:
    """Run `main` behind the boundary: ConfigError -> one line, exit 2; Ctrl-C -> `interrupted`, exit 130.
    `verbose` (or SMITH_TRACEBACK=1) prints their tracebacks too."""
    verbose = verbose or os.environ.get(TRACEBACK_ENV) == "1"
    try:
        main()
    except ConfigError as e:
        if verbose:
            traceback.print_exc()
        for line in e.details:
            print(line, file=sys.stderr)
        print(f"error: {one_line(e)}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_USAGE) from None
    except KeyboardInterrupt:
        if verbose:
            traceback.print_exc()
        print("interrupted", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_INTERRUPTED) from None


def writable_dir(path: str | os.PathLike, what: str) -> Path:
    """Create `path` (parents too) and prove a file can be written there, so an unusable output directory
    fails in one line at start-up instead of at the first save, minutes into a run. `what` names the
    setting (e.g. `output_dir`)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".smith-write-check-"):
            pass
    except OSError as e:
        raise ConfigError(f"{what}={path} is not a writable directory ({e.strerror or e}); "
                          "choose another") from None
    return path


def writable_parent(path: str | os.PathLike, what: str) -> Path:
    """A directory smith builds whole and swaps into place (a cached model), with a lock file beside it: its
    parent must be writable, even when the directory already exists. `what` names the setting."""
    path = Path(path)
    try:
        writable_dir(path.parent, "its parent")
    except ConfigError as e:
        raise ConfigError(f"{what}={path} cannot be built or locked: {e}") from None
    return path
