"""The host's end of one tool process: its request, reply, stdout and stderr pipes, read and written without
blocking under the run's wall timeout, with stdout and stderr captured up to their caps."""

from __future__ import annotations

import array
import fcntl
import os
import select
import termios
import time
from typing import Any

from sandbox._forkserver import HEADER, FrameError, loads
from sandbox.cancel import Cancel
from sandbox.types import Limits


class Capture:
    """Keeps the first `cap` bytes of a stream and counts the rest, so a flood cannot exhaust the host."""

    def __init__(self, cap: int) -> None:
        self.cap, self.buf, self.dropped = cap, bytearray(), 0

    def add(self, data: bytes) -> None:
        room = self.cap - len(self.buf)
        if room > 0:
            self.buf += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    def take(self) -> str:
        text = self.buf.decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[sandbox: {self.dropped} more bytes dropped]"
        self.buf, self.dropped = bytearray(), 0
        return text


class ToolProcess:
    """The host's pipe ends to one forked tool process."""

    def __init__(self, req_w: int, resp_r: int, out_r: int, err_r: int) -> None:
        self.req_w, self.resp_r, self.out_r, self.err_r = req_w, resp_r, out_r, err_r
        for fd in (req_w, resp_r, out_r, err_r):
            os.set_blocking(fd, False)
        self.used = False
        self.closed = False
        self.written = 0  # bytes of the request stream written into the pipe
        self.outbox = bytearray()
        self.writing = False
        self.poll = select.poll()
        for fd in (resp_r, out_r, err_r):
            self.poll.register(fd, select.POLLIN)
        self.open = {resp_r, out_r, err_r}
        self.resp = bytearray()
        self.cancel: Cancel | None = None

    def arm(self, limits: Limits, cancel: Cancel | None = None) -> None:
        """Bind this (pre-forked) tool process to one run's caps; a tool process serves one run only."""
        self.used = True
        if cancel is not None:
            self.cancel = cancel
            self.poll.register(cancel.fileno(), select.POLLIN)
        self.out, self.err = Capture(limits.output_bytes), Capture(limits.output_bytes)
        self.resp_cap = limits.max_return_bytes + 65536

    def _read(self, fd: int) -> bool:
        """Read what is there; False at end of file."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        if not data:
            self.poll.unregister(fd)
            self.open.discard(fd)
            return False
        if fd == self.resp_r:
            self.resp += data
        else:
            (self.out if fd == self.out_r else self.err).add(data)
        return True

    def _drain_output(self) -> None:
        for fd in (self.out_r, self.err_r):
            while fd in self.open:
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    break
                if not data:
                    self.poll.unregister(fd)
                    self.open.discard(fd)
                    break
                (self.out if fd == self.out_r else self.err).add(data)

    def _frame(self) -> tuple[str, Any]:
        """("frame", msg) | ("more", None) | ("bad", reason) from the response buffer."""
        if len(self.resp) < HEADER.size:
            return "more", None
        (size,) = HEADER.unpack_from(self.resp)
        if size > self.resp_cap:
            return "bad", f"the tool sent a {size}-byte reply, over the {self.resp_cap}-byte cap"
        if len(self.resp) < HEADER.size + size:
            return "more", None
        body = bytes(self.resp[HEADER.size : HEADER.size + size])
        del self.resp[: HEADER.size + size]
        try:
            msg = loads(body, wrappers=1)
        except FrameError as exc:
            return "bad", f"the tool wrote a malformed reply on the result pipe: {exc}"
        if not isinstance(msg, dict) or msg.get("status") not in ("ok", "error", "limit"):
            return "bad", "the tool wrote a malformed reply on the result pipe: not a reply object"
        return "frame", msg

    def send(self, frame: bytes) -> None:
        """Queue a packed frame; it is written while waiting for replies (pipelined, not lock-stepped)."""
        self.outbox += frame
        if not self.writing:
            self.writing = True
            self.poll.register(self.req_w, select.POLLOUT)
        self._write()

    def _write(self) -> None:
        try:
            n = os.write(self.req_w, self.outbox)
            del self.outbox[:n]
            self.written += n
        except BlockingIOError:
            return
        except BrokenPipeError:
            self.outbox.clear()
        if not self.outbox:
            self.writing = False
            self.poll.unregister(self.req_w)

    def recv(self, timeout_s: float) -> tuple[str, Any]:
        """The next reply: ("frame", msg) | ("timeout", None) | ("died", None) | ("bad", why) | ("cancelled", why)."""
        deadline = time.monotonic() + timeout_s
        while True:
            kind, msg = self._frame()
            if kind != "more":
                self._drain_output()
                return kind, msg
            if self.resp_r not in self.open:
                self._drain_output()
                return "died", None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._drain_output()
                return "timeout", None
            for fd, event in self.poll.poll(max(1, int(remaining * 1000 + 1))):
                if self.cancel is not None and fd == self.cancel.fileno():
                    self._drain_output()
                    return "cancelled", self.cancel.reason
                if fd != self.req_w:
                    self._read(fd)
                elif event & (select.POLLERR | select.POLLHUP):
                    self.outbox.clear()
                    self.writing = False
                    self.poll.unregister(fd)
                else:
                    self._write()

    def consumed(self) -> int:
        """Bytes of the request stream the tool process has read: what was written into the pipe less what is
        still in it (a dead reader leaves its unread bytes in the pipe, whose write end the host still holds)."""
        unread = array.array("i", [0])
        fcntl.ioctl(self.req_w, termios.FIONREAD, unread)
        return self.written - unread[0]

    def close(self) -> None:
        """Close the host's ends; an idle tool process then reads end-of-file and exits by itself."""
        if not self.closed:
            self.closed = True
            for fd in (self.req_w, self.resp_r, self.out_r, self.err_r):
                os.close(fd)


