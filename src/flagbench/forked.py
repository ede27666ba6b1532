"""Work beside this process: FUNC(*ARGS) in a forked child, its result back through a pipe.

`size` reads its old input in one while this process reads the new (`size.pair.both`); `asm`
disassembles the new file in one while this process does the old (`asm.compare`). A fork, not a
process pool: nothing to import (concurrent.futures brings logging, ~20 ms), and the child is
ours to kill: when the caller fails or is interrupted (`kill`), and, with DIE_WITH_PARENT, when
this process dies however it dies (PR_SET_PDEATHSIG): a signal to flagbench must not leave the
child, and the objdump it reads, running on. The child's own programs die with it: their pipe to
it breaks.

Errors keep their meaning: a UserError in the child is raised by `result` as the same one-line
UserError; anything else as a RuntimeError with the child's traceback.
"""
from __future__ import annotations

import os
import signal
import sys

from flagbench.errors import UserError

_PIPE_SIZE = 1 << 20
_PR_SET_PDEATHSIG = 1


class Child:
    """FUNC(*ARGS) running in a forked child; DUMPS turns its result into bytes there."""

    def __init__(self, func, *args, dumps, die_with_parent: bool = False):
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        r, w = os.pipe()
        try:
            import fcntl
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        except (ImportError, AttributeError, OSError):  # not Linux, or above the pipe size limit
            pass
        pid = os.fork()
        if pid == 0:  # the child: never returns, never runs the parent's exit handlers
            status = 0
            try:
                os.close(r)
                if die_with_parent:
                    _die_with(parent)
                try:
                    payload = b"ok" + dumps(func(*args))
                except UserError as e:
                    payload = b"ue" + str(e).encode("utf-8", "surrogateescape")
                except BaseException as e:  # noqa: BLE001 - reported by the parent
                    import traceback
                    payload = b"ex" + "".join(traceback.format_exception(e)).encode("utf-8", "replace")
                with os.fdopen(w, "wb") as out:
                    out.write(payload)
            except BaseException:  # noqa: BLE001 - the pipe broke: the parent reports it
                status = 1
            finally:
                os._exit(status)
        os.close(w)
        self.pid, self._pipe = pid, r

    def result(self, loads):
        """FUNC's result, LOADS made of the bytes; the child reaped (killed if this is interrupted)."""
        try:
            with os.fdopen(self._pipe, "rb") as pipe:
                self._pipe = None
                payload = pipe.read()
            os.waitpid(self.pid, 0)
            self.pid = None
        finally:
            self.kill()
        kind, body = payload[:2], payload[2:]
        if kind == b"ue":
            raise UserError(body.decode("utf-8", "surrogateescape"))
        if kind != b"ok":
            raise RuntimeError("the child process failed:\n" + (body.decode("utf-8", "replace") or "no result"))
        return loads(body)

    def kill(self) -> None:
        """Kill the child and reap it (nothing when it has been reaped)."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None


def _die_with(parent: int) -> None:
    """Ask the kernel for SIGKILL when the parent goes; gone already: exit now."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
