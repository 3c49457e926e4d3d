"""The error boundary of train.py, eval.py and the `smith` command.

Bad input (a recipe, an override, an argument, a file or directory the user named) is a `ConfigError`: its
message is the whole story, so it is printed as one `error: ...` line with exit code 2. Ctrl-C prints
`interrupted` and exits 130. Anything else is a bug and keeps its traceback. `SMITH_TRACEBACK=1` prints the
traceback of the first two as well (to find where a check fired). Standard library only: `smith --help` and
the pool modules import it without pulling in Hydra.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

TRACEBACK_ENV = "SMITH_TRACEBACK"
EXIT_USAGE = 2  # bad input, as argparse and Hydra use it
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C'd command


class ConfigError(ValueError):
    """Bad user input; the message names the bad value and what to do, and is the whole story."""


def one_line(message: object) -> str:
    """A message squeezed onto one line (an endpoint's or a parser's text may span several)."""
    return " | ".join(part.strip() for part in str(message).splitlines() if part.strip())


def guarded(main: Callable[[], object]) -> None:
    """Run `main` behind the boundary: ConfigError -> one line, exit 2; Ctrl-C -> `interrupted`, exit 130."""
    verbose = os.environ.get(TRACEBACK_ENV) == "1"
    try:
        main()
    except ConfigError as e:
        if verbose:
            traceback.print_exc()
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
