"""The seccomp filter for "strict" tools, compiled on the host by libseccomp into classic BPF.

The tool process loads the exported program with prctl (sandbox/_forkserver.py), so the sandbox needs
no libseccomp of its own. A denylist in the style of container runtimes: everything a pure-Python tool
needs stays allowed; kernel surfaces that namespaces and dropped capabilities do not already close
(new namespaces, ptrace, bpf, io_uring, keyrings, mounts, IPC objects that outlive a run, memory-backed files
outside the run's limits, non-UNIX sockets) fail with an errno.
"""

from __future__ import annotations

import errno
import tempfile

DENIED = (
    # namespaces, mounts, root changes
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    # kernel state
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
    "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
    "setdomainname", "syslog", "quotactl", "vhangup", "iopl", "ioperm", "personality",
    # other processes' memory, introspection, kernel attack surface
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "perf_event_open", "bpf", "userfaultfd",
    "keyctl", "add_key", "request_key", "pidfd_getfd", "name_to_handle_at", "open_by_handle_at",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "lookup_dcookie", "fanotify_init",
    # System V and POSIX message-queue IPC: its objects live in the worker's IPC namespace, which every run of
    # that worker shares, and outlive the process that made them (docs/sandbox.md, "Isolation guarantees")
    "shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
    "semtimedop", "semctl", "ipc", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
    "mq_getsetattr",
    # anonymous files: their pages count against neither RLIMIT_AS nor the private /tmp's size, so a run could
    # hold open files x file size x processes of memory (docs/sandbox.md, "Memory")
    "memfd_create", "memfd_secret",
)  # fmt: skip
CLONE_NAMESPACE_FLAGS = (0x00020000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x02000000)
AF_UNIX = 1
TIOCSTI = 0x5412


def build_bpf() -> bytes:
    """Compile the filter; raises RuntimeError naming libseccomp when it cannot be loaded (fail closed)."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as exc:
        raise RuntimeError(f"strict isolation needs libseccomp (apt-get install libseccomp2): {exc}") from exc
    filt = sc.SyscallFilter(sc.ALLOW)
    for name in DENIED:
        try:
            filt.add_rule(sc.ERRNO(errno.EPERM), name)
        except (OSError, ValueError):
            continue  # not a syscall on this architecture
    for flag in CLONE_NAMESPACE_FLAGS:
        filt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags live in memory seccomp cannot read; libc falls back
    filt.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.NE, AF_UNIX))
    filt.add_rule(sc.ERRNO(errno.EPERM), "ioctl", sc.Arg(1, sc.EQ, TIOCSTI))
    with tempfile.TemporaryFile() as fh:
        filt.export_bpf(fh)
        fh.seek(0)
        data = fh.read()
    if not data or len(data) % 8:
        raise RuntimeError(f"libseccomp exported a malformed BPF program ({len(data)} bytes)")
    return data
