"""One way to build a cached model directory (the tiny, warm, real and cold-start models): reuse it while its
marker says it is current, else build it into a temporary directory beside it and swap that in, under a file
lock, so two processes never build it twice and a crash mid-build never leaves a half-written model."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def cached_build(path: str | os.PathLike, is_current: Callable[[Path], bool], build: Callable[[Path], None],
                 what: str) -> tuple[Path, bool]:
    """The directory at `path`, built by `build(tmp)` unless `is_current(path)`. Returns (path, built_now).

    A current directory is only read, without the lock, so a read-only install needs no write access. The old
    directory is moved aside before the new one takes its name and removed after, so `path` is always a whole
    build (or absent); a failed build leaves the old one as it was."""
    path = Path(path)
    if is_current(path):
        return path, False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create {path.parent} for the {what}: {e.strerror}") from None
    from filelock import FileLock

    with FileLock(str(path) + ".lock"):
        if is_current(path):  # another process built it while this one waited
            return path, False
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
        try:
            build(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        old = path.with_name(f".{path.name}.old")
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    return path, True


def read_marker(path: Path, name: str) -> dict:
    """The JSON marker `path / name` a build wrote (its settings), or {} when it is missing or unreadable."""
    try:
        info = json.loads((path / name).read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}
