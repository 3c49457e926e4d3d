"""The jail of a strict worker: the bubblewrap command that starts its fork server (namespaces, a read-only
system, a private /tmp, the few capabilities the server keeps) and the host-wide block of fresh uids its tools
run as (docs/architecture.md, "Sandbox")."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import sys
from pathlib import Path

from sandbox._forkserver import UID_BLOCK

FORKSERVER = Path(__file__).with_name("_forkserver.py")
INSIDE_FORKSERVER = "/opt/sandbox/forkserver.py"
BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# the fork server keeps only what it needs to fork, switch uid, kill and clean up
SERVER_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER")
UID_BASE, UID_SPAN = 1 << 30, 1 << 30  # far above any real account
UID_LOCK_DIR = Path("/run/smith-sandbox-uids")


class SandboxUnavailable(RuntimeError):
    """The requested isolation cannot be set up on this machine; nothing was run."""


def claim_uid_block() -> tuple[int, int]:
    """Reserve a block of fresh uids host-wide (an flock held for the worker's life), so no two workers,
    in this process or any other, ever share tool uids: their process limits and kill scans stay apart."""
    UID_LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    for _ in range(256):
        base = UID_BASE + secrets.randbelow(UID_SPAN // UID_BLOCK) * UID_BLOCK
        fd = os.open(UID_LOCK_DIR / f"{base}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:  # a holder deletes its file before unlocking: a lock won on a deleted file is stale, try again
            same = os.path.samestat(os.fstat(fd), os.stat(UID_LOCK_DIR / f"{base}.lock"))
        except FileNotFoundError:
            same = False
        if same:
            return base, fd
        os.close(fd)
    raise SandboxUnavailable(f"no free uid block after 256 tries; are thousands of workers running? ({UID_LOCK_DIR})")


def release_uid_block(base: int, fd: int) -> None:
    """Delete the block's lock file while still holding its lock, then unlock; call only once no process of
    the block is left. Other holders' files are never touched (claim_uid_block re-checks the file it locked)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(UID_LOCK_DIR / f"{base}.lock")
    os.close(fd)


def _ro_system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for path in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0711", "--dir", "/etc"]
    for path in ("/etc/ld.so.cache", "/etc/localtime"):
        args += ["--ro-bind-try", path, path]
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes.add(str(Path(os.path.realpath(sys.executable)).parent.parent))
    prefixes = sorted(p for p in prefixes if p != "/" and not p.startswith("/usr"))
    parents = sorted({str(parent) for p in prefixes for parent in Path(p).parents if str(parent) != "/"})
    for parent in parents:  # traversable (only) for the tools' uids: bwrap would copy e.g. /root's 0700
        args += ["--perms", "0711", "--dir", parent]
    for prefix in prefixes:
        args += ["--ro-bind", prefix, prefix]
    return args


def bwrap_argv(tmp_mb: int, fd: int) -> list[str]:
    """The bubblewrap command: new pid/net/ipc/uts namespaces, read-only system, private /tmp, few caps."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("strict isolation needs bubblewrap on PATH: apt-get install bubblewrap")
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    for key, value in BASE_ENV.items():
        args += ["--setenv", key, value]
    # the private /tmp first, so a Python install or venv that lives under /tmp is bound on top of it
    args += ["--size", str(tmp_mb * 1024 * 1024), "--perms", "0755", "--tmpfs", "/tmp"]
    args += _ro_system_binds()
    args += ["--ro-bind", str(FORKSERVER), INSIDE_FORKSERVER, "--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp"]
    args += ["--cap-drop", "ALL"]
    for cap in SERVER_CAPS:
        args += ["--cap-add", cap]
    return [*args, sys.executable, "-I", "-B", INSIDE_FORKSERVER, str(fd)]


