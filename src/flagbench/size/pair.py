"""Read the two inputs of `flagbench size` at once: a forked child reads OLD while this process
reads NEW (most of the work is per file, in Python); or, where the work is C that lets go of the
GIL, a thread reads OLD (`both_threaded`).

The child sends its result back through a pipe with `marshal` (plain data; `flagbench size`'s is
bytes and ints: the fastest serialiser in the standard library, no import cost). Errors keep their meaning: a UserError in
the child is raised here as the same one-line UserError, and OLD's error wins over NEW's, as in
a sequential run. Small inputs are read one after the other: there a fork (and the copy-on-write
faults of a forked Python) costs more than it saves: a vmlinux with 30,000 symbols reads in
about 4 ms a side, while forking costs about 8 ms here.
"""
from __future__ import annotations

import marshal
import os
import sys

from flagbench.errors import UserError

# Below this much symbol table (an ELF file's; an archive counts its whole size, as reading
# every member's headers to find out would cost what it saves) forking does not pay.
PARALLEL_SYMTAB_BYTES = 2 << 20
# With the code outside symbols classified (every format but bom) a side costs more: fork sooner.
PARALLEL_SYMTAB_BYTES_EXTRAS = 256 << 10
PARALLEL_ARCHIVE_BYTES = 16 << 20
_PIPE_SIZE = 1 << 20


def both(func, old, new, *args, parallel: bool | None = None, threshold: int = PARALLEL_SYMTAB_BYTES):
    """(func(old, *args), func(new, *args)); OLD in a forked child when PARALLEL (None: when
    either input is large). FUNC's result must be marshal-able."""
    if parallel is None:
        parallel = _large(old, threshold) or _large(new, threshold)
    if not parallel or not hasattr(os, "fork"):
        return func(old, *args), func(new, *args)
    sys.stdout.flush()
    sys.stderr.flush()
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
            new.close()
            try:
                payload = b"ok" + marshal.dumps(func(old, *args))
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
    old.close()
    done = False
    try:
        mine, error = None, None
        try:
            mine = func(new, *args)
        except UserError as e:
            error = e
        with os.fdopen(r, "rb") as pipe:
            payload = pipe.read()
        os.waitpid(pid, 0)
        done = True
    finally:
        if not done:  # interrupted, or an unexpected error here: do not leave the child behind
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:
                pass
    kind, body = payload[:2], payload[2:]
    if kind == b"ue":
        raise UserError(body.decode("utf-8", "surrogateescape"))
    if kind != b"ok":
        raise RuntimeError("the child reading the old file failed:\n" +
                           body.decode("utf-8", "replace"))
    if error is not None:
        raise error
    return marshal.loads(body), mine


def _large(inp, threshold: int = PARALLEL_SYMTAB_BYTES) -> bool:
    """Whether reading INP's symbols takes long enough to pay for a fork."""
    if inp.kind == "archive":
        return inp.size >= PARALLEL_ARCHIVE_BYTES
    from flagbench.elf import sections
    from flagbench.elf.constants import SHT_SYMTAB
    hdrs = sections.headers(inp, inp.members[0])
    return sum(h[sections.SIZE] for h in hdrs if h[sections.TYPE] == SHT_SYMTAB) >= threshold


def both_threaded(func, old: tuple, new: tuple) -> None:
    """func(*old) on a thread of its own while func(*new) runs here: for work in C that lets go of
    the GIL (`_symtab.code_holes`). OLD's error wins, as in a sequential run. (`_thread`:
    `threading` and the functools it imports cost more than a vmlinux's holes.)"""
    import _thread
    errors: list[BaseException] = []
    finished = _thread.allocate_lock()
    finished.acquire()

    def first() -> None:
        try:
            func(*old)
        except BaseException as e:  # noqa: BLE001 - raised below, in the calling thread
            errors.append(e)
        finally:
            finished.release()
    _thread.start_new_thread(first, ())
    try:
        func(*new)
    finally:
        with finished:
            if errors:
                raise errors[0]
